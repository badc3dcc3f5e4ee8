package handlers

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/posts"
)

func TestRouteMatchesOnlyTheAPIPaths(t *testing.T) {
	a := New(Config{})
	// Which endpoint a path reaches shows in the Allow header of a PUT, which every path refuses.
	const collection, item = "GET, HEAD, POST", "GET, HEAD, PATCH, DELETE"
	tests := []struct{ path, allow string }{
		{"/posts", collection},
		{"/posts/6b011fa03aa928307595aeda", item},
		{"/posts/anything", item},
		{"/posts/", ""},
		{"/posts/a/b", ""},
		{"/postsx", ""},
		{"/", ""},
		{"/api/posts", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := httptest.NewRequest("PUT", tt.path, nil)
			h := a.Route(r)
			if tt.allow == "" {
				if h != nil {
					t.Error("routed; want nil so the next handler serves it")
				}
				return
			}
			if h == nil {
				t.Fatal("not routed")
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != tt.allow {
				t.Errorf("PUT %s = %d, Allow %q; want 405, Allow %q", tt.path, w.Code, w.Header().Get("Allow"), tt.allow)
			}
		})
	}
}

func TestParseObject(t *testing.T) {
	t.Run("members come back in order with their raw values", func(t *testing.T) {
		members, err := parseObject([]byte(` {"title": "t", "body": null, "n": {"$ne": 1}} `))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range members {
			got = append(got, m.name+"="+string(m.value))
		}
		if want := `title="t" body=null n={"$ne": 1}`; strings.Join(got, " ") != want {
			t.Errorf("members = %q; want %q", got, want)
		}
	})
	bad := []struct{ name, body, want string }{
		{"an empty body", "  ", "the body is empty"},
		{"a truncated object", `{"title": `, "not valid JSON"},
		{"a truncated member name", `{"tit`, "not valid JSON"},
		{"a missing colon", `{"title" "x"}`, "not valid JSON"},
		{"a trailing comma", `{"title": "x",}`, "not valid JSON"},
		{"an array", `[]`, "must be a JSON object"},
		{"null", `null`, "must be a JSON object"},
		{"a number", `7`, "must be a JSON object"},
		{"a duplicate member", `{"a": 1, "a": 2}`, `"a" is given more than once`},
		{"a second value after the object", `{} {}`, "nothing after it"},
		{"garbage after the object", `{}x`, "nothing after it"},
	}
	for _, tt := range bad {
		t.Run("400 for "+tt.name, func(t *testing.T) {
			_, err := parseObject([]byte(tt.body))
			var he *httpError
			if !errors.As(err, &he) || he.status != 400 || !strings.Contains(he.message, tt.want) {
				t.Errorf("err = %v; want 400 containing %q", err, tt.want)
			}
		})
	}
}

func TestChangesTellNullFromAbsent(t *testing.T) {
	members, err := parseObject([]byte(`{"body": null}`))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := changes(members)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Title.Set || !ch.Body.Set || ch.Body.Value != nil {
		t.Errorf("changes = %+v; want title absent and body set to null", ch)
	}
}

func TestListQuery(t *testing.T) {
	q, err := listQuery("userId=alice&limit=7&after=abc")
	if err != nil || q != (posts.ListQuery{UserID: "alice", Limit: 7, After: "abc"}) {
		t.Errorf("listQuery = %+v, %v", q, err)
	}
	for _, raw := range []string{"limit=", "limit=1.5", "limit=0", "x=1", "userId=a&userId=b", "%zz"} {
		t.Run("400 for "+raw, func(t *testing.T) {
			var he *httpError
			if _, err := listQuery(raw); !errors.As(err, &he) || he.status != 400 {
				t.Errorf("err = %v; want a 400", err)
			}
		})
	}
}

func TestByteCount(t *testing.T) {
	for n, want := range map[int64]string{1 << 20: "1 MiB", 64 << 10: "64 KiB", 1500: "1500 bytes", 3 << 20: "3 MiB"} {
		if got := byteCount(n); got != want {
			t.Errorf("byteCount(%d) = %q; want %q", n, got, want)
		}
	}
}
