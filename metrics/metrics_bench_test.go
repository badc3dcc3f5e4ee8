//go:build !race

// Benchmarks only, which go test -race does not run: left out of its build rather than linked
// with the race detector for nothing.

package metrics

import (
	"testing"
	"time"
)

func BenchmarkRecord(b *testing.B) {
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			Request(REST, "GET /posts/{id}", "200", time.Millisecond)
		}
	})
	b.Run("store", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			StoreOperation("sqlite", "get_post", "", time.Millisecond)
		}
	})
	b.Run("auth", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			Auth("none", "anonymous")
		}
	})
}
