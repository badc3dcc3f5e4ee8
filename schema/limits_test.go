package schema_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/schema"
)

// nest is a query whose fields nest depth deep: user, then posts and author in turn, then id.
func nest(depth int) string {
	var open, close strings.Builder
	open.WriteString(`{ user(id: "alice") { `)
	for i := 2; i < depth; i++ {
		if i%2 == 0 {
			open.WriteString("posts(limit: 1) { ")
		} else {
			open.WriteString("author { ")
		}
		close.WriteString("} ")
	}
	return open.String() + "id " + close.String() + "} }"
}

// fanOut is a query with n aliases of a list of limit posts.
func fanOut(n, limit int) string {
	var b strings.Builder
	b.WriteString("{ ")
	for i := range n {
		fmt.Fprintf(&b, "p%d: posts(limit: %d) { id } ", i, limit)
	}
	return b.String() + "}"
}

// aliases selects field n times under different aliases.
func aliases(field string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "a%d: %s ", i, field)
	}
	return b.String()
}

// exponential is a document whose fragments spread each other ten times a level, five levels:
// 10^5 copies of the list at the bottom when expanded.
const exponential = `{ ...A }
fragment A on Query { a1: user(id: "a") { id } ...B ...B ...B ...B ...B ...B ...B ...B ...B ...B }
fragment B on Query { ...C ...C ...C ...C ...C ...C ...C ...C ...C ...C }
fragment C on Query { ...D ...D ...D ...D ...D ...D ...D ...D ...D ...D }
fragment D on Query { ...E ...E ...E ...E ...E ...E ...E ...E ...E ...E }
fragment E on Query { posts(limit: 1) { id } }`

