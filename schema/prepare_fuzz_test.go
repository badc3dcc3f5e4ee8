package schema

import (
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
	"github.com/vektah/gqlparser/v2/parser"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/posts"
)

// FuzzPrepare checks the document that graphql-go runs: for every query Prepare accepts, the
// printed document reads the same again (printing it twice gives the same text) and graphql-go's
// own lexer and parser read it without a syntax error, so the single reading of the limits is
// also the one that runs.
func FuzzPrepare(f *testing.F) {
	for _, seed := range []string{
		`{ posts { id } }`,
		`query($n: Int = 3, $id: ID!) { posts(limit: $n) { id ... on Post { title } ...F } post(id: $id) { author { name } } } fragment F on Post { body }`,
		`{ post(id: """\""") { id } evil: posts(limit: 100) { id } } #""") { id } }`,
		`{ post(id: "a\/b\u00e9\n\"") { id } }`,
		`mutation M { createPost(input: {title: """ block
		  string """, body: null}) { id } }`,
		`{ __schema { types { name } } __typename }`,
		"{ post(id: \"\u0085\u2028\") { id } }",
		`{ a: posts(limit: 1) @include(if: true) { id } }`,
	} {
		f.Add(seed)
	}
	s, err := New(posts.NewService(posts.Config{MaxLimit: 100, Logger: zap.NewNop()}), zap.NewNop(), DefaultLimits)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, query string) {
		op, refusal := s.Prepare(Request{Query: query})
		if refusal != nil {
			return
		}
		again, err := parser.ParseQuery(&ast.Source{Input: op.document})
		if err != nil {
			t.Fatalf("the printed document %q does not parse: %v", op.document, err)
		}
		var b strings.Builder
		formatter.NewFormatter(&b, formatter.WithoutDescription(), formatter.WithIndent("")).FormatQueryDocument(again)
		if b.String() != op.document {
			t.Fatalf("printing %q again gives %q", op.document, b.String())
		}
		for _, e := range s.exec.Validate(op.document) {
			if e.Rule == "" && strings.Contains(e.Message, "syntax error") {
				t.Fatalf("graphql-go cannot read the printed document %q: %v", op.document, e)
			}
		}
	})
}
