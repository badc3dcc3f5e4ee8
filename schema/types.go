// The schema's types as the checks of Prepare read them. They are read twice, once each: the
// types of the SDL alone (definitions) for the cost and the variables, and the admission pass's
// type system, which adds the built-in scalars and directives and graphql-go's introspection
// types, whose arguments it checks too.

package schema

import (
	"strings"
	"sync"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// operationRoots are the root types of the operation types.
var operationRoots = map[ast.Operation]string{ast.Query: "Query", ast.Mutation: "Mutation", ast.Subscription: "Subscription"}

// definitions are the types that the embedded SDL defines, by name: read once, since the SDL
// never changes, and only read after.
var definitions = sync.OnceValues(func() (map[string]*ast.Definition, error) {
	doc, err := parser.ParseSchema(&ast.Source{Name: "schema.graphql", Input: sdl})
	if err != nil {
		return nil, err
	}
	types := map[string]*ast.Definition{}
	for _, def := range doc.Definitions {
		types[def.Name] = def
	}
	return types, nil
})

// field is the definition of the field name of the type typeName, or nil.
func (s *Schema) field(typeName, name string) *ast.FieldDefinition {
	if def := s.types[typeName]; def != nil {
		return def.Fields.ForName(name)
	}
	return nil
}

// isObject says whether values of the type typeName are objects, whose fields count in the cost too.
func (s *Schema) isObject(typeName string) bool {
	def := s.types[typeName]
	return def != nil && (def.Kind == ast.Object || def.Kind == ast.Interface || def.Kind == ast.Union)
}

// typeSystem is the schema as the admission pass reads it: the types and directives of the SDL,
// the built-in scalars and directives, and those of graphql-go's introspection types that take
// arguments or lead to one that does.
type typeSystem struct {
	types      map[string]*ast.Definition
	directives map[string]*ast.DirectiveDefinition
	meta       *ast.Definition // __schema, __type and __typename, which any type answers
}

// builtins is the part of graphql-go's own schema (internal/schema/meta.go) that the
// admission pass reads: __Meta holds the fields any type answers.
const builtins = `
scalar Int
scalar Float
scalar String
scalar Boolean
scalar ID
directive @include(if: Boolean!) on FIELD | FRAGMENT_SPREAD | INLINE_FRAGMENT
directive @skip(if: Boolean!) on FIELD | FRAGMENT_SPREAD | INLINE_FRAGMENT
type __Meta { __schema: __Schema! __type(name: String!): __Type __typename: String! }
type __Schema { types: [__Type!]! queryType: __Type! mutationType: __Type subscriptionType: __Type directives: [__Directive!]! }
type __Type {
  fields(includeDeprecated: Boolean! = false): [__Field!]
  interfaces: [__Type!]
  possibleTypes: [__Type!]
  enumValues(includeDeprecated: Boolean! = false): [__EnumValue!]
  inputFields(includeDeprecated: Boolean! = false): [__InputValue!]
  ofType: __Type
}
type __Field { args(includeDeprecated: Boolean! = false): [__InputValue!]! type: __Type! }
type __InputValue { type: __Type! }
type __Directive { args(includeDeprecated: Boolean! = false): [__InputValue!]! }
type __EnumValue { name: String! }
`

// typeSystemOnce reads the type system once: the SDL never changes.
var typeSystemOnce = sync.OnceValues(func() (*typeSystem, error) {
	doc, err := parser.ParseSchemas(&ast.Source{Name: "builtins.graphql", Input: builtins}, &ast.Source{Name: "schema.graphql", Input: sdl})
	if err != nil {
		return nil, err
	}
	ts := &typeSystem{types: map[string]*ast.Definition{}, directives: map[string]*ast.DirectiveDefinition{}}
	for _, def := range doc.Definitions {
		ts.types[def.Name] = def
	}
	for _, d := range doc.Directives {
		ts.directives[d.Name] = d
	}
	ts.meta = ts.types["__Meta"]
	return ts, nil
})

// field is the definition of the field name of the type typeName, or nil.
func (ts *typeSystem) field(typeName, name string) *ast.FieldDefinition {
	if strings.HasPrefix(name, "__") {
		if f := ts.meta.Fields.ForName(name); f != nil {
			return f
		}
	}
	if def := ts.types[typeName]; def != nil {
		return def.Fields.ForName(name)
	}
	return nil
}

// argumentType is the type of the argument name of defs, or nil.
func argumentType(defs ast.ArgumentDefinitionList, name string) *ast.Type {
	if d := defs.ForName(name); d != nil {
		return d.Type
	}
	return nil
}

// memberType is the type of the member name of an input object's fields, or nil.
func memberType(fields ast.FieldList, name string) *ast.Type {
	if f := fields.ForName(name); f != nil {
		return f.Type
	}
	return nil
}
