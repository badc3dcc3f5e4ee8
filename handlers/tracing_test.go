package handlers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/internal/race"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// TestSpansCostNothingWhenTracingIsOff serves a read by id over REST and over GraphQL, through
// an observed store as Caddy's config has it, in a request that carries no span (tracing off),
// one whose sampler left it out (a sampling ratio of 0), and one that is traced: the first two
// allocate as much as each other, and no more than the same paths did before the module had
// spans (before), and the third makes its spans (so that the first two would show a span made
// by mistake).
func TestSpansCostNothingWhenTracingIsOff(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates on its own: counted by make test's run without it (internal/norace)")
	}
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	observed := store.Observe(st, "sqlite", func(string, time.Duration, error) {})
	svc := posts.NewService(posts.Config{Store: observed, Timeout: 5 * time.Second, MaxLimit: 100, Logger: zap.NewNop()})
	graph, err := schema.New(svc, zap.NewNop(), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{Posts: svc, GraphQL: graph, MaxBodySize: 1 << 20, MaxResponseSize: testLimits.MaxResponseSize, Logger: zap.NewNop(),
		Auth: &auth.Authenticator{}})
	p, err := svc.Create(t.Context(), auth.Identity{UserID: "alice", Method: "api_key"}, posts.NewPost{Title: "traced"})
	if err != nil {
		t.Fatal(err)
	}

	recorded := tracetest.NewSpanRecorder()
	traced := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorded))
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	modes := []struct {
		name string
		ctx  func() context.Context
	}{
		{"off", context.Background},
		{"ratio 0", func() context.Context {
			ctx, _ := unsampled.Tracer("caddy").Start(context.Background(), "caddy")
			return ctx
		}},
		{"on", func() context.Context {
			ctx, _ := traced.Tracer("caddy").Start(context.Background(), "caddy")
			return ctx
		}},
	}
	paths := []struct {
		name   string
		req    func() *http.Request
		spans  []string // what a traced request makes
		before float64  // its allocations at d543f47, the last commit without spans, with this test
	}{
		{"GET /posts/{id}", func() *http.Request { return httptest.NewRequest("GET", "/posts/"+p.ID, nil) },
			[]string{"GET /posts/{id}", "get_post posts"}, 27},
		{"a GraphQL query", func() *http.Request {
			r := httptest.NewRequest("POST", "/graphql", strings.NewReader(`{"query":"{ post(id: \"`+p.ID+`\") { title } }"}`))
			r.Header.Set("Content-Type", "application/json")
			return r
		}, []string{"query", "graphql.prepare", "graphql.execute", "get_post posts", "graphql.write"}, 56},
	}
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			allocs := map[string]float64{}
			for _, mode := range modes {
				ctx := mode.ctx() // the request's span, Caddy's, made before the handler runs
				serve := func() {
					r := path.req()
					r = r.WithContext(ctx)
					w := httptest.NewRecorder()
					a.Route(r).ServeHTTP(w, r)
					if w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"errors"`) {
						t.Fatalf("%s answered %d %s", mode.name, w.Code, w.Body)
					}
				}
				serve() // the document's cache and the post's
				allocs[mode.name] = testing.AllocsPerRun(200, serve)
			}
			t.Logf("allocations per request: off %.1f, ratio 0 %.1f, on %.1f", allocs["off"], allocs["ratio 0"], allocs["on"])
			// A stray allocation of another goroutine (the store's) now and then is not the
			// request's: half a one per request is far below what one span costs (over ten).
			if allocs["ratio 0"] > allocs["off"]+0.5 {
				t.Errorf("a request its sampler left out allocates %.1f, more than one with tracing off (%.1f)", allocs["ratio 0"], allocs["off"])
			}
			if allocs["off"] > path.before+0.5 {
				t.Errorf("with tracing off, a request allocates %.1f, more than the %.0f it did before the module had spans", allocs["off"], path.before)
			}
			if allocs["on"] < allocs["off"]+5 {
				t.Errorf("a traced request allocates %.1f, hardly more than an untraced one (%.1f): its spans were not made", allocs["on"], allocs["off"])
			}
			var names []string
			for _, s := range recorded.Ended() {
				if !slices.Contains(names, s.Name()) {
					names = append(names, s.Name())
				}
			}
			for _, want := range path.spans {
				if !slices.Contains(names, want) {
					t.Errorf("a traced request made no span %q; it made %q", want, names)
				}
			}
			recorded.Reset()
		})
	}
}