func TestLimits(t *testing.T) {
	introspection, err := os.ReadFile("testdata/introspection.graphql")
	if err != nil {
		t.Fatal(err)
	}
	fullIntrospection, err := os.ReadFile("testdata/introspection_options.graphql")
	if err != nil {
		t.Fatal(err)
	}
	commands := &callLog{}
	defaults := newSchemaWith(t, 100, schema.Limits{}, commands)
	create(t, defaults, alice, "one")
	strict := newSchemaWith(t, 100, schema.Limits{MaxQueryLength: 200, MaxDepth: 3, MaxCost: 5, DisableIntrospection: true})

	const deepTwice = `{ user(id: "alice") { posts(limit: 100) { author { posts(limit: 100) { id } } } } }`
	tests := []struct {
		name      string
		s         *schema.Schema
		query     string
		vars      map[string]any
		refusal   string // a part of the message, or "" when the operation must run
		parseFail bool
	}{
		{"a user's 100 posts, each with its author's 100 posts, is refused", defaults, deepTwice, nil, "more than 2000 values (max_cost)", false},
		{"the same with the limits in variables is refused", defaults,
			`query($n: Int) { user(id: "alice") { posts(limit: $n) { author { posts(limit: $n) { id } } } } }`, map[string]any{"n": 100.0}, "max_cost", false},
		{"the same with the limits in variable defaults is refused", defaults,
			`query($n: Int = 100) { user(id: "alice") { posts(limit: $n) { author { posts(limit: $n) { id } } } } }`, nil, "max_cost", false},
		{"the same behind a fragment is refused", defaults,
			`{ ...F } fragment F on Query { user(id: "alice") { posts(limit: 100) { author { posts(limit: 100) { id } } } } }`, nil, "max_cost", false},
		{"the same behind inline fragments is refused", defaults,
			`{ ... on Query { user(id: "alice") { ... { posts(limit: 100) { author { posts(limit: 100) { id } } } } } } }`, nil, "max_cost", false},
		{"the same in a mutation's answer is refused, and nothing is written", defaults,
			`mutation { createPost(input: {title: "x"}) { author { posts(limit: 100) { author { posts(limit: 100) { id } } } } } }`, nil, "max_cost", false},
		{"a connection of 100 edges whose authors list 100 posts is refused", defaults,
			`{ postsConnection(first: 100) { edges { node { author { posts(limit: 100) { id } } } } } }`, nil, "max_cost", false},
		{"limits over max_limit count as max_limit, and 100 x 100 is still refused", defaults,
			`{ posts(limit: 100000) { author { posts(limit: 100000) { id } } } }`, nil, "max_cost", false},
		{"an unset variable counts as max_limit", defaults,
			`query($n: Int) { posts(limit: $n) { author { posts(limit: $n) { id } } } }`, nil, "max_cost", false},
		{"11 aliases of 100 posts with their ids (2200 values) are refused", defaults, fanOut(11, 100), nil, "max_cost", false},
		{"10 aliases of 100 posts with their ids (2000 values) run", defaults, fanOut(10, 100), nil, "", false},
		{"100 posts with 20 aliases of their body (2100 values) are refused", defaults,
			"{ posts(limit: 100) { " + aliases("body", 20) + "} }", nil, "max_cost", false},
		{"fragments that expand to 100,000 lists are refused at once", defaults, exponential, nil, "max_cost", false},
		{"fragments that spread each other are refused by validation", defaults,
			`{ ...A } fragment A on Query { ...B } fragment B on Query { ...A }`, nil, "", false},
		{"100 posts with their authors run", defaults, `{ posts(limit: 100) { title author { name } } }`, nil, "", false},
		{"50 posts whose authors list 10 posts each run", defaults, `{ posts(limit: 50) { author { posts(limit: 10) { id } } } }`, nil, "", false},
		{"lists without limits take their defaults: 20 posts whose authors list 10 each run", defaults,
			`{ posts { author { posts { id } } } postsConnection { edges { node { id } } pageInfo { hasNextPage } } }`, nil, "", false},
		{"a depth of 15 runs", defaults, nest(15), nil, "", false},
		{"a depth of 16 is refused", defaults, nest(16), nil, "exceeds max depth 15", false},
		{"a query over 16 KiB is refused", defaults, "{ posts { id } }" + strings.Repeat(" ", 16<<10), nil, "max_query_length", false},
		{"a syntax error is refused", defaults, `{ posts { id }`, nil, "syntax error", true},
		{"no operation is refused", defaults, `fragment F on Query { posts { id } }`, nil, "no operation", false},
		{"graphql-js's standard introspection query runs", defaults, string(introspection), nil, "", false},
		{"graphql-js's introspection query with specifiedByUrl and inputValueDeprecation runs", defaults, string(fullIntrospection), nil, "", false},
		{"introspection lists nested three deep are refused", defaults,
			`{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }`, nil, "nest more than 2 deep", false},
		{"introspection lists nested three deep through a fragment are refused", defaults,
			`{ __type(name: "Post") { ...T } } fragment T on __Type { fields { type { interfaces { possibleTypes { name } } } } }`, nil, "nest more than 2 deep", false},
		{"an alias of __schema is refused", defaults, `{ a: __schema { queryType { name } } }`, nil, "introspection takes no aliases (a: __schema)", false},
		{"an alias within __type is refused", defaults, `{ __type(name: "Post") { n: name } }`, nil, "introspection takes no aliases (n: name)", false},
		{"aliases that repeat the schema through fragments are refused", defaults,
			`{ __schema { types { fields { ...A } } } } fragment A on __Field { t0: type { name } t1: type { name } }`, nil, "introspection takes no aliases (t0: type)", false},
		{"__type without aliases runs", defaults, `{ __type(name: "Post") { name fields { name type { name ofType { name } } } } }`, nil, "", false},
		{"the strict site refuses __schema", strict, `{ __schema { queryType { name } } }`, nil, "introspection is turned off", false},
		{"the strict site refuses __type inside a fragment", strict, `{ ...F } fragment F on Query { __type(name: "Post") { name } }`, nil, "introspection is turned off", false},
		{"the strict site still answers __typename", strict, `{ __typename }`, nil, "", false},
		{"the strict site refuses 6 values", strict, `{ posts(limit: 3) { id } }`, nil, "more than 5 values", false},
		{"the strict site runs 4 values", strict, `{ posts(limit: 2) { id } }`, nil, "", false},
		{"the strict site refuses a depth of 4", strict, nest(4), nil, "exceeds max depth 3", false},
		{"the strict site refuses 201 bytes", strict, "{ posts { id } }" + strings.Repeat(" ", 185), nil, "201 bytes long, more than the limit of 200", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			commands.reset()
			start := time.Now()
			res := tt.s.Do(auth.NewContext(t.Context(), alice), schema.Request{Query: tt.query, Variables: tt.vars})
			elapsed := time.Since(start)
			if tt.refusal == "" && !strings.Contains(tt.name, "validation") {
				if len(res.Errors) > 0 {
					t.Fatalf("errors: %v", res.Errors)
				}
				if string(res.Data) == "" || string(res.Data) == "null" {
					t.Errorf("data = %q; want the result", res.Data)
				}
				return
			}
			if len(res.Errors) != 1 || res.Data != nil {
				t.Fatalf("data %s, errors %v; want one refusal and no data", res.Data, res.Errors)
			}
			e := res.Errors[0]
			want := schema.CodeValidationFailed
			if tt.parseFail {
				want = schema.CodeParseFailed
			}
			if e.Extensions["code"] != want || !strings.Contains(e.Message, tt.refusal) {
				t.Errorf("error %q %v; want code %s and a message containing %q", e.Message, e.Extensions, want, tt.refusal)
			}
			if got := commands.list(); len(got) > 0 {
				t.Errorf("a refused operation made %d round trips: %v", len(got), got)
			}
			if elapsed > time.Second {
				t.Errorf("refusing took %v", elapsed)
			}
		})
	}
}

