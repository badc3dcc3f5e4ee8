package schema_test

import (
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/schema"
)

// TestLiterals sends values written in the query that their place cannot take: each is refused
// before anything runs, in GraphQL's terms, never Go's.
func TestLiterals(t *testing.T) {
	commands := &callLog{}
	s := newSchemaWith(t, 100, schema.DefaultLimits, commands)
	refused := []struct {
		name, query, message string
	}{
		{"an object for an ID", `{ post(id: {a: 1}) { id } }`, `argument "id" of Query.post takes an ID (a string or a whole number), not an object`},
		{"a list for an ID", `{ post(id: ["a", "b"]) { id } }`, `argument "id" of Query.post takes an ID (a string or a whole number), not a list`},
		{"a fraction for an ID", `{ post(id: 1.5) { id } }`, `argument "id" of Query.post takes an ID (a string or a whole number), not the number 1.5`},
		{"a whole number over 2^31-1 for an ID", `{ post(id: 2147483648) { id } }`,
			`argument "id" of Query.post takes an ID (a string, or a whole number from -2147483648 to 2147483647), not the number 2147483648`},
		{"an object for an Int", `{ posts(limit: {a: 1}) { id } }`, `argument "limit" of Query.posts takes an Int (a whole number from -2147483648 to 2147483647), not an object`},
		{"a list of lists for an Int", `{ posts(limit: [[1]]) { id } }`, `argument "limit" of Query.posts takes an Int (a whole number from -2147483648 to 2147483647), not a list`},
		{"a string for an Int", `{ posts(limit: "1") { id } }`, `argument "limit" of Query.posts takes an Int (a whole number from -2147483648 to 2147483647), not a string`},
		{"an Int over 2^31-1", `{ posts(limit: 2147483648) { id } }`, `argument "limit" of Query.posts takes an Int (a whole number from -2147483648 to 2147483647), not the number 2147483648`},
		{"an Int under -2^31", `{ posts(limit: -2147483649) { id } }`, `not the number -2147483649`},
		{"an object for a String", `{ posts(after: {a: 1}) { id } }`, `argument "after" of Query.posts takes a String, not an object`},
		{"a list for a String", `{ posts(after: ["x"]) { id } }`, `argument "after" of Query.posts takes a String, not a list`},
		{"an enum value for a String", `{ posts(after: NEWEST) { id } }`, `argument "after" of Query.posts takes a String, not the enum value NEWEST`},
		{"an object for a Boolean of @include", `{ posts @include(if: {a: 1}) { id } }`, `argument "if" of @include takes a Boolean, not an object`},
		{"an object for a String in an input object", `mutation { createPost(input: {title: {a: 1}}) { id } }`,
			`member "title" of argument "input" of Mutation.createPost takes a String, not an object`},
		{"a list for a String in an input object", `mutation { updatePost(id: "x", input: {body: ["b"]}) { id } }`,
			`member "body" of argument "input" of Mutation.updatePost takes a String, not a list`},
		{"a string for an input object", `mutation { createPost(input: "x") { id } }`, `argument "input" of Mutation.createPost takes a PostInput object, not a string`},
		{"a list for an input object", `mutation { createPost(input: [{title: "x"}]) { id } }`, `argument "input" of Mutation.createPost takes a PostInput object, not a list`},
		{"an object for introspection's String", `{ __type(name: {a: 1}) { name } }`, `argument "name" of Query.__type takes a String, not an object`},
		{"an object for introspection's Boolean", `{ __type(name: "Post") { fields(includeDeprecated: {a: 1}) { name } } }`,
			`argument "includeDeprecated" of __Type.fields takes a Boolean, not an object`},
		{"an Int over 2^31-1 in a variable's default value", `query($n: Int = 2147483648) { posts(limit: $n) { id } }`,
			`the default value of $n must be an Int (a whole number from -2147483648 to 2147483647), not the number 2147483648`},
		{"an object in a variable's default value", `query($id: ID = {a: 1}) { post(id: $id) { id } }`, `the default value of $id must be an ID (a string or a whole number), not an object`},
		{"an Int over 2^31-1 in a list in a variable's default value", `query($n: [Int] = [1, 2147483648]) { posts(limit: 1) { id } }`,
			`item 2 of the default value of $n must be an Int (a whole number from -2147483648 to 2147483647), not the number 2147483648`},
		{"an Int over 2^31-1 in a list in an argument the schema does not have", `{ posts(x: [1, {y: 2147483648}]) { id } }`,
			`member "y" of item 2 of argument "x" of Query.posts: the number 2147483648 is out of range: a whole number in a query is an Int, from -2147483648 to 2147483647`},
		{"an Int over 2^31-1 in an argument of a field the schema does not have", `{ posts { id nope(x: 99999999999) } }`,
			`argument "x" of Post.nope: the number 99999999999 is out of range`},
		{"an Int over 2^31-1 in a directive the schema does not have", `{ posts @cached(ttl: 99999999999) { id } }`, `argument "ttl" of @cached: the number 99999999999 is out of range`},
		{"lists nested 16 deep", `{ posts(x: ` + strings.Repeat("[", 16) + strings.Repeat("]", 16) + `) { id } }`, `argument "x" of Query.posts nests lists and objects more than 15 deep (max_depth)`},
		{"objects nested 16 deep in a variable's default value", `query($p: PostInput = ` + strings.Repeat("{a: ", 16) + "1" + strings.Repeat("}", 16) + `) { posts { id } }`,
			`the default value of $p nests lists and objects more than 15 deep (max_depth)`},
	}
	for _, tt := range refused {
		t.Run(tt.name+" is refused before anything runs", func(t *testing.T) {
			commands.reset()
			res := s.Do(auth.NewContext(t.Context(), alice), schema.Request{Query: tt.query})
			if res.Data != nil || len(res.Errors) != 1 {
				t.Fatalf("data %s, errors %v; want one error and no data", res.Data, res.Errors)
			}
			if e := res.Errors[0]; e.Extensions["code"] != errcode.ValidationFailed.GraphQL || !strings.Contains(e.Message, tt.message) || len(e.Locations) != 1 {
				t.Errorf("error %q %v at %v; want GRAPHQL_VALIDATION_FAILED, %q and its location", e.Message, e.Extensions, e.Locations, tt.message)
			}
			if got := commands.list(); len(got) > 0 {
				t.Errorf("a refused operation made %d round trips: %v", len(got), got)
			}
		})
	}
	admitted := []struct {
		name, query string
	}{
		{"a whole number for an ID", `{ post(id: 2147483647) { id } }`},
		{"a block string for an ID", `{ post(id: """x""") { id } }`},
		{"the least Int", `query($n: Int = -2147483648) { posts(limit: 1) { id } n: posts(limit: $n) { id } }`},
		{"a single Int for a list of Int in a default value", `query($n: [Int] = 1) { posts(limit: 1) { id } }`},
		{"null for a nullable argument", `{ posts(limit: null, after: null) { id } }`},
		{"an input object with a null body", `mutation { createPost(input: {title: "t", body: null}) { title } }`},
	}
	for _, tt := range admitted {
		t.Run(tt.name+" is admitted", func(t *testing.T) {
			op, refusal := s.Prepare(schema.Request{Query: tt.query})
			if refusal != nil || op == nil {
				t.Errorf("refusal %v; want none", refusal)
			}
		})
	}
}
