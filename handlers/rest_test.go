package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

const restKey = "key-of-alice"

// restServer is the API over the embedded store, behind an httptest server whose next handler
// answers 418, so that a request the API does not route shows.
type restServer struct {
	url   string
	store store.Store
	svc   *posts.Service
}

func newRESTServer(t *testing.T, maxResponseSize int64) *restServer {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc := posts.NewService(posts.Config{Store: st, Timeout: 5 * time.Second, MaxLimit: 100, Logger: zap.NewNop()})
	a := New(Config{
		Posts: svc, MaxBodySize: 1 << 20, MaxResponseSize: maxResponseSize, Logger: zap.NewNop(),
		Auth: &auth.Authenticator{APIKeyHeader: "X-API-Key", APIKeys: []auth.APIKey{mustKey(t, restKey, "alice")}},
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := a.Route(r); h != nil {
			h.ServeHTTP(w, r)
			return
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	return &restServer{url: srv.URL, store: st, svc: svc}
}

// response is what a request got.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request as alice, with a JSON body when body is not empty.
func (s *restServer) do(t *testing.T, method, path, body string) response {
	t.Helper()
	return s.doWith(t, method, path, body)
}

// create stores a post by alice through the service.
func (s *restServer) create(t *testing.T, title string, body *string) posts.Post {
	t.Helper()
	p, err := s.svc.Create(t.Context(), auth.Identity{UserID: "alice", Method: "api_key"}, posts.NewPost{Title: title, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// stored describes every post in the store, newest first.
func (s *restServer) stored(t *testing.T) string {
	t.Helper()
	all, err := s.store.ListPosts(t.Context(), store.Filter{Limit: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, p := range all {
		body := "<none>"
		if p.Body != nil {
			body = *p.Body
		}
		b.WriteString(p.ID + " " + p.Title + " " + body + " " + p.UpdatedAt.String() + "\n")
	}
	return b.String()
}

func TestBodiesThatAreNotUTF8AreRefusedAndChangeNothing(t *testing.T) {
	s := newRESTServer(t, testLimits.MaxResponseSize)
	post := s.create(t, "Untouched", ptr("as it was"))
	path := "/posts/" + post.ID
	bodies := []struct{ name, body string }{
		{"a byte that is not UTF-8 in the title", "{\"title\": \"caf\xe9\"}"},
		{"a byte that is not UTF-8 in the body", "{\"title\": \"t\", \"body\": \"\xff\"}"},
		{"a byte that is not UTF-8 in a member name", "{\"title\": \"t\", \"bo\xffdy\": null}"},
		{"a byte that is not UTF-8 between members", "{\"title\": \"t\"\xa0}"},
		{"Latin-1 text in place of UTF-8", "{\"title\": \"Gr\xfc\xdfe\"}"},
		{"a lone surrogate escape in the title", `{"title": "\ud800"}`},
		{"a lone surrogate escape in the body", `{"title": "t", "body": "x\udfff"}`},
	}
	for _, tt := range bodies {
		for _, method := range []string{"POST", "PATCH"} {
			target := map[string]string{"POST": "/posts", "PATCH": path}[method]
			t.Run(method+" with "+tt.name+" is a 400 and nothing is stored", func(t *testing.T) {
				before := s.stored(t)
				res := s.do(t, method, target, tt.body)
				wantError(t, res.status, res.body, 400, "not valid UTF-8")
				if after := s.stored(t); after != before {
					t.Errorf("the store changed from\n%s\nto\n%s", before, after)
				}
			})
		}
	}
}

func TestControlCharactersAreRefusedWithTheFieldNamed(t *testing.T) {
	s := newRESTServer(t, testLimits.MaxResponseSize)
	post := s.create(t, "Untouched", ptr("as it was"))
	tests := []struct{ name, method, path, body, message string }{
		{"POST with NUL in the body", "POST", "/posts", `{"title": "t", "body": "a\u0000b"}`, "body cannot hold the control character U+0000"},
		{"POST with ESC in the title", "POST", "/posts", `{"title": "\u001b[2J"}`, "title cannot hold the control character U+001B"},
		{"POST with a C1 control in the body", "POST", "/posts", `{"title": "t", "body": "\u0085"}`, "body cannot hold the control character U+0085"},
		{"POST with a newline inside the title", "POST", "/posts", `{"title": "two\nlines"}`, "title must be one line"},
		{"PATCH with DEL in the title", "PATCH", "/posts/" + post.ID, `{"title": "a\u007f"}`, "title cannot hold the control character U+007F"},
		{"PATCH with a backspace in the body", "PATCH", "/posts/" + post.ID, `{"body": "\b"}`, "body cannot hold the control character U+0008"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is a 422 and nothing is stored", func(t *testing.T) {
			before := s.stored(t)
			res := s.do(t, tt.method, tt.path, tt.body)
			wantError(t, res.status, res.body, 422, tt.message)
			if after := s.stored(t); after != before {
				t.Errorf("the store changed from\n%s\nto\n%s", before, after)
			}
		})
	}
	t.Run("POST with tabs, newlines and carriage returns in the body stores them", func(t *testing.T) {
		res := s.do(t, "POST", "/posts", `{"title": "\tTitle\r\n", "body": "one\r\n\ttwo\n"}`)
		var got struct{ ID, Title, Body string }
		if res.status != 201 || json.Unmarshal(res.body, &got) != nil {
			t.Fatalf("%d %s; want 201", res.status, res.body)
		}
		p, err := s.store.GetPost(t.Context(), got.ID)
		if err != nil || p.Title != "Title" || p.Body == nil || *p.Body != "one\r\n\ttwo\n" {
			t.Errorf("stored %+v, %v; want the title trimmed and the body as sent", p, err)
		}
	})
}

func TestPathsUnderPostsThatNameNoPostAre404(t *testing.T) {
	s := newRESTServer(t, testLimits.MaxResponseSize)
	post := s.create(t, "Untouched", nil)
	paths := []string{"/posts/", "/posts//", "/posts/" + post.ID + "/", "/posts/" + post.ID + "/comments", "/posts/a/b"}
	for _, path := range paths {
		for _, method := range []string{"GET", "POST", "PATCH", "DELETE", "PUT"} {
			t.Run(method+" "+path+" is a 404 and changes nothing", func(t *testing.T) {
				before := s.stored(t)
				res := s.do(t, method, path, `{"title": "x"}`)
				wantError(t, res.status, res.body, 404, "no such path: posts are at /posts and /posts/{id}")
				if after := s.stored(t); after != before {
					t.Errorf("the store changed from\n%s\nto\n%s", before, after)
				}
			})
		}
	}
	t.Run("HEAD /posts/ is a 404 without a body", func(t *testing.T) {
		if res := s.do(t, "HEAD", "/posts/", ""); res.status != 404 || len(res.body) != 0 || res.header.Get("Content-Type") != "application/json" {
			t.Errorf("%d %q %q; want 404, JSON, no body", res.status, res.header.Get("Content-Type"), res.body)
		}
	})
	for _, path := range []string{"/postsXYZ", "/postsXYZ/a", "/post", "/other/posts/"} {
		t.Run(path+" goes to the next handler", func(t *testing.T) {
			if res := s.do(t, "GET", path, ""); res.status != http.StatusTeapot {
				t.Errorf("%d %s; want the next handler's 418", res.status, res.body)
			}
		})
	}
}

// pageOf reads a page of GET /posts and its next link ("" when there is none).
func pageOf(t *testing.T, res response) (ids []string, next string) {
	t.Helper()
	if res.status != 200 {
		t.Fatalf("%d %s; want 200", res.status, res.body)
	}
	var page []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(res.body, &page); err != nil {
		t.Fatalf("the page is not JSON: %v", err)
	}
	for _, p := range page {
		ids = append(ids, p.ID)
	}
	if link := res.header.Get("Link"); link != "" {
		target, ok := strings.CutPrefix(link, "<")
		target, rel, _ := strings.Cut(target, ">; ")
		if !ok || rel != `rel="next"` {
			t.Fatalf("Link %q", link)
		}
		next = target
	}
	return ids, next
}

func TestListPagesStopBeforeMaxResponseSize(t *testing.T) {
	const max = 512 << 10
	s := newRESTServer(t, max)
	// Bodies of 30,000 to 48,400 characters, of 1 to 4 bytes, some escaped to 2 or 6: posts of
	// 30 KB to 290 KB, so that the cuts fall in different places, and a page of 10 is well
	// over max.
	var all []posts.Post
	for i := range 24 {
		body := strings.Repeat([]string{"a", "é", "語", "🙂", "\"", "\u2028"}[i%6], 30_000+i*800)
		all = append(all, s.create(t, "Post "+string(rune('A'+i)), &body))
	}
	slices.Reverse(all) // newest first
	var want []string
	for _, p := range all {
		want = append(want, p.ID)
	}
	sizes := map[string]int{} // of each post as GET /posts/{id} writes it, and a page each of its posts
	for _, p := range all {
		sizes[p.ID] = len(s.do(t, "GET", "/posts/"+p.ID, "").body) - len("\n")
	}
	size := func(p posts.Post) int { return sizes[p.ID] }
	byID := map[string]posts.Post{}
	for _, p := range all {
		byID[p.ID] = p
	}

	t.Run("following Link gets every post once, in order, each page within the size", func(t *testing.T) {
		var got []string
		pages := 0
		for next := "/posts?limit=10"; next != ""; pages++ {
			res := s.do(t, "GET", next, "")
			ids, link := pageOf(t, res)
			if len(res.body) > max {
				t.Errorf("GET %s: %d bytes; want at most %d", next, len(res.body), max)
			}
			if link != "" && !strings.Contains(link, "limit=10") {
				t.Errorf("Link %q lost the limit", link)
			}
			// The page is cut only when the next post would not fit.
			if n := len(got) + len(ids); link != "" && len(ids) < 10 && n < len(want) {
				if fits := len(res.body) + 1 + size(byID[want[n]]); fits <= max {
					t.Errorf("a page of %d posts and %d bytes was cut, though the next post fits (%d bytes)", len(ids), len(res.body), fits)
				}
			}
			got, next = append(got, ids...), link
			if pages > len(want) {
				t.Fatal("the Links do not end")
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("got the posts\n%v\nwant\n%v", got, want)
		}
		if pages <= 24/10+1 {
			t.Errorf("%d pages; want more than limit 10 alone gives, as pages were cut", pages)
		}
	})
	t.Run("the Link of a cut page resumes just after its last post", func(t *testing.T) {
		ids, next := pageOf(t, s.do(t, "GET", "/posts?limit=10&userId=alice", ""))
		if len(ids) == 0 || len(ids) >= 10 {
			t.Fatalf("a page of %d posts; want it cut", len(ids))
		}
		wantNext := `</posts?` + url.Values{"after": {posts.ListQuery{UserID: "alice"}.Cursor(byID[ids[len(ids)-1]])}, "limit": {"10"}, "userId": {"alice"}}.Encode() + `>; rel="next"`
		if "<"+next+`>; rel="next"` != wantNext {
			t.Errorf("Link %q; want %q", next, wantNext)
		}
		more, _ := pageOf(t, s.do(t, "GET", next, ""))
		if len(more) == 0 || more[0] != want[len(ids)] {
			t.Errorf("the next page starts with %v; want %s", more, want[len(ids)])
		}
	})
	t.Run("a post larger than the size is sent whole, alone", func(t *testing.T) {
		small := newRESTServer(t, 1<<10)
		big := small.create(t, "Big", ptr(strings.Repeat("x", 5000)))
		older := small.create(t, "Older", nil)
		res := small.do(t, "GET", "/posts", "")
		ids, next := pageOf(t, res)
		if len(ids) != 1 || ids[0] != older.ID || next == "" {
			t.Fatalf("got %v, next %q; want only the newest post and a Link", ids, next)
		}
		ids, next = pageOf(t, small.do(t, "GET", next, ""))
		if len(ids) != 1 || ids[0] != big.ID || next != "" {
			t.Errorf("got %v, next %q; want the big post whole and no Link", ids, next)
		}
	})
	t.Run("HEAD has the headers of GET and no body", func(t *testing.T) {
		get, head := s.do(t, "GET", "/posts?limit=10", ""), s.do(t, "HEAD", "/posts?limit=10", "")
		for _, name := range []string{"Content-Type", "X-Content-Type-Options", "Link"} {
			if head.header.Get(name) != get.header.Get(name) || get.header.Get(name) == "" {
				t.Errorf("%s: HEAD %q, GET %q; want the same", name, head.header.Get(name), get.header.Get(name))
			}
		}
		if head.status != 200 || len(head.body) != 0 {
			t.Errorf("HEAD: %d, %d bytes of body", head.status, len(head.body))
		}
	})
}

func ptr(s string) *string { return &s }
