//go:build ecosystem

// The modules in front of the module (a rate limit) and behind it (the rest of the site).

package ecosystem

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func TestRateLimit(t *testing.T) {
	s := start(t, "rate_limit", setup{env: []string{"POSTS_API_KEY=" + aliceKey}})
	key := "Authorization: ApiKey " + aliceKey
	var first post
	for i := range 10 {
		res := s.call(t, "POST", "/posts", fmt.Sprintf(`{"title": "write %d"}`, i), key)
		if res.status != 201 {
			t.Fatalf("write %d of the 10 a minute allows: %d %s", i, res.status, res.body)
		}
		if i == 0 {
			first = postOf(t, res)
		}
	}
	refused := []struct{ name, method, path, body string }{
		{"an 11th post", "POST", "/posts", `{"title": "one too many"}`},
		{"a change", "PATCH", "/posts/" + first.ID, `{"title": "changed"}`},
		{"a deletion", "DELETE", "/posts/" + first.ID, ""},
		{"a GraphQL mutation", "POST", "/graphql", `{"query": "mutation { createPost(input: {title: \"by mutation\"}) { id } }"}`},
	}
	for _, r := range refused {
		t.Run(r.name+" past the limit is a 429 with Retry-After, and changes nothing", func(t *testing.T) {
			res := s.call(t, r.method, r.path, r.body, key)
			if res.status != http.StatusTooManyRequests {
				t.Fatalf("%d %s; want 429", res.status, res.body)
			}
			if seconds, err := strconv.Atoi(res.header.Get("Retry-After")); err != nil || seconds < 1 || seconds > 60 {
				t.Errorf("Retry-After %q; want the seconds until the window has room, at most its minute", res.header.Get("Retry-After"))
			}
			if n := s.stored(t); n != 10 {
				t.Errorf("%d posts stored; want the 10 allowed", n)
			}
			if got := postOf(t, s.call(t, "GET", "/posts/"+first.ID, "")); got != first {
				t.Errorf("the first post is now %+v; want it as created, %+v", got, first)
			}
		})
	}
	t.Run("reads are outside the zone and still served", func(t *testing.T) {
		res := s.call(t, "GET", "/posts?limit=20", "")
		if res.status != 200 || strings.Count(res.body, `"id"`) != 10 {
			t.Errorf("%d %s; want the 10 posts", res.status, res.body)
		}
	})
}

func TestReverseProxy(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Served-By", "the app")
		fmt.Fprintf(w, "the app: %s %s %s", r.Method, r.URL.RequestURI(), body)
	}))
	t.Cleanup(app.Close)
	s := start(t, "reverse_proxy", setup{
		replace: map[string]string{"localhost:3000": app.Listener.Addr().String()},
		env:     []string{"POSTS_API_KEY=" + aliceKey},
	})
	tests := []struct {
		name, method, path, body string
		app                      bool // the app answers, not the module
		status                   int
	}{
		{"the list is the module's", "GET", "/posts", "", false, 200},
		{"a post's path is the module's, even for no post", "GET", "/posts/6b011fa03aa928307595aeda", "", false, 404},
		{"a path under /posts/ that names nothing is the module's 404", "GET", "/posts/a/b", "", false, 404},
		{"GraphQL is the module's", "GET", "/graphql?query=%7B__typename%7D", "", false, 200},
		{"the home page is the app's", "GET", "/", "", true, 200},
		{"another page is the app's, with its query", "GET", "/about?lang=en", "", true, 200},
		{"a path that only starts like /posts is the app's", "GET", "/postscript", "", true, 200},
		{"a path that only starts like /graphql is the app's", "GET", "/graphql/other", "", true, 200},
		{"a form the app takes is the app's, body and all", "POST", "/contact", `{"message": "hello"}`, true, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := s.call(t, tt.method, tt.path, tt.body)
			byApp := res.header.Get("X-Served-By") == "the app"
			switch {
			case res.status != tt.status || byApp != tt.app:
				t.Errorf("%d, by the app: %v, %s; want %d, by the app: %v", res.status, byApp, res.body, tt.status, tt.app)
			case tt.app && res.body != fmt.Sprintf("the app: %s %s %s", tt.method, tt.path, tt.body):
				t.Errorf("the app answered %q", res.body)
			case !tt.app && !strings.HasPrefix(res.header.Get("Content-Type"), "application/"):
				t.Errorf("the module answered %s with Content-Type %q", res.body, res.header.Get("Content-Type"))
			}
		})
	}
}

func TestProxyInFront(t *testing.T) {
	instance := start(t, "compression", setup{env: []string{"POSTS_API_KEY=" + aliceKey}})
	front := start(t, "proxy_in_front", setup{
		replace: map[string]string{"10.0.0.2:8080": strings.TrimPrefix(instance.url, "http://")},
	})
	keepFeedLive(t, instance, aliceKey)
	for _, tr := range []transport{sseGET, ssePOST, multipartPOST} {
		for _, coding := range []string{"", "gzip", "zstd"} {
			name := tr.name + " through the proxy gets each event at once"
			if coding != "" {
				name = tr.name + " through the proxy, compressed by the instance in " + coding + ", gets each event at once"
			}
			t.Run(name, func(t *testing.T) {
				st := openStream(t, front.url, tr, coding)
				defer st.close()
				if via := st.header.Get("Via"); !strings.Contains(via, "Caddy") {
					t.Fatalf("Via %q: the stream did not come through the proxy", via)
				}
				if got := st.header.Get("Content-Encoding"); got != coding {
					t.Fatalf("Content-Encoding %q; want %q", got, coding)
				}
				eventsOneByOne(t, st, front, aliceKey, 5)
			})
		}
	}
}
