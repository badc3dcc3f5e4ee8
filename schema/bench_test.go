package schema_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store"
)

// BenchmarkGraphQL runs the common operations, each in parts as the transports run them:
//
//   - prepare: Schema.Prepare, the limits' work before anything runs, uncached (parse, pick the
//     operation, the admission pass, coerce the variables, the cost, print) and cached (the
//     document found by the hash of its text: pick the operation, coerce the variables, and the
//     cost only if it reads them);
//   - execute: Schema.Execute of the prepared operation: a query by its document's plan
//     (plan.go; graphql-go validated the document on the first run), a mutation by graphql-go's
//     parse, validation and execution; the resolvers, and the posts.Service and store calls.
//
// The service is the real one on the embedded store, built as the tests build it, so execute
// includes the store's work: its ns/op and allocs/op include the SQLite query.
func BenchmarkGraphQL(b *testing.B) {
	s := newSchemaWith(b, 100, schema.DefaultLimits)
	uncached := newSchemaWith(b, 100, limitsWith(func(l *schema.Limits) { l.DocumentCacheEntries = 0 }))
	var id string
	for i := range 20 { // alice's posts fill each list; her first write saves her profile
		id = create(b, s, alice, fmt.Sprintf("post %d", i))
	}
	ctx := auth.NewContext(b.Context(), alice)
	ops := []struct {
		name string
		req  schema.Request
	}{
		{"post", schema.Request{
			Query:     `query($id: ID!) { post(id: $id) { id userId title body createdAt updatedAt } }`,
			Variables: map[string]any{"id": id},
		}},
		{"user_posts", schema.Request{
			Query:     `query($id: ID!) { user(id: $id) { posts(limit: 10) { title createdAt } } }`,
			Variables: map[string]any{"id": alice.UserID},
		}},
		{"posts_authors", schema.Request{Query: `{ posts(limit: 20) { id title author { name } } }`}},
		// Last: each run adds posts.
		{"create_post", schema.Request{
			Query:     `mutation($title: String!) { createPost(input: {title: $title, body: "b"}) { id createdAt } }`,
			Variables: map[string]any{"title": "benchmark"},
		}},
	}
	for _, o := range ops {
		b.Run(o.name, func(b *testing.B) {
			for _, prepare := range []struct {
				name string
				s    *schema.Schema
			}{{"prepare/uncached", uncached}, {"prepare/cached", s}} {
				b.Run(prepare.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if _, refusal := prepare.s.Prepare(o.req); refusal != nil {
							b.Fatal(refusal)
						}
					}
				})
			}
			b.Run("execute", func(b *testing.B) {
				op, refusal := s.Prepare(o.req)
				if refusal != nil {
					b.Fatal(refusal)
				}
				b.ReportAllocs()
				for b.Loop() {
					if res := s.Execute(ctx, op); len(res.Errors) > 0 || len(res.Data) < 20 {
						b.Fatalf("%s: %v", res.Data, res.Errors)
					}
				}
			})
		})
	}
}

// BenchmarkSubscriptionEvent publishes one event to a subscribed feed and waits for its
// response: the feed's work per event, once whatever the number of subscribers (graphql-go
// executes the subscription's selection on the post, and the response is encoded to JSON),
// with the hand-offs between the goroutines on the way. handlers' BenchmarkEventMessage is
// the part paid per subscriber. The store is not used. bodies_3x300kB is a large response, a
// body of 50,000 '<' under three aliases: its B/op is the copies an event's 900 kB take.
func BenchmarkSubscriptionEvent(b *testing.B) {
	short, long := "A first post, as short as most of them are.", strings.Repeat("<", 50_000)
	for _, sub := range []struct {
		name, query string
		body        *string
	}{
		{"id_title", `subscription { postCreated { id title } }`, &short},
		{"all_fields", `subscription { postCreated { id userId title body createdAt updatedAt } }`, &short},
		{"bodies_3x300kB", `subscription { postCreated { a: body b: body c: body } }`, &long},
	} {
		b.Run(sub.name, func(b *testing.B) {
			s, _, broker := subscribed(b, 16)
			op, refusal := s.Prepare(schema.Request{Query: sub.query})
			if refusal != nil {
				b.Fatal(refusal)
			}
			responses := make(chan json.RawMessage, 1)
			l, err := s.Listen("address 192.0.2.1", op, posts.Caller{}, func(p json.RawMessage) { responses <- p }, func(error) { close(responses) })
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			for deadline := time.Now().Add(5 * time.Second); broker.Subscribers() == 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatal("the feed did not subscribe in 5s")
				}
			}
			created := time.Now().UTC().Truncate(time.Millisecond)
			e := posts.Event{Kind: posts.Created, Post: posts.Post{
				ID: store.NewID(created), UserID: alice.UserID, Title: "Hello, world", Body: sub.body, CreatedAt: created, UpdatedAt: created}}
			b.ReportAllocs()
			for b.Loop() {
				broker.Publish(&e)
				if p, ok := <-responses; !ok || len(p) == 0 {
					b.Fatal("the feed ended")
				}
			}
		})
	}
}

