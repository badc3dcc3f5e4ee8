package schema

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/graph-gophers/graphql-go"
	"github.com/graph-gophers/graphql-go/ast"

	"github.com/postsedge/caddy-posts/internal/docgen"
)

// The documents show the schema in short: ```graphql blocks of type declarations, a field a
// line or several on one line. Each type they show must be the schema's, with every field,
// argument and type as schema.graphql declares them, so that an excerpt cannot go stale.
func TestTheDocumentsShowTheSchemaAsItIs(t *testing.T) {
	schema := graphql.MustParseSchema(sdl, nil).ASTSchema()
	blocks, err := docgen.Blocks("..")
	if err != nil {
		t.Fatal(err)
	}
	shown := 0
	for _, block := range blocks {
		if block.Lang != "graphql" {
			continue
		}
		for name, fields := range excerptTypes(block.Text) {
			shown++
			t.Run(block.File+" shows "+name, func(t *testing.T) {
				object, ok := schema.Types[name].(*ast.ObjectTypeDefinition)
				if !ok {
					t.Fatalf("the schema has no object type %s", name)
				}
				var want []string
				for _, f := range object.Fields {
					want = append(want, fieldSignature(f))
				}
				if !slices.Equal(fields, want) {
					t.Errorf("the excerpt has\n\t%s\nthe schema\n\t%s", strings.Join(fields, "\n\t"), strings.Join(want, "\n\t"))
				}
			})
		}
	}
	if shown < 5 {
		t.Fatalf("found %d types shown in the documents; the reading is broken", shown)
	}
}

// fieldSignature writes a field as the excerpts do: name(arg: Type, ...): Type.
func fieldSignature(f *ast.FieldDefinition) string {
	var args []string
	for _, a := range f.Arguments {
		args = append(args, a.Name.Name+": "+a.Type.String())
	}
	if len(args) == 0 {
		return f.Name + ": " + f.Type.String()
	}
	return f.Name + "(" + strings.Join(args, ", ") + "): " + f.Type.String()
}

var (
	comment   = regexp.MustCompile(`#.*`)
	typeDecl  = regexp.MustCompile(`type\s+(\w+)\s*\{([^}]*)\}`)
	fieldDecl = regexp.MustCompile(`(\w+)\s*(?:\(([^)]*)\))?\s*:\s*([\w\[\]!]+)`)
	argDecl   = regexp.MustCompile(`(\w+)\s*:\s*([\w\[\]!]+)`)
)

// excerptTypes reads the type declarations of an excerpt: each type's fields in order, written
// as fieldSignature writes them.
func excerptTypes(block string) map[string][]string {
	types := map[string][]string{}
	for _, m := range typeDecl.FindAllStringSubmatch(comment.ReplaceAllString(block, ""), -1) {
		var fields []string
		for _, f := range fieldDecl.FindAllStringSubmatch(m[2], -1) {
			var args []string
			for _, a := range argDecl.FindAllStringSubmatch(f[2], -1) {
				args = append(args, a[1]+": "+a[2])
			}
			if len(args) == 0 {
				fields = append(fields, f[1]+": "+f[3])
			} else {
				fields = append(fields, f[1]+"("+strings.Join(args, ", ")+"): "+f[3])
			}
		}
		types[m[1]] = fields
	}
	return types
}
