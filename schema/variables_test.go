package schema_test

import (
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/schema"
)

func TestVariables(t *testing.T) {
	s := newSchema(t)
	id := create(t, s, alice, "first")
	const (
		patch  = `mutation($id: ID!, $p: PostPatch!) { updatePost(id: $id, input: $p) { title body } }`
		create = `mutation($in: PostInput!) { createPost(input: $in) { title } }`
		list   = `query($n: Int) { posts(limit: $n) { title } }`
	)
	ok := []struct {
		name, query string
		vars        map[string]any
		data        string
	}{
		{"a patch in a variable sets what it names", patch, map[string]any{"id": id, "p": map[string]any{"body": "b2"}}, `{"updatePost":{"title":"first","body":"b2"}}`},
		{"a patch in a variable with body null clears the body and keeps the title", patch, map[string]any{"id": id, "p": map[string]any{"body": nil}}, `{"updatePost":{"title":"first","body":null}}`},
		{"an Int given as a whole JSON number", list, map[string]any{"n": 1.0}, `{"posts":[{"title":"first"}]}`},
		{"an ID given as a whole number reads as its string", `query($id: ID!) { post(id: $id) { title } }`, map[string]any{"id": 12.0}, `{"post":null}`},
		{"a nullable variable given as null takes the default", list, map[string]any{"n": nil}, `{"posts":[{"title":"first"}]}`},
		{"a variable the operation does not declare is ignored", `{ posts(limit: 1) { title } }`, map[string]any{"extra": "x"}, `{"posts":[{"title":"first"}]}`},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			data, codes := exec(t, s, alice, tt.query, tt.vars)
			if codes != nil || data != tt.data {
				t.Errorf("data %s, codes %v; want %s", data, codes, tt.data)
			}
		})
	}
	refused := []struct {
		name, query string
		vars        map[string]any
		message     string
	}{
		{"a string for an Int", list, map[string]any{"n": "2"}, `$n must be an Int (a whole number from -2147483648 to 2147483647), not a string`},
		{"a fraction for an Int", list, map[string]any{"n": 1.5}, `$n must be an Int`},
		{"an Int over 2^31-1", list, map[string]any{"n": 2147483648.0}, `$n must be an Int`},
		{"a number for a String in an input", create, map[string]any{"in": map[string]any{"title": 42.0}}, `$in.title must be a String, not the number 42`},
		{"a member the input type does not have", create, map[string]any{"in": map[string]any{"title": "t", "userId": "bob"}}, `$in has no field "userId": a PostInput has title, body`},
		{"an input without its required member", create, map[string]any{"in": map[string]any{"body": "b"}}, `$in.title is required`},
		{"null for a required member", create, map[string]any{"in": map[string]any{"title": nil}}, `$in.title cannot be null`},
		{"a list for an input object", create, map[string]any{"in": []any{"t"}}, `$in must be a PostInput object, not a list`},
		{"a required variable not given", patch, map[string]any{"p": map[string]any{}}, `$id is required: give a value of type ID!`},
		{"a fractional ID", patch, map[string]any{"id": 1.5, "p": map[string]any{}}, `$id must be an ID`},
	}
	for _, tt := range refused {
		t.Run(tt.name+" is refused before anything runs", func(t *testing.T) {
			res := s.Do(t.Context(), schema.Request{Query: tt.query, Variables: tt.vars})
			if res.Data != nil || len(res.Errors) != 1 {
				t.Fatalf("data %s, errors %v; want one error and no data", res.Data, res.Errors)
			}
			if e := res.Errors[0]; e.Extensions["code"] != errcode.BadUserInput.GraphQL || !strings.Contains(e.Message, tt.message) {
				t.Errorf("error %q %v; want BAD_USER_INPUT and %q", e.Message, e.Extensions, tt.message)
			}
		})
	}
	if data, _ := exec(t, s, alice, `query($id: ID!) { post(id: $id) { title body } }`, map[string]any{"id": id}); data != `{"post":{"title":"first","body":null}}` {
		t.Errorf("after the refusals the post is %s; want it as the last patch left it", data)
	}
}