// BenchmarkLargeResponsesOfWrites is the amplification attack of issue 37: distinct
// subscriptions each selecting a body under n aliases, then posts of 50,000 '<' (300 kB of JSON
// each) written at once: one client's 100 feeds and six posts, and 1,000 feeds of 10 clients and
// one post. With 30 aliases every response is RESPONSE_TOO_LARGE before it is built; with 27
// (8.1 MB, under max_response_size) eight feeds answer each write, the others are refused, and
// the large responses are resolved one at a time. peak-heap-MB is the most the heap in use grew
// while the feeds answered (sampled every 2 ms), alloc-MB what they allocated. Run it once:
// -bench LargeResponsesOfWrites -benchtime 1x.
func BenchmarkLargeResponsesOfWrites(b *testing.B) {
	for _, tt := range []struct{ feeds, clients, writes, aliases int }{{100, 1, 6, 30}, {100, 1, 6, 27}, {1000, 10, 1, 30}, {1000, 10, 1, 27}} {
		b.Run(fmt.Sprintf("%d_feeds_%d_writes_%d_aliases", tt.feeds, tt.writes, tt.aliases), func(b *testing.B) {
			s, svc, broker := subscribed(b, 16)
			var answered, got atomic.Int64
			for i := range tt.feeds {
				var q strings.Builder
				q.WriteString("subscription { postCreated { ")
				for a := range tt.aliases {
					fmt.Fprintf(&q, "f%d_%d: body ", i, a)
				}
				q.WriteString("} }")
				op, refusal := s.Prepare(schema.Request{Query: q.String()})
				if refusal != nil {
					b.Fatal(refusal)
				}
				l, err := s.Listen(fmt.Sprint("client ", i%tt.clients), op, alice, func(p json.RawMessage) {
					if !bytes.Contains(p[:min(len(p), 100)], []byte(`"errors"`)) {
						answered.Add(1)
					}
					got.Add(1)
				}, func(error) {})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
			}
			for deadline := time.Now().Add(5 * time.Second); broker.Subscribers() < tt.feeds; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatal("the feeds did not subscribe in 5s")
				}
			}
			big := strings.Repeat("<", 50_000)
			var peak, alloc uint64
			for b.Loop() {
				var before runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				got.Store(0)
				stop, sampled := make(chan struct{}), make(chan uint64)
				go func() {
					var m runtime.MemStats
					most := before.HeapInuse
					for {
						runtime.ReadMemStats(&m)
						most = max(most, m.HeapInuse)
						select {
						case <-stop:
							sampled <- most
							return
						case <-time.After(2 * time.Millisecond):
						}
					}
				}()
				for range tt.writes {
					if _, err := svc.Create(b.Context(), alice, posts.NewPost{Title: "big", Body: &big}); err != nil {
						b.Fatal(err)
					}
				}
				want := int64(tt.feeds * tt.writes)
				for deadline := time.Now().Add(time.Minute); got.Load() < want; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						b.Fatalf("%d of %d responses in a minute", got.Load(), want)
					}
				}
				close(stop)
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				peak, alloc = max(peak, <-sampled-before.HeapInuse), max(alloc, after.TotalAlloc-before.TotalAlloc)
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			b.ReportMetric(float64(alloc)/(1<<20), "alloc-MB")
			b.ReportMetric(float64(answered.Load())/float64(b.N), "answered/op")
		})
	}
}
