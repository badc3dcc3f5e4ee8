package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/handlers/handlerstest"
)

// The config of a site that sets none (handlerstest.Subscriptions, handlerstest.Limits). The
// tests build other configs from a copy (with); MaxResponseSize of Config is testLimits' (one
// config field feeds both).
var (
	testSubscriptions = handlerstest.Subscriptions
	testLimits        = handlerstest.Limits
)

// with is a copy of fixture that change alters: the config of a site that sets only those.
func with[T any](fixture T, change func(*T)) T {
	change(&fixture)
	return fixture
}

func TestRouteMatchesOnlyTheAPIPaths(t *testing.T) {
	a := New(Config{Logger: zap.NewNop()})
	// Which endpoint a path reaches shows in the Allow header of a PUT, which every path refuses.
	const collection, item = "GET, HEAD, POST", "GET, HEAD, PATCH, DELETE"
	const next, notFound = "", "404"
	tests := []struct{ path, allow string }{
		{"/posts", collection},
		{"/posts/6b011fa03aa928307595aeda", item},
		{"/posts/anything", item},
		{"/posts/", notFound},
		{"/posts//", notFound},
		{"/posts/6b011fa03aa928307595aeda/", notFound},
		{"/posts/a/b", notFound},
		{"/postsx", next},
		{"/postsXYZ/a", next},
		{"/", next},
		{"/api/posts", next},
		{"/graphql", "GET, HEAD, POST"},
		{"/graphql/graphiql/3.9.0/graphiql.min.js", "GET, HEAD"},
		{"/graphql/", next},
		{"/graphqlx", next},
	}
	for _, tt := range tests {
		name := map[string]string{next: " goes to the next handler", notFound: " is a 404 from the API"}[tt.allow]
		if name == "" {
			name = " reaches the endpoint that allows " + tt.allow
		}
		t.Run(tt.path+name, func(t *testing.T) {
			r := httptest.NewRequest("PUT", tt.path, nil)
			h := a.Route(r)
			if tt.allow == next {
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
			if tt.allow == notFound {
				wantError(t, w.Code, w.Body.Bytes(), 404, "no such path")
				return
			}
			if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != tt.allow {
				t.Errorf("PUT %s = %d, Allow %q; want 405, Allow %q", tt.path, w.Code, w.Header().Get("Allow"), tt.allow)
			}
		})
	}
}

// wantError checks a response of status want whose body is {"error": "..."} with the message
// containing message.
func wantError(t *testing.T, status int, body []byte, want int, message string) {
	t.Helper()
	var e map[string]any
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("%d %q: not JSON: %v", status, body, err)
	}
	got, _ := e["error"].(string)
	if status != want || len(e) != 1 || !strings.Contains(got, message) {
		t.Errorf("%d %s; want %d {\"error\": \"...%s...\"}", status, body, want, message)
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
