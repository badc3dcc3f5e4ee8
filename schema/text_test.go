package schema_test

import (
	"testing"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/schema"
)

func TestHalfSurrogatesAreRefusedNotReadAsReplacementCharacters(t *testing.T) {
	s := newSchema(t)
	for _, tt := range []struct {
		name, query string
		refused     bool
	}{
		{"a high half alone in a string", `{posts(after:"a\uD800b"){id}}`, true},
		{"a low half alone in a string", `{posts(after:"\udc00"){id}}`, true},
		{"a high half before another high half", `{posts(after:"\uD83D\uD83D"){id}}`, true},
		{"a pair in a string", `{posts(after:"\uD83D\uDE00"){id}}`, false},
		{"an escaped backslash before u", `{posts(after:"\\uD800"){id}}`, false},
		{`the text \uD800 in a block string`, `{posts(after:"""\uD800"""){id}}`, false},
		{`the text \uD800 in a comment`, "# \\uD800\n{posts{id}}", false},
		{"a half after an escaped quote", `{posts(after:"\"\uD800"){id}}`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, refusal := s.Prepare(schema.Request{Query: tt.query})
			switch {
			case tt.refused && (refusal == nil || refusal.Extensions["code"] != errcode.ParseFailed.GraphQL):
				t.Errorf("got %v; want %s", refusal, errcode.ParseFailed.GraphQL)
			case !tt.refused && refusal != nil:
				t.Errorf("refused: %v", refusal)
			}
		})
	}
	if i := schema.HalfSurrogate([]byte(`{"a":"\ud800"}`)); i != 6 {
		t.Errorf("HalfSurrogate of JSON = %d; want 6", i)
	}
}
