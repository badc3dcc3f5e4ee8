// REST reads end to end: listing and paging, one post, other methods and other paths.
package caddymodule

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

func TestListingPosts(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)

	t.Run("an empty collection lists as [] and never null", func(t *testing.T) {
		clearPosts(t)
		res := c.do("GET", site+"/posts", "")
		if res.status != 200 || string(res.body) != "[]\n" {
			t.Fatalf("got %d %q; want 200 []", res.status, res.body)
		}
		if ct := res.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}
	})

	t.Run("posts come newest first", func(t *testing.T) {
		clearPosts(t)
		var want []string
		for _, title := range []string{"first", "second", "third"} {
			want = append([]string{c.create(asAlice, title).ID}, want...)
		}
		var got []postOut
		c.do("GET", site+"/posts", "").decode(t, &got)
		if ids := idsOf(got); strings.Join(ids, ",") != strings.Join(want, ",") {
			t.Errorf("ids = %v; want newest first %v", ids, want)
		}
	})

	t.Run("userId keeps only that user's posts", func(t *testing.T) {
		clearPosts(t)
		c.create(asAlice, "alice's")
		bobs := c.create(asBob, "bob's")
		var got []postOut
		c.do("GET", site+"/posts?userId=bob", "").decode(t, &got)
		if len(got) != 1 || !reflect.DeepEqual(got[0], bobs) {
			t.Errorf("got %+v; want only %+v", got, bobs)
		}
		c.do("GET", site+"/posts?userId=carol", "").decode(t, &got)
		if len(got) != 0 {
			t.Errorf("carol has no posts, got %+v", got)
		}
	})

	t.Run("pages follow the next link without duplicates or gaps while posts are added", func(t *testing.T) {
		clearPosts(t)
		var all []string // newest first
		for i := range 6 {
			all = append([]string{c.create(asAlice, fmt.Sprint("post ", i)).ID}, all...)
		}
		var seen []string
		next := "/posts?limit=2"
		for pages := 0; next != ""; pages++ {
			if pages > 3 {
				t.Fatal("more pages than posts")
			}
			res := c.do("GET", site+next, "")
			var page []postOut
			res.decode(t, &page)
			seen = append(seen, idsOf(page)...)
			next = nextLink(t, res.header.Get("Link"))
			if pages == 0 {
				c.create(asAlice, "added while paging") // newer than every page: never shows up later
			}
		}
		if strings.Join(seen, ",") != strings.Join(all, ",") {
			t.Errorf("paged through %v; want %v", seen, all)
		}
	})

	t.Run("the next link keeps the userId filter and the limit", func(t *testing.T) {
		clearPosts(t)
		for i := range 3 {
			c.create(asBob, fmt.Sprint("bob ", i))
		}
		res := c.do("GET", site+"/posts?userId=bob&limit=1", "")
		link := nextLink(t, res.header.Get("Link"))
		u, _ := url.Parse(link)
		if u.Path != "/posts" || u.Query().Get("userId") != "bob" || u.Query().Get("limit") != "1" || u.Query().Get("after") == "" {
			t.Errorf("next link = %q; want /posts with userId=bob, limit=1 and after", link)
		}
	})

	t.Run("the last page has no next link", func(t *testing.T) {
		clearPosts(t)
		c.create(asAlice, "only")
		res := c.do("GET", site+"/posts?limit=1", "")
		if link := res.header.Get("Link"); link != "" {
			t.Errorf("Link = %q on the last page", link)
		}
	})

	t.Run("HEAD answers like GET without a body", func(t *testing.T) {
		res := c.do("HEAD", site+"/posts", "")
		if res.status != 200 || len(res.body) != 0 || res.header.Get("Content-Type") != "application/json" {
			t.Errorf("HEAD /posts = %d %q %v", res.status, res.body, res.header)
		}
	})

	bad := []struct{ name, query, want string }{
		{"an unknown parameter, naming the allowed ones", "?order=title", `unknown query parameter "order"; allowed: userId, q, since, until, sort, limit, after`},
		{"an operator smuggled into a parameter name", "?userId[$ne]=x", `unknown query parameter "userId[$ne]"`},
		{"a limit that is not a number", "?limit=ten", "limit must be a whole number"},
		{"a limit of zero", "?limit=0", "limit must be a whole number of posts, at least 1"},
		{"a negative limit", "?limit=-1", "limit must be from 1 to 5"},
		{"a limit above max_limit", "?limit=6", "limit must be from 1 to 5"},
		{"a cursor this API never made", "?after=not-a-cursor", "after is not a cursor"},
		{"a parameter given twice", "?userId=a&userId=b", `"userId" is given more than once`},
		{"an empty parameter", "?userId=", `"userId" is empty`},
		{"a malformed query string", "?userId=%zz", "malformed"},
	}
	for _, tt := range bad {
		t.Run("400 for "+tt.name, func(t *testing.T) {
			before := stored(t)
			c.do("GET", site+"/posts"+tt.query, "").wantError(t, http.StatusBadRequest, tt.want)
			unchanged(t, before)
		})
	}
}

func idsOf(posts []postOut) []string {
	ids := make([]string, len(posts))
	for i, p := range posts {
		ids[i] = p.ID
	}
	return ids
}

var linkRE = regexp.MustCompile(`^<([^>]+)>; rel="next"$`)

