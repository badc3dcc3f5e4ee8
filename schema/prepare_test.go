package schema_test

import (
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/internal/race"
	"github.com/postsedge/caddy-posts/schema"
)

// strictLimits are those of "the strict site" of the tests: short queries, shallow and cheap
// operations, no introspection.
var strictLimits = limitsWith(func(l *schema.Limits) {
	l.MaxQueryLength, l.MaxDepth, l.MaxCost, l.DisableIntrospection = 200, 3, 5, true
})

// limitCase is an operation that alice sends to a schema with limits, and what it gets.
type limitCase struct {
	name    string
	s       *schema.Schema
	query   string
	vars    map[string]any
	refusal string // a part of the message, or "" when the operation must run
	code    string // the refusal's code, when not GRAPHQL_VALIDATION_FAILED
}

// checkLimits runs each case: a refusal is the only error, has no data and is answered within a
// second (checked without the race detector) with no store call (commands logs the calls of the schemas that count them); an
// operation that must run answers data and no errors, unless its name says validation refuses it.
func checkLimits(t *testing.T, commands *callLog, tests []limitCase) {
	t.Helper()
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
			if !race.Enabled && elapsed > time.Second {
				t.Errorf("refusing took %v", elapsed)
			}
		})
	}
}

// TestPrepare sends queries that Prepare refuses before it reads their operation: too long, not
// GraphQL, or without an operation to run.
func TestPrepare(t *testing.T) {
	commands := &callLog{}
	defaults := newSchemaWith(t, 100, schema.DefaultLimits, commands)
	strict := newSchemaWith(t, 100, strictLimits)
	checkLimits(t, commands, []limitCase{
		{"a query over 16 KiB is refused", defaults, "{ posts { id } }" + strings.Repeat(" ", 16<<10), nil, "max_query_length", ""},
		{"a syntax error is refused", defaults, `{ posts { id }`, nil, "syntax error", errcode.ParseFailed.GraphQL},
		{"no operation is refused", defaults, `fragment F on Query { posts { id } }`, nil, "no operation", ""},
		{"the strict site refuses 201 bytes", strict, "{ posts { id } }" + strings.Repeat(" ", 185), nil, "201 bytes long, more than the limit of 200", ""},
	})
}

// TestWhatRunsIsWhatWasChecked sends documents that graphql-go's lexer reads otherwise than the
// GraphQL spec (it ends a block string at \"""): what runs is what the limits checked, a post
// whose id is the long string, never the selections graphql-go would have found in it.
func TestWhatRunsIsWhatWasChecked(t *testing.T) {
	defaults := newSchemaWith(t, 100, schema.DefaultLimits)
	strict := newSchemaWith(t, 100, limitsWith(func(l *schema.Limits) { l.DisableIntrospection = true }))
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
