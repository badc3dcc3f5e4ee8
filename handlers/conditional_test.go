package handlers

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store"
)

// doWith sends a request as alice with the header lines ("Name: value"), a JSON body when body
// is not empty.
func (s *restServer) doWith(t *testing.T, method, path, body string, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", restKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range header {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Add(name, strings.TrimSpace(value))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{res.StatusCode, res.Header, data}
}

// atVersion2 stores a post of alice's and updates it once: at version 2.
func (s *restServer) atVersion2(t *testing.T) posts.Post {
	t.Helper()
	p := s.create(t, "conditional", ptr("body"))
	p, err := s.svc.Update(t.Context(), auth.Identity{UserID: "alice", Method: "api_key"}, p.ID,
		posts.Changes{Body: posts.Change{Set: true, Value: ptr("changed once")}}, posts.Expect{})
	if err != nil || p.Version != 2 {
		t.Fatalf("the post is at %d (%v); want 2", p.Version, err)
	}
	return p
}

func TestConditionalReads(t *testing.T) {
	s := newRESTServer(t, 1<<20)
	p := s.atVersion2(t)
	lastModified := p.UpdatedAt.UTC().Format(http.TimeFormat)
	earlier := p.UpdatedAt.Add(-time.Hour).UTC().Format(http.TimeFormat)
	tests := []struct {
		name   string
		method string
		header []string
		status int
	}{
		{"a plain GET answers the post", "GET", nil, 200},
		{"If-None-Match of the post's tag answers 304", "GET", []string{`If-None-Match: "2"`}, 304},
		{"If-None-Match compares weakly: W/ matches", "GET", []string{`If-None-Match: W/"2"`}, 304},
		{"If-None-Match of a list that holds the tag answers 304", "GET", []string{`If-None-Match: "1", "2"`}, 304},
		{"If-None-Match: * answers 304 for a post that exists", "GET", []string{`If-None-Match: *`}, 304},
		{"If-None-Match of another version answers the post", "GET", []string{`If-None-Match: "1"`}, 200},
		{"If-None-Match of a tag Caddy's encode made for another coding answers the post", "GET", []string{`If-None-Match: "2-gzip"`}, 200},
		{"HEAD with If-None-Match of the tag answers 304", "HEAD", []string{`If-None-Match: "2"`}, 304},
		{"If-Modified-Since the post's Last-Modified answers 304", "GET", []string{"If-Modified-Since: " + lastModified}, 304},
		{"If-Modified-Since an earlier time answers the post", "GET", []string{"If-Modified-Since: " + earlier}, 200},
		{"If-Modified-Since is not read beside If-None-Match", "GET", []string{`If-None-Match: "1"`, "If-Modified-Since: " + lastModified}, 200},
		{"If-Modified-Since that is not an HTTP-date is ignored", "GET", []string{"If-Modified-Since: yesterday"}, 200},
		{"If-Match of the post's tag answers the post", "GET", []string{`If-Match: "2"`}, 200},
		{"If-Match of another version answers 412", "GET", []string{`If-Match: "1"`}, 412},
		{"If-Unmodified-Since an earlier time answers 412", "GET", []string{"If-Unmodified-Since: " + earlier}, 412},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := s.doWith(t, tc.method, "/posts/"+p.ID, "", tc.header...)
			if res.status != tc.status {
				t.Fatalf("status %d %s; want %d", res.status, res.body, tc.status)
			}
			switch tc.status {
			case 412:
				wantError(t, res.status, res.body, 412, "it is at version 2")
				return
			case 304:
				if len(res.body) != 0 {
					t.Errorf("a 304 with a body: %q", res.body)
				}
			case 200:
				if tc.method == "GET" && !strings.Contains(string(res.body), `"version":2}`) {
					t.Errorf("body %s; want the post at version 2", res.body)
				}
			}
			if etag, lm := res.header.Get("ETag"), res.header.Get("Last-Modified"); etag != `"2"` || lm != lastModified {
				t.Errorf("ETag %s, Last-Modified %s; want \"2\" and %s", etag, lm, lastModified)
			}
		})
	}
	t.Run("a malformed If-None-Match is a 400", func(t *testing.T) {
		res := s.doWith(t, "GET", "/posts/"+p.ID, "", "If-None-Match: 2")
		wantError(t, res.status, res.body, 400, "If-None-Match must be * or a list of entity tags")
	})
	t.Run("a missing post is a 404, whatever If-None-Match says", func(t *testing.T) {
		res := s.doWith(t, "GET", "/posts/"+store.NewID(time.Now()), "", "If-None-Match: *")
		wantError(t, res.status, res.body, 404, "post not found")
	})
}

