package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
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
		{"/graphql", "GET, HEAD, POST"},
		{"/graphql/graphiql/3.9.0/graphiql.min.js", "GET, HEAD"},
		{"/graphql/", ""},
		{"/graphqlx", ""},
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

func TestFailMapsEachErrorToOneStatus(t *testing.T) {
	a := New(Config{Logger: zap.NewNop()})
	tests := []struct {
		name          string
		err           error
		status        int
		header, value string // a header the response must carry
		message       string
	}{
		{"a refused credential carries its challenge", &auth.Error{Status: 401, Code: "invalid_token", Description: "the token has expired"},
			401, "WWW-Authenticate", `Bearer realm="posts", error="invalid_token", error_description="the token has expired"`, "the token has expired"},
		{"a missing credential gets the bare challenge", posts.ErrUnauthenticated, 401, "WWW-Authenticate", `Bearer realm="posts"`, posts.ErrUnauthenticated.Error()},
		{"keys not fetched yet is a 503 to retry", auth.ErrKeysUnavailable, 503, "Retry-After", retryAfter, auth.ErrKeysUnavailable.Error()},
		{"an unavailable database is a 503 that hides the cause", fmt.Errorf("%w: dial tcp 10.0.0.1:27017", posts.ErrUnavailable), 503, "Retry-After", retryAfter, posts.ErrUnavailable.Error()},
		{"anything else is a 500 that hides the cause", errors.New("secret internals"), 500, "Content-Type", "application/json", "internal server error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			a.fail(w, httptest.NewRequest("GET", "/posts", nil), tt.err)
			var body struct{ Error string }
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if w.Code != tt.status || w.Header().Get(tt.header) != tt.value || body.Error != tt.message {
				t.Errorf("got %d, %s: %q, error %q; want %d, %q, %q", w.Code, tt.header, w.Header().Get(tt.header), body.Error, tt.status, tt.value, tt.message)
			}
		})
	}
}

func TestIdentifiedIsToldOnlyOfAuthenticatedCallers(t *testing.T) {
	var told []string
	a := New(Config{
		Auth:       &auth.Authenticator{APIKeyHeader: "X-API-Key", APIKeys: []auth.APIKey{mustKey(t, "k", "alice")}},
		Logger:     zap.NewNop(),
		Identified: func(_ *http.Request, caller auth.Identity) { told = append(told, caller.UserID) },
	})
	for _, key := range []string{"", "k", "wrong"} {
		r := httptest.NewRequest("PUT", "/posts", nil) // refused with 405 before any store access
		if key != "" {
			r.Header.Set("X-API-Key", key)
		}
		a.Route(r).ServeHTTP(httptest.NewRecorder(), r)
	}
	if strings.Join(told, ",") != "" {
		t.Errorf("told of %q for requests refused with 405; want nothing", told)
	}
	r := httptest.NewRequest("PATCH", "/posts/x", strings.NewReader("{"))
	r.Header.Set("X-API-Key", "k")
	a.Route(r).ServeHTTP(httptest.NewRecorder(), r) // refused after authentication (415)
	r = httptest.NewRequest("PATCH", "/posts/x", nil)
	r.Header.Set("X-API-Key", "wrong")
	a.Route(r).ServeHTTP(httptest.NewRecorder(), r)
	if strings.Join(told, ",") != "alice" {
		t.Errorf("told of %q; want only alice, once", told)
	}
}

func mustKey(t *testing.T, key, user string) auth.APIKey {
	t.Helper()
	k, err := auth.ParseAPIKey(key, user)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
