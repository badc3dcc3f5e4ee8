package schema_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
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
	wide := newSchemaWith(t, 100, schema.Limits{MaxRootFields: 20}, commands) // for fan-outs at the root
	tight := newSchemaWith(t, 100, schema.Limits{MaxAliases: 2, MaxRootFields: 2, MaxFields: 6}, commands)

	const deepTwice = `{ user(id: "alice") { posts(limit: 100) { author { posts(limit: 100) { id } } } } }`
	tests := []struct {
		name    string
		s       *schema.Schema
		query   string
		vars    map[string]any
		refusal string // a part of the message, or "" when the operation must run
		code    string // the refusal's code, when not GRAPHQL_VALIDATION_FAILED
	}{
		{"a user's 100 posts, each with its author's 100 posts, is refused", defaults, deepTwice, nil, "more than 2000 values (max_cost)", ""},
		{"the same with the limits in variables is refused", defaults,
			`query($n: Int) { user(id: "alice") { posts(limit: $n) { author { posts(limit: $n) { id } } } } }`, map[string]any{"n": 100.0}, "max_cost", ""},
		{"the same with the limits in variable defaults is refused", defaults,
			`query($n: Int = 100) { user(id: "alice") { posts(limit: $n) { author { posts(limit: $n) { id } } } } }`, nil, "max_cost", ""},
		{"the same behind a fragment is refused", defaults,
			`{ ...F } fragment F on Query { user(id: "alice") { posts(limit: 100) { author { posts(limit: 100) { id } } } } }`, nil, "max_cost", ""},
		{"the same behind inline fragments is refused", defaults,
			`{ ... on Query { user(id: "alice") { ... { posts(limit: 100) { author { posts(limit: 100) { id } } } } } } }`, nil, "max_cost", ""},
		{"the same in a mutation's answer is refused, and nothing is written", defaults,
			`mutation { createPost(input: {title: "x"}) { author { posts(limit: 100) { author { posts(limit: 100) { id } } } } } }`, nil, "max_cost", ""},
		{"a connection of 100 edges whose authors list 100 posts is refused", defaults,
			`{ postsConnection(first: 100) { edges { node { author { posts(limit: 100) { id } } } } } }`, nil, "max_cost", ""},
		{"limits over max_limit count as max_limit, and 100 x 100 is still refused", defaults,
			`{ posts(limit: 100000) { author { posts(limit: 100000) { id } } } }`, nil, "max_cost", ""},
		{"an unset variable counts as max_limit", defaults,
			`query($n: Int) { posts(limit: $n) { author { posts(limit: $n) { id } } } }`, nil, "max_cost", ""},
		{"11 aliases of 100 posts with their ids (2200 values) are refused", wide, fanOut(11, 100), nil, "max_cost", ""},
		{"10 aliases of 100 posts with their ids (2000 values) run", wide, fanOut(10, 100), nil, "", ""},
		{"100 posts with 20 aliases of their body (2100 values) are refused", defaults,
			"{ posts(limit: 100) { " + aliases("body", 20) + "} }", nil, "max_cost", ""},
		{"fragments that expand to 100,000 lists are refused at once", defaults, exponential, nil, "10001 fields at its root", errcode.MaxRootFields.GraphQL},
		{"fragments that expand to 100,000 lists under one root field are refused at once", defaults,
			`{ user(id: "alice") { ...A } }` + strings.ReplaceAll(strings.ReplaceAll(strings.TrimPrefix(exponential, "{ ...A }"), "on Query", "on User"), `a1: user(id: "a") { id }`, "id"),
			nil, "the query selects 20002 fields, fragments expanded, more than the limit of 500 (max_fields)", errcode.MaxFields.GraphQL},
		{"fragments that spread each other are refused by validation", defaults,
			`{ ...A } fragment A on Query { ...B } fragment B on Query { ...A }`, nil, "", ""},
		{"100 posts with their authors run", defaults, `{ posts(limit: 100) { title author { name } } }`, nil, "", ""},
		{"50 posts whose authors list 10 posts each run", defaults, `{ posts(limit: 50) { author { posts(limit: 10) { id } } } }`, nil, "", ""},
		{"lists without limits take their defaults: 20 posts whose authors list 10 each run", defaults,
			`{ posts { author { posts { id } } } postsConnection { edges { node { id } } pageInfo { hasNextPage } } }`, nil, "", ""},
		{"a depth of 15 runs", defaults, nest(15), nil, "", ""},
		{"a depth of 16 is refused", defaults, nest(16), nil, "exceeds max depth 15", ""},
		{"a query over 16 KiB is refused", defaults, "{ posts { id } }" + strings.Repeat(" ", 16<<10), nil, "max_query_length", ""},
		{"a syntax error is refused", defaults, `{ posts { id }`, nil, "syntax error", errcode.ParseFailed.GraphQL},
		{"no operation is refused", defaults, `fragment F on Query { posts { id } }`, nil, "no operation", ""},
		{"graphql-js's standard introspection query runs", defaults, string(introspection), nil, "", ""},
		{"graphql-js's introspection query with specifiedByUrl and inputValueDeprecation runs", defaults, string(fullIntrospection), nil, "", ""},
		{"introspection lists nested three deep are refused", defaults,
			`{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }`, nil, "nest more than 2 deep", ""},
		{"introspection lists nested three deep through a fragment are refused", defaults,
			`{ __type(name: "Post") { ...T } } fragment T on __Type { fields { type { interfaces { possibleTypes { name } } } } }`, nil, "nest more than 2 deep", ""},
		{"an alias of __schema is refused", defaults, `{ a: __schema { queryType { name } } }`, nil, "introspection takes no aliases (a: __schema)", ""},
		{"an alias within __type is refused", defaults, `{ __type(name: "Post") { n: name } }`, nil, "introspection takes no aliases (n: name)", ""},
		{"aliases that repeat the schema through fragments are refused", defaults,
			`{ __schema { types { fields { ...A } } } } fragment A on __Field { t0: type { name } t1: type { name } }`, nil, "introspection takes no aliases (t0: type)", ""},
		{"__type without aliases runs", defaults, `{ __type(name: "Post") { name fields { name type { name ofType { name } } } } }`, nil, "", ""},
		{"the strict site refuses __schema", strict, `{ __schema { queryType { name } } }`, nil, "introspection is turned off", ""},
		{"the strict site refuses __type inside a fragment", strict, `{ ...F } fragment F on Query { __type(name: "Post") { name } }`, nil, "introspection is turned off", ""},
		{"the strict site still answers __typename", strict, `{ __typename }`, nil, "", ""},
		{"the strict site refuses 6 values", strict, `{ posts(limit: 3) { id } }`, nil, "more than 5 values", ""},
		{"the strict site runs 4 values", strict, `{ posts(limit: 2) { id } }`, nil, "", ""},
		{"the strict site refuses a depth of 4", strict, nest(4), nil, "exceeds max depth 3", ""},
		{"3 aliased fields are refused", tight, `{ user(id: "alice") { a: id b: name c: email } }`, nil,
			"the query has 3 aliased fields, fragments expanded, more than the limit of 2 (max_aliases)", errcode.MaxAliases.GraphQL},
		{"2 aliased fields run", tight, `{ user(id: "alice") { a: id b: name } }`, nil, "", ""},
		{"fields aliased to their own names are not aliases", tight, `{ user(id: "alice") { id: id name: name email: email } }`, nil, "", ""},
		{"aliases in a fragment spread twice count twice", tight, `{ user(id: "alice") { ...F ...F } } fragment F on User { a: id b: name }`, nil,
			"4 aliased fields", errcode.MaxAliases.GraphQL},
		{"3 root fields are refused", tight, `{ post(id: "x") { id } posts(limit: 1) { id } user(id: "alice") { id } }`, nil,
			"the query selects 3 fields at its root, fragments expanded, more than the limit of 2 (max_root_fields)", errcode.MaxRootFields.GraphQL},
		{"3 writes in one mutation are refused, and nothing is written", tight,
			`mutation { createPost(input: {title: "a"}) { id } updatePost(id: "x", input: {title: "b"}) { id } deletePost(id: "x") }`, nil,
			"the mutation selects 3 fields at its root, fragments expanded, more than the limit of 2 (max_root_fields): each is a write; send the rest in another request", errcode.MaxRootFields.GraphQL},
		{"root fields count through fragments and inline fragments", tight,
			`{ post(id: "x") { id } ...F ... on Query { user(id: "alice") { id } } } fragment F on Query { posts(limit: 1) { id } }`, nil,
			"3 fields at its root", errcode.MaxRootFields.GraphQL},
		{"__typename at the root is not a root field", tight, `{ __typename post(id: "x") { id } posts(limit: 1) { id } }`, nil, "", ""},
		{"7 fields are refused", tight, `{ posts(limit: 1) { id title body createdAt updatedAt userId } }`, nil,
			"the query selects 7 fields, fragments expanded, more than the limit of 6 (max_fields)", errcode.MaxFields.GraphQL},
		{"6 fields run", tight, `{ posts(limit: 1) { id title body createdAt updatedAt } }`, nil, "", ""},
		{"fields count each time their fragment is spread", tight, `{ posts(limit: 1) { ...F ...F } } fragment F on Post { id title body }`, nil,
			"7 fields", errcode.MaxFields.GraphQL},
		{"the fields of a fragment no operation spreads count once", tight,
			`{ posts(limit: 1) { id title body } } fragment F on Post { id title body }`, nil, "7 fields", errcode.MaxFields.GraphQL},
		{"7 uses of variables are refused", tight,
			`query($v: Boolean!) { posts(limit: 1) @skip(if: $v) @include(if: $v) { id @skip(if: $v) @include(if: $v) title @skip(if: $v) @include(if: $v) } __typename @skip(if: $v) }`,
			map[string]any{"v": false}, "the document uses variables 7 times, fragments expanded, more than the limit of 6 (max_fields", errcode.MaxFields.GraphQL},
		{"6 uses of variables run", tight,
			`query($v: Boolean!) { posts(limit: 1) @skip(if: $v) @include(if: $v) { id @skip(if: $v) @include(if: $v) title @skip(if: $v) @include(if: $v) } }`,
			map[string]any{"v": false}, "", ""},
		{"7 fragment spreads and inline fragments are refused", tight,
			`{ posts(limit: 1) { ...F ...F ... on Post { id } } } fragment F on Post { ... { id } ... { title } }`, nil,
			"the document spreads fragments and inline fragments 7 times, fragments expanded, more than the limit of 6 (max_fields", errcode.MaxFields.GraphQL},
		{"6 fragment spreads and inline fragments run", tight, `{ posts(limit: 1) { ...F ...F } } fragment F on Post { ... { id } ... { title } }`, nil, "", ""},
		{"a fragment that spreads itself is refused", defaults, `{ ...A } fragment A on Query { __typename ...A }`, nil, `fragment "A" spreads itself`, ""},
		{"fragments that spread each other in a cycle are refused", defaults, `{ ...A } fragment A on Query { ...B } fragment B on Query { ... on Query { ...C } } fragment C on Query { ...A }`, nil,
			`fragment "A" spreads itself through "B", "C"`, ""},
		{"the strict site refuses 201 bytes", strict, "{ posts { id } }" + strings.Repeat(" ", 185), nil, "201 bytes long, more than the limit of 200", ""},
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
			want := errcode.ValidationFailed.GraphQL
			if tt.code != "" {
				want = tt.code
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

// TestEveryOperationOfADocumentCounts sends documents of several operations, of which one runs:
// graphql-go validates them all, so all their fields count in max_fields.
func TestEveryOperationOfADocumentCounts(t *testing.T) {
	tight := newSchemaWith(t, 100, schema.Limits{MaxFields: 6})
	tests := []struct {
		name, query, refusal string
	}{
		{"7 fields in two operations are refused", `query A { posts(limit: 1) { id title } } query B { posts(limit: 1) { id title body } }`,
			"the document selects 7 fields in its 2 operations and 0 fragments, fragments expanded, more than the limit of 6 (max_fields): all of a document is validated, though one operation runs, so send only the operation to run"},
		{"7 fields in two operations sharing a fragment are refused", `query A { ...F } query B { ...F } fragment F on Query { posts(limit: 1) { id title body } }`, "8 fields"},
		{"6 fields in two operations run", `query A { posts(limit: 1) { id title } } query B { posts(limit: 1) { id } }`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tight.Do(t.Context(), schema.Request{Query: tt.query, OperationName: "A"})
			if tt.refusal == "" {
				if len(res.Errors) > 0 {
					t.Errorf("errors %v; want none", res.Errors)
				}
				return
			}
			if len(res.Errors) != 1 || res.Data != nil || res.Errors[0].Extensions["code"] != errcode.MaxFields.GraphQL || !strings.Contains(res.Errors[0].Message, tt.refusal) {
				t.Errorf("data %s, errors %v; want only a refusal with %s and %q", res.Data, res.Errors, errcode.MaxFields.GraphQL, tt.refusal)
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
		if res.Data != nil || len(res.Errors) == 0 || res.Errors[0].Extensions["code"] != errcode.ValidationFailed.GraphQL {
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

// TestLiterals sends values written in the query that their place cannot take: each is refused
// before anything runs, in GraphQL's terms, never Go's.
func TestLiterals(t *testing.T) {
	commands := &callLog{}
	s := newSchemaWith(t, 100, schema.Limits{}, commands)
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
