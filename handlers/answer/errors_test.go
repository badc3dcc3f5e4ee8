package answer

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store"
)

// Every row of errcode's table that answers an HTTP request is answered with its status, in
// REST's {"error": ...} and as a GraphQL error with its extensions.code, and with the headers its
// status calls for. Every such row has a code, as every GraphQL error must, but NoSuchPath, which
// only REST's router answers: Failer.FailGraphQL would write any other with "code": "".
func TestEveryRowOfTheErrorTableIsAnsweredAsItSays(t *testing.T) {
	f := &Failer{Logger: zap.NewNop()}
	for _, row := range errcode.Table {
		if row.Status == 0 {
			continue
		}
		t.Run(row.When, func(t *testing.T) {
			w := httptest.NewRecorder()
			f.Fail(w, httptest.NewRequest("GET", "/posts", nil), errcode.New(row, "what went wrong"))
			var rest struct{ Error string }
			if err := json.Unmarshal(w.Body.Bytes(), &rest); err != nil || w.Code != row.Status || rest.Error != "what went wrong" {
				t.Errorf("REST: %d %s (%v); want %d with the message", w.Code, w.Body, err, row.Status)
			}
			if row.Status == 503 && w.Header().Get("Retry-After") != RetryAfter {
				t.Errorf("a 503 without Retry-After")
			}
			if row.Status == 401 && w.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("a 401 without WWW-Authenticate")
			}
			if row == errcode.NoSuchPath {
				return
			}
			if row.GraphQL == "" {
				t.Errorf("status %d has no GraphQL code: a GraphQL request refused with it gets \"code\": \"\"", row.Status)
			}
			w = httptest.NewRecorder()
			f.FailGraphQL(w, httptest.NewRequest("POST", "/graphql", nil), GraphQLResponseJSON, errcode.New(row, "what went wrong"))
			var res struct {
				Errors []struct {
					Message    string
					Extensions map[string]any
				}
			}
			if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil || w.Code != row.Status || len(res.Errors) != 1 ||
				res.Errors[0].Extensions["code"] != row.GraphQL || res.Errors[0].Message != "what went wrong" {
				t.Errorf("GraphQL: %d %s (%v); want %d and one error with code %s", w.Code, w.Body, err, row.Status, row.GraphQL)
			}
		})
	}
}

func TestFailMapsEachErrorToOneStatus(t *testing.T) {
	f := &Failer{Logger: zap.NewNop()}
	tests := []struct {
		name          string
		err           error
		status        int
		header, value string // a header the response must carry
		message       string
	}{
		{"a refused credential carries its challenge", &auth.Error{Code: "invalid_token", Description: "the token has expired"},
			401, "WWW-Authenticate", `Bearer realm="posts", error="invalid_token", error_description="the token has expired"`, "the token has expired"},
		{"a missing credential gets the bare challenge", posts.ErrUnauthenticated, 401, "WWW-Authenticate", `Bearer realm="posts"`, posts.ErrUnauthenticated.Error()},
		{"keys not fetched yet is a 503 to retry", auth.ErrKeysUnavailable, 503, "Retry-After", RetryAfter, auth.ErrKeysUnavailable.Error()},
		{"an unavailable database is a 503 that hides the cause", fmt.Errorf("%w: dial tcp 10.0.0.1:27017", posts.ErrUnavailable), 503, "Retry-After", StoreRetryAfter, posts.ErrUnavailable.Error()},
		{"a store whose breaker is open is a 503 to retry in a second", fmt.Errorf("%w: %w", posts.ErrUnavailable, fmt.Errorf("%w: %w", store.ErrUnavailable, store.ErrBreakerOpen)),
			503, "Retry-After", "1", posts.ErrUnavailable.Error()},
		{"anything else is a 500 that hides the cause", errors.New("secret internals"), 500, "Content-Type", "application/json", "internal server error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			f.Fail(w, httptest.NewRequest("GET", "/posts", nil), tt.err)
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
