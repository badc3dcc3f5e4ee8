package schema_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/schema"
)

// sha256Hex is the hash a client sends for query.
func sha256Hex(query string) string {
	sum := sha256.Sum256([]byte(query))
	return hex.EncodeToString(sum[:])
}

// nth is a distinct document for each n, all of one size.
func nth(n int) string { return fmt.Sprintf(`{ posts(limit: 1) { id } } # %06d`, n) }

func prepareOK(t testing.TB, s *schema.Schema, req schema.Request) *schema.Operation {
	t.Helper()
	op, refusal := s.Prepare(req)
	if refusal != nil {
		t.Fatalf("refused: %s", refusal.Message)
	}
	return op
}

func TestARepeatedDocumentIsPreparedOnce(t *testing.T) {
	s := newSchema(t)
	query := `query($id: ID!) { post(id: $id) { id title } }`
	for _, id := range []string{"a", "b", "c"} {
		prepareOK(t, s, schema.Request{Query: query, Variables: map[string]any{"id": id}})
	}
	got := s.CacheStats()
	want := schema.CacheStats{Hits: 2, Misses: 1, Registrations: 1, Entries: 1, Bytes: got.Bytes}
	if got != want || got.Bytes < int64(len(query)) {
		t.Errorf("stats %+v; want %+v, and the document's bytes", got, want)
	}
	t.Run("and runs each time with the request's own variables", func(t *testing.T) {
		id := create(t, s, alice, "hello")
		for range 2 {
			data, codes := exec(t, s, alice, query, map[string]any{"id": id})
			if codes != nil || !strings.Contains(data, `"title":"hello"`) {
				t.Errorf("data %s, codes %v", data, codes)
			}
		}
	})
}

func TestTheCacheStaysWithinItsBounds(t *testing.T) {
	t.Run("a cache of 3 documents keeps the 3 most recently used", func(t *testing.T) {
		s := newSchemaWith(t, 10, limitsWith(func(l *schema.Limits) { l.DocumentCacheEntries = 3 }))
		for _, n := range []int{0, 1, 2, 0, 3} { // 0 is used again before 3 comes: 1 goes
			prepareOK(t, s, schema.Request{Query: nth(n)})
		}
		before := s.CacheStats()
		for _, n := range []int{0, 2, 3} {
			prepareOK(t, s, schema.Request{Query: nth(n)})
		}
		after := s.CacheStats()
		if after.Hits-before.Hits != 3 || after.Entries != 3 || after.Evictions != 1 || after.Registrations != 4 {
			t.Errorf("stats %+v; want 0, 2 and 3 held (3 hits), 1 evicted", after)
		}
		prepareOK(t, s, schema.Request{Query: nth(1)})
		if got := s.CacheStats(); got.Misses != after.Misses+1 {
			t.Errorf("document 1 was found after its eviction: %+v", got)
		}
	})
	t.Run("registering many distinct documents only evicts", func(t *testing.T) {
		size := int64(len(nth(0))) * 200 // room for 1 document, not 2
		s := newSchemaWith(t, 10, limitsWith(func(l *schema.Limits) { l.DocumentCacheEntries, l.DocumentCacheSize = 50, size }))
		for n := range 500 {
			prepareOK(t, s, schema.Request{Query: nth(n)})
			if got := s.CacheStats(); got.Entries != 1 || got.Bytes > size {
				t.Fatalf("after %d documents: %+v; want 1 document within %d bytes", n+1, got, size)
			}
		}
		if got := s.CacheStats(); got.Registrations != 500 || got.Evictions != 499 {
			t.Errorf("stats %+v; want 500 registrations, 499 evictions", got)
		}
	})
	t.Run("a document larger than the whole cache is not kept", func(t *testing.T) {
		s := newSchemaWith(t, 10, limitsWith(func(l *schema.Limits) { l.DocumentCacheSize = 1 << 10 }))
		for range 2 {
			prepareOK(t, s, schema.Request{Query: nth(1)})
		}
		if got := s.CacheStats(); got.Entries != 0 || got.Registrations != 0 || got.Misses != 2 {
			t.Errorf("stats %+v; want nothing kept", got)
		}
	})
}

