package handlers

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

func TestEachAnswerSaysWhatCachesMayDoWithIt(t *testing.T) {
	s := newWSServerWith(t, testSubscriptions, testLimits, posts.Config{})
	created := askREST(t, s.http, http.MethodPost, "/posts", wsKey, `{"title": "cached"}`, "")
	if created.StatusCode != http.StatusCreated {
		t.Fatalf("creating a post: %d", created.StatusCode)
	}
	post := created.Header.Get("Location")
	const (
		public, private, never = "public, max-age=0, must-revalidate", "private, max-age=0, must-revalidate", "no-store"
		rest, graphQL          = "Authorization, X-Api-Key, Origin", "Accept, Authorization, X-Api-Key, Origin"
		list                   = graphQL // /posts streams its changes to a client that asks for text/event-stream
	)
	get := func(query string) string { return graphqlPath + "?" + url.Values{"query": {query}}.Encode() }
	personal := get(`{ posts { author { email } } }`)
	tests := []struct {
		name, method, path, key, body, accept string
		status                                int
		cacheControl, vary                    string
	}{
		{"an anonymous list is public", "GET", "/posts", "", "", "", 200, public, list},
		{"an anonymous HEAD of a post is public", "HEAD", post, "", "", "", 200, public, rest},
		{"alice's read of the same post is private", "GET", post, wsKey, "", "", 200, private, rest},
		{"the post she creates is private", "POST", "/posts", wsKey, `{"title": "mine"}`, "", 201, private, list},
		{"her change to it is private", "PATCH", post, wsKey, `{"title": "changed"}`, "", 200, private, rest},
		{"bob's refused change is a 403 that no cache keeps", "PATCH", post, wsBobKey, `{"title": "his"}`, "", 403, never, rest},
		{"a read with an unknown key is a 401 that no cache keeps", "GET", post, "not-a-key", "", "", 401, never, rest},
		{"a write without credentials is a 401 that no cache keeps", "POST", "/posts", "", `{"title": "x"}`, "", 401, never, list},
		{"a missing post is a 404 that no cache keeps", "GET", "/posts/6b011fa03aa928307595aeda", "", "", "", 404, never, rest},
		{"a path under /posts/ that names nothing is a 404 that no cache keeps", "GET", "/posts/a/b", "", "", "", 404, never, "Origin"},
		{"a method the path does not serve is a 405 that no cache keeps", "PUT", "/posts", "", "", "", 405, never, list},
		{"an anonymous GraphQL query over GET is public", "GET", personal, "", "", "", 200, public, graphQL},
		{"alice's query of the same URL, whose emails she may read, is private", "GET", personal, wsKey, "", "", 200, private, graphQL},
		{"a query over POST by alice is private", "POST", graphqlPath, wsKey, `{"query": "{ posts { id } }"}`, "", 200, private, graphQL},
		{"a GraphQL syntax error is no-store", "GET", get("{ posts {"), "", "", "", 400, never, graphQL},
		{"a GraphQL syntax error is no-store in application/json too, where it is a 200", "GET", get("{ posts {"), "", "", answer.ApplicationJSON, 200, never, graphQL},
		{"a mutation over GET is a 405 that no cache keeps", "GET", get(`mutation { deletePost(id: "x") }`), wsKey, "", "", 405, never, graphQL},
		{"an unknown persisted query is no-store", "GET", graphqlPath + "?" + url.Values{"extensions": {persistedQuery("{ never { sent } }")}}.Encode(), "", "", "", 200, never, graphQL},
		{"a GraphQL request with an unknown key is a 401 that no cache keeps", "GET", get("{ posts { id } }"), "not-a-key", "", "", 401, never, graphQL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := askREST(t, s.http, tt.method, tt.path, tt.key, tt.body, tt.accept)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d; want %d", res.StatusCode, tt.status)
			}
			if got := res.Header.Get("Cache-Control"); got != tt.cacheControl {
				t.Errorf("Cache-Control %q; want %q", got, tt.cacheControl)
			}
			if got := strings.Join(res.Header.Values("Vary"), ", "); got != tt.vary {
				t.Errorf("Vary %q; want %q", got, tt.vary)
			}
		})
	}
}

