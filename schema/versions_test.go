package schema_test

import (
	"slices"
	"testing"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/schema"
)

func TestVersionsAndExpectedVersion(t *testing.T) {
	s := newSchema(t)
	version := func(t *testing.T, id string) string {
		t.Helper()
		data, codes := exec(t, s, alice, `query($id: ID!) { post(id: $id) { version } }`, map[string]any{"id": id})
		if codes != nil {
			t.Fatalf("post: %v", codes)
		}
		return data
	}
	const update = `mutation($id: ID!, $v: Int) { updatePost(id: $id, input: {title: "changed"}, expectedVersion: $v) { title version } }`
	const remove = `mutation($id: ID!, $v: Int) { deletePost(id: $id, expectedVersion: $v) }`

	t.Run("a new post is at version 1", func(t *testing.T) {
		if got := version(t, create(t, s, alice, "new")); got != `{"post":{"version":1}}` {
			t.Errorf("got %s", got)
		}
	})
	t.Run("updatePost at the post's version changes it and answers the next version", func(t *testing.T) {
		id := create(t, s, alice, "at 1")
		data, codes := exec(t, s, alice, update, map[string]any{"id": id, "v": 1.0})
		if codes != nil || data != `{"updatePost":{"title":"changed","version":2}}` {
			t.Errorf("got %s %v", data, codes)
		}
	})
	t.Run("updatePost without expectedVersion changes the post at any version", func(t *testing.T) {
		id := create(t, s, alice, "any")
		exec(t, s, alice, update, map[string]any{"id": id})
		if data, codes := exec(t, s, alice, update, map[string]any{"id": id}); codes != nil || data != `{"updatePost":{"title":"changed","version":3}}` {
			t.Errorf("got %s %v", data, codes)
		}
	})
	conflicts := []struct {
		name, query string
	}{{"updatePost", update}, {"deletePost", remove}}
	for _, c := range conflicts {
		t.Run(c.name+" at another version is VERSION_CONFLICT with the current version, and changes nothing", func(t *testing.T) {
			id := create(t, s, alice, "stays")
			exec(t, s, alice, update, map[string]any{"id": id})
			res := s.Do(auth.NewContext(t.Context(), alice), schema.Request{Query: c.query, Variables: map[string]any{"id": id, "v": 1.0}})
			if len(res.Errors) != 1 || res.Errors[0].Extensions["code"] != "VERSION_CONFLICT" || res.Errors[0].Extensions["currentVersion"] != int64(2) {
				t.Fatalf("errors %v; want one VERSION_CONFLICT with currentVersion 2", res.Errors)
			}
			if got := version(t, id); got != `{"post":{"version":2}}` {
				t.Errorf("after the conflict the post is %s; want it at version 2", got)
			}
		})
	}
	t.Run("deletePost at the post's version deletes it", func(t *testing.T) {
		id := create(t, s, alice, "doomed")
		if data, codes := exec(t, s, alice, remove, map[string]any{"id": id, "v": 1.0}); codes != nil || data != `{"deletePost":"`+id+`"}` {
			t.Errorf("got %s %v", data, codes)
		}
		if got := version(t, id); got != `{"post":null}` {
			t.Errorf("after the delete: %s", got)
		}
	})
	t.Run("someone else's post is FORBIDDEN, whatever expectedVersion says", func(t *testing.T) {
		id := create(t, s, bob, "bob's")
		for _, v := range []float64{1, 2} {
			if _, codes := exec(t, s, alice, update, map[string]any{"id": id, "v": v}); !slices.Equal(codes, []string{"FORBIDDEN"}) {
				t.Errorf("at %v: codes %v; want FORBIDDEN", v, codes)
			}
		}
	})
	refused := []struct {
		name  string
		query string
		vars  map[string]any // as decoded from JSON: numbers are float64
		code  string
	}{
		{"expectedVersion 0 is BAD_USER_INPUT", update, map[string]any{"v": 0.0}, "BAD_USER_INPUT"},
		{"a negative expectedVersion is BAD_USER_INPUT", remove, map[string]any{"v": -3.0}, "BAD_USER_INPUT"},
		{"an expectedVersion that is not a whole number is BAD_USER_INPUT", update, map[string]any{"v": 1.5}, "BAD_USER_INPUT"},
		{"an expectedVersion that is a string is BAD_USER_INPUT", update, map[string]any{"v": "1"}, "BAD_USER_INPUT"},
		{"an expectedVersion written as a float fails validation", `mutation($id: ID!) { updatePost(id: $id, input: {title: "x"}, expectedVersion: 1.5) { id } }`, nil, "GRAPHQL_VALIDATION_FAILED"},
		{"a version is not writable", `mutation($id: ID!) { updatePost(id: $id, input: {title: "x", version: 3}) { id } }`, nil, "GRAPHQL_VALIDATION_FAILED"},
	}
	for _, tc := range refused {
		t.Run(tc.name+" and changes nothing", func(t *testing.T) {
			id := create(t, s, alice, "untouched")
			vars := map[string]any{"id": id}
			for k, v := range tc.vars {
				vars[k] = v
			}
			if _, codes := exec(t, s, alice, tc.query, vars); !slices.Equal(codes, []string{tc.code}) {
				t.Errorf("codes %v; want %s", codes, tc.code)
			}
			if got := version(t, id); got != `{"post":{"version":1}}` {
				t.Errorf("the post is now %s; want it at version 1", got)
			}
		})
	}
}