func TestConditionalWrites(t *testing.T) {
	s := newRESTServer(t, 1<<20)
	bobs, err := s.svc.Create(t.Context(), auth.Identity{UserID: "bob", Method: "api_key"}, posts.NewPost{Title: "bob's"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		header  []string
		status  int    // of a PATCH; a DELETE gets 204 for 200
		message string // of a refusal
	}{
		{"If-Match of the post's tag writes", []string{`If-Match: "2"`}, 200, ""},
		{"If-Match of a list that holds the tag writes", []string{`If-Match: "1", W/"3", "2"`}, 200, ""},
		{"If-Match of the tag Caddy's encode made of it writes", []string{`If-Match: "2-gzip"`}, 200, ""},
		{"If-Match: * writes a post that exists", []string{`If-Match: *`}, 200, ""},
		{"If-Match of another version is refused", []string{`If-Match: "1"`}, 412, "it is at version 2"},
		{"If-Match of a weak tag is refused: a write compares strongly", []string{`If-Match: W/"2"`}, 412, "it is at version 2"},
		{"If-Match of a list without the tag is refused", []string{`If-Match: "1", "3"`}, 412, "it is at version 2"},
		{"If-Match of a tag that is not a version is refused", []string{`If-Match: "abc"`, `If-Match: "02"`}, 412, "it is at version 2"},
		{"an empty If-Match list is refused", []string{`If-Match: ,`}, 412, "it is at version 2"},
		{"a malformed If-Match is a 400", []string{`If-Match: 2`}, 400, "If-Match must be * or a list of entity tags"},
		{"If-None-Match: * is refused for a post that exists", []string{`If-None-Match: *`}, 412, "it is at version 2"},
		{"If-None-Match of another version writes", []string{`If-None-Match: "1"`}, 200, ""},
		{"If-None-Match of the post's version is refused", []string{`If-None-Match: W/"2"`}, 412, "it is at version 2"},
		{"If-Unmodified-Since an earlier time is refused", []string{"If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT"}, 412, "it is at version 2"},
		{"If-Unmodified-Since a later time writes", []string{"If-Unmodified-Since: Fri, 31 Dec 9999 23:59:59 GMT"}, 200, ""},
		{"If-Unmodified-Since is not read beside If-Match", []string{`If-Match: "2"`, "If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT"}, 200, ""},
	}
	for _, method := range []string{"PATCH", "DELETE"} {
		for _, tc := range tests {
			t.Run(method+": "+tc.name, func(t *testing.T) {
				p := s.atVersion2(t)
				body := ""
				if method == "PATCH" {
					body = `{"title": "patched"}`
				}
				before := s.stored(t)
				res := s.doWith(t, method, "/posts/"+p.ID, body, tc.header...)
				switch {
				case tc.status != 200:
					wantError(t, res.status, res.body, tc.status, tc.message)
					if after := s.stored(t); after != before {
						t.Errorf("the store changed:\n%s\nfrom\n%s", after, before)
					}
				case method == "DELETE":
					if res.status != 204 {
						t.Fatalf("status %d %s; want 204", res.status, res.body)
					}
					if _, err := s.store.GetPost(t.Context(), p.ID); err == nil {
						t.Error("the post is still stored")
					}
				default:
					if res.status != 200 || res.header.Get("ETag") != `"3"` || !strings.Contains(string(res.body), `"title":"patched"`) {
						t.Fatalf("got %d ETag %s %s; want 200, ETag \"3\" and the post patched", res.status, res.header.Get("ETag"), res.body)
					}
					if stored, _ := s.store.GetPost(t.Context(), p.ID); stored.Version != 3 || stored.Title != "patched" {
						t.Errorf("stored %+v; want the title patched, at version 3", stored)
					}
				}
			})
		}
		t.Run(method+": If-Match on a missing post is a 404", func(t *testing.T) {
			res := s.doWith(t, method, "/posts/"+store.NewID(time.Now()), `{"title": "x"}`, `If-Match: "1"`)
			wantError(t, res.status, res.body, 404, "post not found")
		})
		t.Run(method+": If-Match on someone else's post is a 403, whatever the tag", func(t *testing.T) {
			for _, tag := range []string{`"1"`, `"7"`, `*`} {
				res := s.doWith(t, method, "/posts/"+bobs.ID, `{"title": "x"}`, "If-Match: "+tag)
				wantError(t, res.status, res.body, 403, "another user")
			}
		})
	}
	t.Run("POST answers the new post's ETag", func(t *testing.T) {
		res := s.doWith(t, "POST", "/posts", `{"title": "new"}`)
		if res.status != 201 || res.header.Get("ETag") != `"1"` || res.header.Get("Last-Modified") == "" {
			t.Errorf("got %d ETag %q Last-Modified %q; want 201 with \"1\" and a date", res.status, res.header.Get("ETag"), res.header.Get("Last-Modified"))
		}
	})
	t.Run("version is the server's to write", func(t *testing.T) {
		p := s.atVersion2(t)
		res := s.doWith(t, "PATCH", "/posts/"+p.ID, `{"title": "t", "version": 1}`)
		wantError(t, res.status, res.body, 422, `"version" is set by the server`)
	})
}