func TestTheCacheIsSharedByConcurrentRequests(t *testing.T) {
	s := newSchemaWith(t, 10, limitsWith(func(l *schema.Limits) { l.DocumentCacheEntries = 8 }))
	const workers, rounds, distinct = 8, 200, 12 // more documents than the cache holds: it evicts as it serves
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				n := (w + i) % distinct
				limit := 1 + i%5
				req := schema.Request{Query: fmt.Sprintf(`query($n: Int) { posts(limit: $n) { id } } # %d`, n), Variables: map[string]any{"n": float64(limit)}}
				if i%2 == 1 {
					req = schema.Request{PersistedHash: sha256Hex(req.Query), Variables: req.Variables}
				}
				if _, refusal := s.Prepare(req); refusal != nil && refusal.Extensions["code"] != errcode.PersistedQueryNotFound.GraphQL {
					t.Errorf("refused: %s", refusal.Message)
					return
				}
			}
		})
	}
	wg.Wait()
	got := s.CacheStats()
	if got.Hits+got.Misses != workers*rounds || got.Entries > 8 || got.Registrations-got.Evictions != uint64(got.Entries) {
		t.Errorf("stats %+v do not add up for %d requests and a cache of 8", got, workers*rounds)
	}
}

// cachedAlike is a request refused on its own, and the request (warm) that admits its document
// before it, whatever it names.
type cachedAlike struct {
	name       string
	limits     func(l *schema.Limits)
	warm, cold schema.Request
}

// TestACachedDocumentIsRefusedAsAnUncachedOne sends each refused request to a schema that never
// saw its document, and to one that admitted the document for another request just before, both
// with the text and with the hash alone: the refusals are the same, nothing passes because its
// document was cached.
func TestACachedDocumentIsRefusedAsAnUncachedOne(t *testing.T) {
	twoOperations := func(other string) string { return `query A { posts(limit: 1) { id } } query B { ` + other + ` }` }
	costly := `query($n: Int = 1) { posts(limit: $n) { author { posts(limit: $n) { id title } } } }`
	costlyByDefault := strings.Replace(costly, "= 1", "= 100", 1)
	for _, tt := range []cachedAlike{
		{name: "an operation past max_aliases",
			warm: schema.Request{Query: twoOperations(aliases("__typename", 31)), OperationName: "A"},
			cold: schema.Request{Query: twoOperations(aliases("__typename", 31)), OperationName: "B"}},
		{name: "an operation past max_root_fields",
			warm: schema.Request{Query: twoOperations(strings.Repeat("posts(limit: 1) { id } ", 11)), OperationName: "A"},
			cold: schema.Request{Query: twoOperations(strings.Repeat("posts(limit: 1) { id } ", 11)), OperationName: "B"}},
		{name: "a cost past max_cost for the request's variables",
			warm: schema.Request{Query: costly, Variables: map[string]any{"n": 2.0}},
			cold: schema.Request{Query: costly, Variables: map[string]any{"n": 100.0}}},
		{name: "a cost past max_cost for the variables' defaults",
			warm: schema.Request{Query: costlyByDefault, Variables: map[string]any{"n": 2.0}},
			cold: schema.Request{Query: costlyByDefault}},
		{name: "a fixed cost past max_cost",
			warm: schema.Request{Query: twoOperations(`posts(limit: 100) { author { posts(limit: 100) { id } } }`), OperationName: "A"},
			cold: schema.Request{Query: twoOperations(`posts(limit: 100) { author { posts(limit: 100) { id } } }`), OperationName: "B"}},
		{name: "introspection where it is off", limits: func(l *schema.Limits) { l.DisableIntrospection = true },
			warm: schema.Request{Query: twoOperations(`__schema { types { name } }`), OperationName: "A"},
			cold: schema.Request{Query: twoOperations(`__schema { types { name } }`), OperationName: "B"}},
		{name: "a variable of the wrong type",
			warm: schema.Request{Query: costly, Variables: map[string]any{"n": 1.0}},
			cold: schema.Request{Query: costly, Variables: map[string]any{"n": "one"}}},
		{name: "a required variable not given",
			warm: schema.Request{Query: `query($id: ID!) { post(id: $id) { id } }`, Variables: map[string]any{"id": "x"}},
			cold: schema.Request{Query: `query($id: ID!) { post(id: $id) { id } }`}},
		{name: "an operation the document does not have",
			warm: schema.Request{Query: twoOperations("posts { id }"), OperationName: "A"},
			cold: schema.Request{Query: twoOperations("posts { id }"), OperationName: "C"}},
		{name: "no operation named in a document of two",
			warm: schema.Request{Query: twoOperations("posts { id }"), OperationName: "A"},
			cold: schema.Request{Query: twoOperations("posts { id }")}},
	} {
		t.Run(tt.name+" is refused alike, cached or not", func(t *testing.T) {
			limits := limitsWith(func(l *schema.Limits) {
				if tt.limits != nil {
					tt.limits(l)
				}
			})
			_, want := newSchemaWith(t, 100, limits).Prepare(tt.cold)
			if want == nil {
				t.Fatal("the request is admitted uncached")
			}
			s := newSchemaWith(t, 100, limits)
			prepareOK(t, s, tt.warm)
			byHash := tt.cold
			byHash.Query, byHash.PersistedHash = "", sha256Hex(tt.cold.Query)
			for _, req := range []schema.Request{tt.cold, byHash, tt.cold} {
				before := s.CacheStats().Hits
				_, got := s.Prepare(req)
				if !sameRefusal(got, want) {
					t.Errorf("cached: %+v; uncached: %+v", got, want)
				}
				if s.CacheStats().Hits != before+1 {
					t.Errorf("the document was not found in the cache")
				}
			}
			prepareOK(t, s, tt.warm) // and what was admitted still is
		})
	}
}