// TestWhatRunsIsWhatWasChecked sends documents that graphql-go's lexer reads otherwise than the
// GraphQL spec (it ends a block string at \"""): what runs is what the limits checked, a post
// whose id is the long string, never the selections graphql-go would have found in it.
func TestWhatRunsIsWhatWasChecked(t *testing.T) {
	defaults := newSchemaWith(t, 100, schema.Limits{})
	strict := newSchemaWith(t, 100, schema.Limits{DisableIntrospection: true})
	tests := []struct {
		name  string
		s     *schema.Schema
		query string
	}{
		{"a costly selection", defaults, `{ post(id: """\""") { id } evil: posts(limit: 100) { author { posts(limit: 100) { id } } } } #""") { id } }`},
		{"__schema where introspection is off", strict, `{ post(id: """\""") { id } __schema { types { name fields { name } } } } #""") { id } }`},
		{"nested introspection lists", defaults, `{ post(id: """\""") { id } __type(name: "Post") { fields { type { fields { type { fields { name } } } } } } } #""") { id } }`},
	}
	t.Run("a client's text that graphql-go cannot even parse is refused, not a panic", func(t *testing.T) {
		// gqlparser reads one operation with the unknown field a; graphql-go's parser, asked
		// where the error is, panics on the "\400" it reads as a description.
		res := defaults.Do(t.Context(), schema.Request{Query: `{ a(x: """\""") } "\400" query Q { a } #""") }`})
		if res.Data != nil || len(res.Errors) == 0 || res.Errors[0].Extensions["code"] != schema.CodeValidationFailed {
			t.Errorf("data %s, errors %v; want a validation error and no data", res.Data, res.Errors)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name+" hidden in a block string does not run", func(t *testing.T) {
			res := tt.s.Do(auth.NewContext(t.Context(), alice), schema.Request{Query: tt.query})
			if len(res.Errors) > 0 || string(res.Data) != `{"post":null}` {
				t.Errorf("data %s, errors %v; want only the post, null", res.Data, res.Errors)
			}
		})
	}
}