// askREST sends a request to the server at base with the API key key, a JSON body and an Accept
// header, each left out when "".
func askREST(t *testing.T, base, method, path, key, body, accept string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

func TestAnswersToACallerThatCaddyIdentified(t *testing.T) {
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const upstreamHeader = "X-Test-Caddy-User" // stands for {http.auth.user.id}
	a := New(Config{
		Posts: posts.NewService(posts.Config{Store: st, Timeout: 5 * time.Second, MaxLimit: 100, Logger: zap.NewNop()}),
		Auth: &auth.Authenticator{
			APIKeyHeader: "X-API-Key", APIKeys: []auth.APIKey{mustKey(t, wsKey, "alice")},
			Upstream: func(r *http.Request) string { return r.Header.Get(upstreamHeader) },
		},
		MaxBodySize: 1 << 20, MaxResponseSize: 1 << 20, Logger: zap.NewNop(),
	})
	tests := []struct {
		name, user, key, cacheControl string
	}{
		{"alone are stored by no cache: Vary cannot name what it showed Caddy", "alice", "", "private, no-store"},
		{"with an API key of the same user, which Vary names, are private", "alice", wsKey, "private, max-age=0, must-revalidate"},
		{"not at all, an anonymous request, are public", "", "", "public, max-age=0, must-revalidate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/posts", nil)
			if tt.user != "" {
				r.Header.Set(upstreamHeader, tt.user)
			}
			if tt.key != "" {
				r.Header.Set("X-API-Key", tt.key)
			}
			w := httptest.NewRecorder()
			a.Route(r).ServeHTTP(w, r)
			if w.Code != http.StatusOK || w.Header().Get("Cache-Control") != tt.cacheControl {
				t.Errorf("%d, Cache-Control %q; want 200, %q", w.Code, w.Header().Get("Cache-Control"), tt.cacheControl)
			}
		})
	}
}

// TestAnAnswersFixedHeadersAreItsOwn writes into the values of an answer's header fields in
// place, as Caddy's header directive does when it replaces a value at write time (deferred),
// and checks that the next answers, of REST and GraphQL, anonymous and identified, keep theirs
// (their CORS headers among them: the requests come from a page of the site's own).
func TestAnAnswersFixedHeadersAreItsOwn(t *testing.T) {
	a, _ := newKeyedAPI(t, wsKey)
	requests := []struct {
		name, method, path, key string
	}{
		{"an anonymous REST read", http.MethodGet, "/posts", ""},
		{"an identified REST read", http.MethodGet, "/posts", wsKey},
		{"a REST failure", http.MethodGet, "/posts/nonesuch", ""},
		{"an anonymous GraphQL query", http.MethodGet, "/graphql?query=%7B__typename%7D", ""},
		{"an identified GraphQL query", http.MethodGet, "/graphql?query=%7B__typename%7D", wsKey},
	}
	serve := func(method, path, key string) http.Header {
		r := httptest.NewRequest(method, path, nil)
		r.Header.Set("Accept", "application/json")
		r.Header.Set("Origin", "http://"+r.Host) // a page of the site's own: its CORS headers are fixed ones too
		if key != "" {
			r.Header.Set("X-API-Key", key)
		}
		w := httptest.NewRecorder()
		a.Route(r).ServeHTTP(w, r)
		return w.Header()
	}
	for _, tt := range requests {
		t.Run(tt.name+" keeps its header values after another answer's were replaced in place", func(t *testing.T) {
			want := serve(tt.method, tt.path, tt.key).Clone()
			for _, other := range requests {
				h := serve(other.method, other.path, other.key)
				for _, values := range h {
					for i := range values {
						values[i] = "replaced"
					}
				}
			}
			got := serve(tt.method, tt.path, tt.key)
			for _, name := range []string{"Vary", "Cache-Control", "Content-Type", "X-Content-Type-Options",
				"Access-Control-Allow-Credentials", "Access-Control-Expose-Headers"} { // answer.SetFixed's
				if !slices.Equal(got[name], want[name]) || len(want[name]) == 0 {
					t.Errorf("%s: %q; before, %q", name, got[name], want[name])
				}
			}
		})
	}
}
