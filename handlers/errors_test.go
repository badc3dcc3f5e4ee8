package handlers

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/errcode"
)

// Every row of errcode's table that answers an HTTP request is answered with its status, in
// REST's {"error": ...} and as a GraphQL error with its extensions.code, and with the headers its
// status calls for. Every such row has a code, as every GraphQL error must, but NoSuchPath, which
// only REST's router answers: failGraphQL would write any other with "code": "".
func TestEveryRowOfTheErrorTableIsAnsweredAsItSays(t *testing.T) {
	a := New(Config{Logger: zap.NewNop()})
	for _, row := range errcode.Table {
		if row.Status == 0 {
			continue
		}
		t.Run(row.When, func(t *testing.T) {
			w := httptest.NewRecorder()
			a.fail(w, httptest.NewRequest("GET", "/posts", nil), errcode.New(row, "what went wrong"))
			var rest struct{ Error string }
			if err := json.Unmarshal(w.Body.Bytes(), &rest); err != nil || w.Code != row.Status || rest.Error != "what went wrong" {
				t.Errorf("REST: %d %s (%v); want %d with the message", w.Code, w.Body, err, row.Status)
			}
			if row.Status == 503 && w.Header().Get("Retry-After") != retryAfter {
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
			a.failGraphQL(w, httptest.NewRequest("POST", graphqlPath, nil), graphQLResponseJSON, errcode.New(row, "what went wrong"))
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
