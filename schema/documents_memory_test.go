//go:build !race

// A measure of memory, which the race detector distorts (its sync.Pool drops what it is given):
// make test runs it in its step without it.

package schema_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/schema"
)

// The cache counts each document as taking schema's bound of bytes per byte of its text, the
// densest documents included: the memory the documents it holds take is at most what it says.
func TestTheCacheChargesTheMemoryItsDocumentsTake(t *testing.T) {
	length := schema.DefaultLimits.MaxQueryLength - 100
	fill := func(unit string) string { return strings.Repeat(unit, length/len(unit)) }
	spreadTenTimes := ""
	for i := range 10 {
		spreadTenTimes += fmt.Sprintf(` a%d: post(id: "0") { ...F }`, i)
	}
	for _, shape := range []struct{ name, query string }{
		{"a default value of 8,000 integers", `query($a: [Int] = [` + fill("1 ") + `]) { posts { id } }`},
		{"a default value of 8,000 empty lists", `query($a: [[Int]] = [` + fill("[]") + `]) { posts { id } }`},
		{"a default value of 4,000 empty objects", `query($a: [PostInput] = [` + fill("{}") + `]) { posts { id } }`},
		{"a field with 8,000 directives", `{ posts { id ` + fill("@a") + ` } }`},
		{"8,000 comments", "{ posts { id } }\n" + fill("#\n")},
		{"499 fields", `{ post(id: "0") { ` + strings.Repeat("id ", 498) + `} }`},
		{"a variable of a list type nested 900 deep", `query($a: ` + strings.Repeat("[", 900) + "Int" + strings.Repeat("]", 900) + `) { posts { id } }`},
		{"a typical operation", `query Post($id: ID = "0") { post(id: $id) { id title body createdAt author { id name } } }`},
		// Its plan (plan.go) has a field for each of the 320 its fragments expand to.
		{"a fragment spread ten times", `{` + spreadTenTimes + ` }
fragment F on Post { id userId title body createdAt updatedAt version author { id name email posts(limit: 1) {
  id userId title body createdAt updatedAt version author { id name email posts(limit: 1) { id userId title body createdAt updatedAt version } } } } }`},
	} {
		t.Run(shape.name, func(t *testing.T) {
			s := newSchemaWith(t, 10, limitsWith(func(l *schema.Limits) { l.DocumentCacheSize = 1 << 40 }))
			const documents = 20
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for i := range documents {
				op, refusal := s.Prepare(schema.Request{Query: shape.query + fmt.Sprintf("\n# %d", i)})
				if refusal != nil {
					t.Fatalf("refused: %s", refusal.Message)
				}
				s.Execute(t.Context(), op) // which plans a query graphql-go finds valid (most of these it does not)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			stats := s.CacheStats()
			if stats.Entries != documents {
				t.Fatalf("the cache holds %d documents; want %d", stats.Entries, documents)
			}
			taken := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			t.Logf("%d bytes of text: %d bytes taken, %d counted (%.0f and %.0f per byte)", len(shape.query), taken/documents, stats.Bytes/documents,
				float64(taken)/documents/float64(len(shape.query)), float64(stats.Bytes)/documents/float64(len(shape.query)))
			if taken > stats.Bytes {
				t.Errorf("the documents take %d bytes; the cache counts %d", taken, stats.Bytes)
			}
		})
	}
}
