package schema_test

import (
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/schema"
)

// exponential is a document whose fragments spread each other ten times a level, five levels:
// 10^5 copies of the list at the bottom when expanded.
const exponential = `{ ...A }
fragment A on Query { a1: user(id: "a") { id } ...B ...B ...B ...B ...B ...B ...B ...B ...B ...B }
fragment B on Query { ...C ...C ...C ...C ...C ...C ...C ...C ...C ...C }
fragment C on Query { ...D ...D ...D ...D ...D ...D ...D ...D ...D ...D }
fragment D on Query { ...E ...E ...E ...E ...E ...E ...E ...E ...E ...E }
fragment E on Query { posts(limit: 1) { id } }`

// TestAdmission sends documents past max_aliases, max_root_fields and max_fields, fragments
// expanded, and fragments that spread each other: the admission pass refuses each before
// anything runs, and admits those at the limits.
func TestAdmission(t *testing.T) {
	commands := &callLog{}
	defaults := newSchemaWith(t, 100, schema.DefaultLimits, commands)
	tight := newSchemaWith(t, 100, limitsWith(func(l *schema.Limits) { l.MaxAliases, l.MaxRootFields, l.MaxFields = 2, 2, 6 }), commands)
	checkLimits(t, commands, []limitCase{
		{"fragments that expand to 100,000 lists are refused at once", defaults, exponential, nil, "10001 fields at its root", errcode.MaxRootFields.GraphQL},
		{"fragments that expand to 100,000 lists under one root field are refused at once", defaults,
			`{ user(id: "alice") { ...A } }` + strings.ReplaceAll(strings.ReplaceAll(strings.TrimPrefix(exponential, "{ ...A }"), "on Query", "on User"), `a1: user(id: "a") { id }`, "id"),
			nil, "the query selects 20002 fields, fragments expanded, more than the limit of 500 (max_fields)", errcode.MaxFields.GraphQL},
		{"fragments that spread each other are refused by validation", defaults,
			`{ ...A } fragment A on Query { ...B } fragment B on Query { ...A }`, nil, "", ""},
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
	})
}

// TestEveryOperationOfADocumentCounts sends documents of several operations, of which one runs:
// graphql-go validates them all, so all their fields count in max_fields.
func TestEveryOperationOfADocumentCounts(t *testing.T) {
	tight := newSchemaWith(t, 100, limitsWith(func(l *schema.Limits) { l.MaxFields = 6 }))
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
