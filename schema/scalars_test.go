package schema_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store"
)

func TestIDsWithControlCharactersAndInvalidUTF8AreValidJSON(t *testing.T) {
	st := newStore(t)
	s := newSchemaOver(t, st, 10, schema.DefaultLimits)
	users := []string{"eve\u0001", "\xff", "mallory\a\v\u2028<&>\"\\", "alice"}
	for _, u := range users {
		insert(t, st, 1, u, nil)
	}
	// A post whose own id is no ObjectID, written straight to the store as well.
	odd := store.Post{ID: "p\u0001\xff", UserID: "eve\u0001", Title: "odd", CreatedAt: time.Unix(1, 0).UTC(), UpdatedAt: time.Unix(1, 0).UTC()}
	if _, err := st.InsertPost(t.Context(), odd); err != nil {
		t.Fatal(err)
	}
	eve, ff, mallory, oddID := `"eve\u0001"`, `"\ufffd"`, `"mallory\u0007\u000b\u2028\u003c\u0026\u003e\"\\"`, `"p\u0001\ufffd"`
	queries := []struct {
		query string
		want  []string // in the response, as JSON escapes them
	}{
		{`{ posts { id userId title } }`, []string{eve, ff, mallory, oddID}},
		{`{ posts { id author { id name } } }`, []string{eve, ff, mallory, oddID}},
		{`{ postsConnection { edges { cursor node { id userId author { id } } } pageInfo { endCursor } } }`, []string{eve, ff, mallory, oddID}},
	}
	for _, q := range queries {
		t.Run(q.query+" answers every post", func(t *testing.T) {
			res := s.Do(auth.NewContext(t.Context(), posts.Caller{}), schema.Request{Query: q.query})
			body, err := json.Marshal(res)
			if err != nil || !json.Valid(res.Data) || len(res.Errors) > 0 {
				t.Fatalf("data %q, errors %v, marshal %v", res.Data, res.Errors, err)
			}
			text := string(body)
			for _, want := range q.want {
				if !strings.Contains(text, want) {
					t.Errorf("%s lacks %s", text, want)
				}
			}
			if n := strings.Count(text, `"id":`) - strings.Count(text, `"author":{"id":`); n != len(users)+1 {
				t.Errorf("%d posts; want %d: %s", n, len(users)+1, text)
			}
		})
	}
	t.Run("user answers the user with such an id", func(t *testing.T) {
		res := s.Do(auth.NewContext(t.Context(), posts.Caller{}), schema.Request{Query: `query($id: ID!) { user(id: $id) { id posts { userId } } }`, Variables: map[string]any{"id": "eve\u0001"}})
		if want := `{"user":{"id":"eve\u0001","posts":[{"userId":"eve\u0001"},{"userId":"eve\u0001"}]}}`; string(res.Data) != want || len(res.Errors) > 0 {
			t.Errorf("got %s %v; want %s", res.Data, res.Errors, want)
		}
	})
}
