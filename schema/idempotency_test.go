package schema_test

import (
	"testing"

	"github.com/postsedge/caddy-posts/schema"
)

func TestWhichOperationsCreateOnePost(t *testing.T) {
	s := newSchema(t)
	tests := []struct {
		name, query, operationName string
		want                       bool
	}{
		{"a mutation of one createPost creates one post", `mutation { createPost(input: {title: "t"}) { id } }`, "", true},
		{"an alias may name it", `mutation { made: createPost(input: {title: "t"}) { id title } }`, "", true},
		{"the operation that runs is the one that counts", `query Q { posts { id } } mutation M { createPost(input: {title: "t"}) { id } }`, "M", true},
		{"a query creates nothing", `query Q { posts { id } } mutation M { createPost(input: {title: "t"}) { id } }`, "Q", false},
		{"two createPosts are not one", `mutation { a: createPost(input: {title: "a"}) { id } b: createPost(input: {title: "b"}) { id } }`, "", false},
		{"createPost beside __typename is not alone", `mutation { __typename createPost(input: {title: "t"}) { id } }`, "", false},
		{"another mutation is not a create", `mutation { deletePost(id: "67d446000000000000000001") }`, "", false},
		{"a createPost spread from a fragment is not counted", `mutation { ...C } fragment C on Mutation { createPost(input: {title: "t"}) { id } }`, "", false},
		{"a createPost in an inline fragment is not counted", `mutation { ... on Mutation { createPost(input: {title: "t"}) { id } } }`, "", false},
		{"a createPost under a directive may create nothing", `mutation { createPost(input: {title: "t"}) @include(if: true) { id } }`, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op, refusal := s.Prepare(schema.Request{Query: tc.query, OperationName: tc.operationName})
			if refusal != nil {
				t.Fatalf("refused: %v", refusal)
			}
			if got := op.CreatesOnePost(); got != tc.want {
				t.Errorf("CreatesOnePost() = %v; want %v", got, tc.want)
			}
		})
	}
}

func TestAFingerprintIsWhatARequestAsks(t *testing.T) {
	s := newSchema(t)
	const create = `mutation New($t: String!, $b: String) { createPost(input: {title: $t, body: $b}) { id } }`
	fingerprint := func(t *testing.T, req schema.Request) string {
		t.Helper()
		op, refusal := s.Prepare(req)
		if refusal != nil {
			t.Fatalf("refused: %v", refusal)
		}
		return op.Fingerprint()
	}
	first := fingerprint(t, schema.Request{Query: create, Variables: map[string]any{"t": "title", "b": "body"}})
	same := []struct {
		name string
		req  schema.Request
	}{
		{"the same request sent again", schema.Request{Query: create, Variables: map[string]any{"t": "title", "b": "body"}}},
		{"other white space, commas and comments", schema.Request{Query: "# a retry\nmutation New($t: String!,\n\t$b: String) {\n  createPost(input: {title: $t, body: $b}) { id, }\n}\n",
			Variables: map[string]any{"b": "body", "t": "title"}}},
		{"the operation named as it is the only one", schema.Request{Query: create, OperationName: "New", Variables: map[string]any{"t": "title", "b": "body"}}},
	}
	for _, tc := range same {
		t.Run(tc.name+" has the same fingerprint", func(t *testing.T) {
			if got := fingerprint(t, tc.req); got != first {
				t.Errorf("got %s; want %s", got, first)
			}
		})
	}
	other := []struct {
		name string
		req  schema.Request
	}{
		{"another title", schema.Request{Query: create, Variables: map[string]any{"t": "other", "b": "body"}}},
		{"no body", schema.Request{Query: create, Variables: map[string]any{"t": "title"}}},
		{"another selection", schema.Request{Query: `mutation New($t: String!, $b: String) { createPost(input: {title: $t, body: $b}) { id title } }`,
			Variables: map[string]any{"t": "title", "b": "body"}}},
		{"an alias", schema.Request{Query: `mutation New($t: String!, $b: String) { made: createPost(input: {title: $t, body: $b}) { id } }`,
			Variables: map[string]any{"t": "title", "b": "body"}}},
		{"the title written in the query", schema.Request{Query: `mutation New { createPost(input: {title: "title", body: "body"}) { id } }`}},
	}
	for _, tc := range other {
		t.Run(tc.name+" has another fingerprint", func(t *testing.T) {
			if got := fingerprint(t, tc.req); got == first {
				t.Errorf("got the first's, %s", got)
			}
		})
	}
}
