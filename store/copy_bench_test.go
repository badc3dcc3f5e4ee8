//go:build !race

// A benchmark, measured without the race detector; left out of its build, the package's race
// test binary links no FerretDB.

package store_test

import (
	"fmt"
	"testing"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// BenchmarkCopy copies a store of 20,000 posts between the embedded store and FerretDB (in
// this process, on its SQLite backend), and SQLite to SQLite as the baseline, and reports the
// posts copied a second, the comparison after the copy included:
//
//	go test -run '^$' -bench BenchmarkCopy -benchtime 3x ./store/
func BenchmarkCopy(b *testing.B) {
	const n = 20_000
	sqliteSource := open(b)
	seed(b, sqliteSource, n)
	server, err := mongotest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(server.Close)
	databases := 0
	ferretDB := func(b *testing.B) *mongo.Store {
		databases++
		s, err := mongo.Open(server.URI, fmt.Sprint("bench", databases))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	ferretSource := ferretDB(b)
	if _, err := store.Copy(b.Context(), sqliteSource, ferretSource, store.CopyOptions{}); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name   string
		from   store.CopySource
		target func(*testing.B) store.CopyTarget
	}{
		{"sqlite to sqlite", sqliteSource, func(b *testing.B) store.CopyTarget { return open(b) }},
		{"sqlite to ferretdb", sqliteSource, func(b *testing.B) store.CopyTarget { return ferretDB(b) }},
		{"ferretdb to sqlite", ferretSource, func(b *testing.B) store.CopyTarget { return open(b) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				to := bc.target(b)
				b.StartTimer()
				done, err := store.Copy(b.Context(), bc.from, to, store.CopyOptions{})
				if err != nil || !done.OK() || done.Posts.Inserted != n {
					b.Fatalf("Copy = %+v, %v", done, err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "posts/s")
		})
	}
}
