package handlers

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// BenchmarkCreate serves POST /posts on the embedded store, in the process, without a key (the
// baseline), with a new key each time (a reservation, then the post and its answer in one
// transaction), and again with one key (a replay of the kept answer).
func BenchmarkCreate(b *testing.B) {
	st, err := sqlite.Open(b.TempDir(), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	svc := posts.NewService(posts.Config{Store: st, Timeout: 5 * time.Second, MaxLimit: 100, Logger: zap.NewNop()})
	key, err := auth.ParseAPIKey("bench-key", "alice")
	if err != nil {
		b.Fatal(err)
	}
	a := New(Config{Posts: svc, MaxBodySize: 1 << 20, Logger: zap.NewNop(),
		Auth: &auth.Authenticator{APIKeyHeader: "X-API-Key", APIKeys: []auth.APIKey{key}}})
	var keys atomic.Int64 // across the runs of -count
	const body = `{"title": "Hello, world", "body": "A first post, as short as most of them are."}`
	for _, tc := range []struct {
		name string
		key  func(i int) string
	}{
		{"without a key", func(int) string { return "" }},
		{"with a new key", func(int) string { return fmt.Sprint("new-", keys.Add(1)) }},
		{"a retry of one key", func(int) string { return "again" }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r := httptest.NewRequest(http.MethodPost, "/posts", strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("X-API-Key", "bench-key")
				if k := tc.key(i); k != "" {
					r.Header.Set(answer.IdempotencyKeyHeader, k)
				}
				w := httptest.NewRecorder()
				a.Route(r).ServeHTTP(w, r)
				if w.Code != http.StatusCreated {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