// nextLink returns the target of a Link: <...>; rel="next" header, or "" when there is none.
func nextLink(t *testing.T, header string) string {
	t.Helper()
	if header == "" {
		return ""
	}
	m := linkRE.FindStringSubmatch(header)
	if m == nil {
		t.Fatalf("Link = %q; want <...>; rel=\"next\"", header)
	}
	return m[1]
}

func TestGettingAPost(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	created := c.create(asAlice, "to read")

	t.Run("200 with the post", func(t *testing.T) {
		var got postOut
		c.do("GET", site+"/posts/"+created.ID, "").decode(t, &got)
		if !reflect.DeepEqual(got, created) {
			t.Errorf("got %+v; want %+v", got, created)
		}
	})
	t.Run("HEAD answers like GET without a body", func(t *testing.T) {
		res := c.do("HEAD", site+"/posts/"+created.ID, "")
		if res.status != 200 || len(res.body) != 0 {
			t.Errorf("HEAD = %d %q", res.status, res.body)
		}
	})
	t.Run("404 for an id no post has", func(t *testing.T) {
		c.do("GET", site+"/posts/"+store.NewID(time.Now()), "").wantError(t, 404, "post not found")
	})
	t.Run("404 for a malformed id", func(t *testing.T) {
		c.do("GET", site+"/posts/not-an-id", "").wantError(t, 404, "post not found")
	})
	t.Run("404 for HEAD of a missing post", func(t *testing.T) {
		if res := c.do("HEAD", site+"/posts/"+store.NewID(time.Now()), ""); res.status != 404 {
			t.Errorf("status = %d; want 404", res.status)
		}
	})
}

func TestOtherMethodsGet405(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	p := c.create(asAlice, "target")
	tests := []struct{ method, path, allow string }{
		{"PUT", "/posts", "GET, HEAD, POST"},
		{"DELETE", "/posts", "GET, HEAD, POST"},
		{"PATCH", "/posts", "GET, HEAD, POST"},
		{"OPTIONS", "/posts", "GET, HEAD, POST"},
		{"PUT", "/posts/" + p.ID, "GET, HEAD, PATCH, DELETE"},
		{"POST", "/posts/" + p.ID, "GET, HEAD, PATCH, DELETE"},
		{"TRACE", "/posts/" + p.ID, "GET, HEAD, PATCH, DELETE"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+strings.Split(tt.path, "/")[1], func(t *testing.T) {
			before := stored(t)
			res := c.do(tt.method, site+tt.path, `{"title": "put"}`, asAlice, jsonBody)
			res.wantError(t, http.StatusMethodNotAllowed, tt.method+" is not allowed")
			if got := res.header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow = %q; want %q", got, tt.allow)
			}
			unchanged(t, before)
		})
	}
}

// TestPreflightsAndCORSHeadersAreAsTheOpenAPIDocumentSays sends preflights and a read from pages
// of the site's own origin and of a foreign one; startCaddy's client holds each answer to
// openapi.yaml, which describes the preflights (OPTIONS) and the CORS headers of every answer.
func TestPreflightsAndCORSHeadersAreAsTheOpenAPIDocumentSays(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	p := c.create(asAlice, "target")
	const foreign = "https://evil.example"
	tests := []struct {
		name, method, path, origin string
		header                     []string
		status                     int
		methods                    string // Access-Control-Allow-Methods
	}{
		{"a create's preflight from the site's own page", "OPTIONS", "/posts", site, []string{"Access-Control-Request-Method: POST", "Access-Control-Request-Headers: authorization,content-type"}, 204, "GET, HEAD, POST"},
		{"a change's preflight from the site's own page", "OPTIONS", "/posts/" + p.ID, site, []string{"Access-Control-Request-Method: PATCH", "Access-Control-Request-Headers: if-match"}, 204, "GET, HEAD, PATCH, DELETE"},
		{"a preflight from a foreign page is refused", "OPTIONS", "/posts/" + p.ID, foreign, []string{"Access-Control-Request-Method: DELETE"}, 403, ""},
		{"a read from the site's own page is readable", "GET", "/posts/" + p.ID, site, nil, 200, ""},
		{"a read from a foreign page is not", "GET", "/posts", foreign, nil, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := c.do(tt.method, site+tt.path, "", append(tt.header, "Origin: "+tt.origin)...)
			if res.status != tt.status {
				t.Fatalf("status = %d; want %d: %s", res.status, tt.status, res.body)
			}
			readable := tt.origin == site && tt.status != 403
			if got := res.header.Get("Access-Control-Allow-Origin"); readable && got != tt.origin || !readable && got != "" {
				t.Errorf("Access-Control-Allow-Origin = %q; readable %v", got, readable)
			}
			if got := res.header.Get("Access-Control-Allow-Methods"); got != tt.methods {
				t.Errorf("Access-Control-Allow-Methods = %q; want %q", got, tt.methods)
			}
		})
	}
}

func TestOtherPathsGoToTheNextHandler(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	for _, path := range []string{"/", "/other", "/postsx", "/api/posts"} {
		t.Run(path, func(t *testing.T) {
			res := c.do("GET", site+path, "")
			if res.status != 200 || string(res.body) != "next handler" {
				t.Errorf("got %d %q; want the next handler's answer", res.status, res.body)
			}
		})
	}
	// Under /posts/, every path is the API's: one that is no route is its 404, not passed on.
	for _, path := range []string{"/posts/", "/posts/a/b", "/posts/0123456789abcdef01234567/"} {
		t.Run(path, func(t *testing.T) {
			c.do("GET", site+path, "").wantError(t, 404, "")
		})
	}
}