func sameRefusal(a, b *gqlerrors.QueryError) bool {
	return a != nil && b != nil && a.Message == b.Message && reflect.DeepEqual(a.Locations, b.Locations) && reflect.DeepEqual(a.Extensions, b.Extensions)
}

// TestACachedDocumentIsValidatedAsItRuns: graphql-go validates the document on each Execute,
// max_depth among its rules, so a document that Prepare admits and graphql-go refuses is refused
// again from the cache.
func TestACachedDocumentIsValidatedAsItRuns(t *testing.T) {
	s := newSchemaWith(t, 100, limitsWith(func(l *schema.Limits) { l.MaxDepth = 2 }))
	ctx := auth.NewContext(t.Context(), alice)
	for _, query := range []string{`{ posts(limit: 1) { author { name } } }`, `{ posts(limit: 1) { nope } }`} {
		first := s.Do(ctx, schema.Request{Query: query})
		again := s.Do(ctx, schema.Request{Query: query})
		byHash := s.Do(ctx, schema.Request{PersistedHash: sha256Hex(query)})
		for _, res := range []any{again, byHash} {
			if !reflect.DeepEqual(res, first) || first.Data != nil || len(first.Errors) == 0 {
				t.Errorf("%s: %+v; first %+v; want the same validation errors", query, res, first)
			}
		}
	}
	if got := s.CacheStats(); got.Hits != 4 {
		t.Errorf("stats %+v; want the second and third of each found in the cache", got)
	}
}

func TestARefusedDocumentIsNotKept(t *testing.T) {
	s := newSchemaWith(t, 100, strictLimits)
	for _, query := range []string{
		"{ posts { id } }" + strings.Repeat(" ", 200), // max_query_length
		`{ posts { id }`,                      // a syntax error
		`{ a: posts { id } b: posts { id } }`, // max_cost
		`{ __schema { types { name } } }`,     // introspection is off
	} {
		for range 2 {
			if _, refusal := s.Prepare(schema.Request{Query: query}); refusal == nil {
				t.Fatalf("%s: admitted", query)
			}
		}
		if _, refusal := s.Prepare(schema.Request{PersistedHash: sha256Hex(query)}); refusal == nil || refusal.Extensions["code"] != errcode.PersistedQueryNotFound.GraphQL {
			t.Errorf("%s: its hash alone is answered %+v; want PERSISTED_QUERY_NOT_FOUND", query, refusal)
		}
	}
	if got := s.CacheStats(); got.Registrations != 0 || got.Entries != 0 || got.Hits != 0 {
		t.Errorf("stats %+v; want nothing kept, nothing found", got)
	}
}
