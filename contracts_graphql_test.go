//go:build !race

// The breaking changes of a GraphQL schema, as graphql-js's findBreakingChanges defines them,
// found on graphql-go's syntax tree.

package caddyposts

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	graphql "github.com/graph-gophers/graphql-go"
	"github.com/graph-gophers/graphql-go/ast"
	"github.com/pb33f/libopenapi/what-changed/model"
)

// graphQLBreakingChanges are the changes of newSDL that break a client of oldSDL, as graphql-js's
// findBreakingChanges has them (its "dangerous" changes, such as an enum value added, are not).
func graphQLBreakingChanges(oldSDL, newSDL string) ([]breakingChange, error) {
	oldSchema, err := graphql.ParseSchema(oldSDL, nil)
	if err != nil {
		return nil, fmt.Errorf("the old schema: %w", err)
	}
	newSchema, err := graphql.ParseSchema(newSDL, nil)
	if err != nil {
		return nil, fmt.Errorf("the new schema: %w", err)
	}
	before, after := oldSchema.ASTSchema(), newSchema.ASTSchema()
	var changes []breakingChange
	add := func(name, format string, args ...any) {
		changes = append(changes, breakingChange{name, fmt.Sprintf(format, args...)})
	}

	for _, name := range slices.Sorted(maps.Keys(before.Types)) {
		o, n := before.Types[name], after.Types[name]
		if n == nil {
			add(name, "the %s type was removed", o.Kind())
			continue
		}
		if o.Kind() != n.Kind() {
			add(name, "its kind changed from %s to %s", o.Kind(), n.Kind())
			continue
		}
		switch o := o.(type) {
		case *ast.ObjectTypeDefinition:
			n := n.(*ast.ObjectTypeDefinition)
			for _, i := range removed(interfaceNames(o.Interfaces), interfaceNames(n.Interfaces)) {
				add(name, "it no longer implements %s", i)
			}
			fieldChanges(name, o.Fields, n.Fields, add)
		case *ast.InterfaceTypeDefinition:
			n := n.(*ast.InterfaceTypeDefinition)
			for _, i := range removed(interfaceNames(o.Interfaces), interfaceNames(n.Interfaces)) {
				add(name, "it no longer implements %s", i)
			}
			fieldChanges(name, o.Fields, n.Fields, add)
		case *ast.InputObject:
			n := n.(*ast.InputObject)
			inputValueChanges(name+".", "", o.Values, n.Values, "input field", add)
		case *ast.Union:
			n := n.(*ast.Union)
			for _, m := range removed(o.TypeNames, n.TypeNames) {
				add(name, "its member %s was removed", m)
			}
		case *ast.EnumTypeDefinition:
			n := n.(*ast.EnumTypeDefinition)
			for _, v := range removed(enumValues(o), enumValues(n)) {
				add(name+"."+v, "the enum value was removed")
			}
		}
	}

	for _, name := range slices.Sorted(maps.Keys(before.Directives)) {
		o, n := before.Directives[name], after.Directives[name]
		at := "@" + name
		if n == nil {
			add(at, "the directive was removed")
			continue
		}
		if o.Repeatable && !n.Repeatable {
			add(at, "it is no longer repeatable")
		}
		for _, l := range removed(o.Locations, n.Locations) {
			add(at, "it can no longer be used on %s", l)
		}
		inputValueChanges(at+"(", ":)", o.Arguments, n.Arguments, "argument", add)
	}
	return changes, nil
}

// fieldChanges are the breaking changes of an object's or interface's fields: a field removed,
// its type changed other than to a narrower one, its arguments changed for the worse.
func fieldChanges(typeName string, before, after ast.FieldsDefinition, add func(name, format string, args ...any)) {
	for _, o := range before {
		name := typeName + "." + o.Name
		n := after.Get(o.Name)
		if n == nil {
			add(name, "the field was removed")
			continue
		}
		if !safeForOutput(o.Type, n.Type) {
			add(name, "its type changed from %s to %s", o.Type, n.Type)
		}
		inputValueChanges(name+"(", ":)", o.Arguments, n.Arguments, "argument", add)
	}
}

// inputValueChanges are the breaking changes of arguments or input fields (named prefix + name +
// suffix): one removed, its type changed other than to a wider one, a required one added.
func inputValueChanges(prefix, suffix string, before, after ast.ArgumentsDefinition, what string, add func(name, format string, args ...any)) {
	for _, o := range before {
		name := prefix + o.Name.Name + suffix
		n := after.Get(o.Name.Name)
		if n == nil {
			add(name, "the %s was removed", what)
			continue
		}
		if !safeForInput(o.Type, n.Type) {
			add(name, "its type changed from %s to %s", o.Type, n.Type)
		}
	}
	for _, n := range after {
		if before.Get(n.Name.Name) == nil && isRequired(n) {
			name := prefix + n.Name.Name + suffix
			add(name, "a required %s was added", what)
		}
	}
}

// isRequired is an input value a client must now give: non-null and without a default.
func isRequired(v *ast.InputValueDefinition) bool {
	_, nonNull := v.Type.(*ast.NonNull)
	return nonNull && v.Default == nil
}

// safeForOutput: what a client reads may become non-null, never nullable or another type.
func safeForOutput(before, after ast.Type) bool {
	switch o := before.(type) {
	case *ast.List:
		switch n := after.(type) {
		case *ast.List:
			return safeForOutput(o.OfType, n.OfType)
		case *ast.NonNull:
			return safeForOutput(before, n.OfType)
		}
		return false
	case *ast.NonNull:
		n, ok := after.(*ast.NonNull)
		return ok && safeForOutput(o.OfType, n.OfType)
	default:
		switch n := after.(type) {
		case *ast.NonNull:
			return safeForOutput(before, n.OfType)
		case *ast.List:
			return false
		}
		return sameNamedType(before, after)
	}
}

// safeForInput: what a client sends may become nullable, never non-null or another type.
func safeForInput(before, after ast.Type) bool {
	switch o := before.(type) {
	case *ast.List:
		n, ok := after.(*ast.List)
		return ok && safeForInput(o.OfType, n.OfType)
	case *ast.NonNull:
		if n, ok := after.(*ast.NonNull); ok {
			return safeForInput(o.OfType, n.OfType)
		}
		return safeForInput(o.OfType, after)
	default:
		switch after.(type) {
		case *ast.NonNull, *ast.List:
			return false
		}
		return sameNamedType(before, after)
	}
}

func sameNamedType(a, b ast.Type) bool {
	na, okA := a.(ast.NamedType)
	nb, okB := b.(ast.NamedType)
	return okA && okB && na.TypeName() == nb.TypeName()
}

func interfaceNames(interfaces []*ast.InterfaceTypeDefinition) []string {
	var names []string
	for _, i := range interfaces {
		names = append(names, i.Name)
	}
	return names
}

func enumValues(e *ast.EnumTypeDefinition) []string {
	var values []string
	for _, v := range e.EnumValuesDefinition {
		values = append(values, v.EnumValue)
	}
	return values
}

// removed are the members of before that after lacks, in before's order.
func removed(before, after []string) []string {
	var out []string
	for _, s := range before {
		if !slices.Contains(after, s) {
			out = append(out, s)
		}
	}
	return out
}

// useOpenAPIRules makes libopenapi's rules of what breaks ours, but for one: a parameter that
// gains "required: true" breaks every client that leaves it out, where libopenapi counts only
// a "required" changed from false.
var useOpenAPIRules = sync.OnceFunc(func() {
	breaks := true
	rules := &model.BreakingRulesConfig{}
	rules.Merge(model.GenerateDefaultBreakingRules())
	rules.Merge(&model.BreakingRulesConfig{
		Parameter: &model.ParameterRules{Required: &model.BreakingChangeRule{Added: &breaks}},
	})
	model.SetActiveBreakingRulesConfig(rules)
})

// httpMethods are the operations of a path item, as libopenapi names them (its JSON names).
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace", "query"}

func TestTheGraphQLCheckFindsEachKindOfBreakAndLetsSafeChangesPass(t *testing.T) {
	// The schema each case edits once.
	const base = `
directive @audience(scopes: [String!]) repeatable on FIELD_DEFINITION | OBJECT
interface Node { id: ID! }
interface Named implements Node { id: ID! name: String }
enum Role { ADMIN READER }
type Draft { title: String }
union SearchResult = Post | User
input PostInput { title: String! body: String }
type Query {
  "Posts."
  posts(userId: ID, limit: Int, after: String): [Post!]!
  user(id: ID!): User
  search(text: String!): [SearchResult!]!
}
type Mutation { createPost(input: PostInput!): Post! }
type Post implements Node { id: ID! title: String! body: String tags: [String] }
type User implements Node & Named { id: ID! name: String role: Role }
`
	tests := []breakCase{
		{"a type removed", "type Draft { title: String }", "", []string{"Draft"}},
		{"a type changed kind", "enum Role { ADMIN READER }", "scalar Role", []string{"Role"}},
		{"a field removed", " body: String tags", " tags", []string{"Post.body"}},
		{"an output field made nullable", " title: String! body: String tags", " title: String body: String tags", []string{"Post.title"}},
		{"an output field's type changed", "body: String tags", "body: Int tags", []string{"Post.body"}},
		{"an output field made a list", "body: String tags", "body: [String] tags", []string{"Post.body"}},
		{"an output list's items made nullable", "): [Post!]!", "): [Post]!", []string{"Query.posts"}},
		{"an interface's field removed", "Named implements Node { id: ID! name: String }", "Named implements Node { id: ID! }", []string{"Named.name"}},
		{"an argument removed", "limit: Int, ", "", []string{"Query.posts(limit:)"}},
		{"an argument made non-null", "limit: Int", "limit: Int!", []string{"Query.posts(limit:)"}},
		{"an argument's type changed", "limit: Int", "limit: String", []string{"Query.posts(limit:)"}},
		{"an argument made a list", "limit: Int", "limit: [Int]", []string{"Query.posts(limit:)"}},
		{"a required argument added", "user(id: ID!)", "user(id: ID!, realm: String!)", []string{"Query.user(realm:)"}},
		{"an input field removed", " body: String }", " }", []string{"PostInput.body"}},
		{"a required input field added", " body: String }", " body: String author: ID! }", []string{"PostInput.author"}},
		{"an input field made non-null", " body: String }", " body: String! }", []string{"PostInput.body"}},
		{"an enum value removed", "{ ADMIN READER }", "{ ADMIN }", []string{"Role.READER"}},
		{"a union member removed", "= Post | User", "= Post", []string{"SearchResult"}},
		{"an interface removed from a type", "User implements Node & Named", "User implements Node", []string{"User"}},
		{"an interface removed from an interface", "Named implements Node {", "Named {", []string{"Named"}},
		{"a directive removed", "directive @audience(scopes: [String!]) repeatable on FIELD_DEFINITION | OBJECT", "", []string{"@audience"}},
		{"a directive's argument removed", "(scopes: [String!])", "", []string{"@audience(scopes:)"}},
		{"a directive's required argument added", "(scopes: [String!])", "(scopes: [String!], level: Int!)", []string{"@audience(level:)"}},
		{"a directive's location removed", "FIELD_DEFINITION | OBJECT", "FIELD_DEFINITION", []string{"@audience"}},
		{"a directive no longer repeatable", " repeatable on", " on", []string{"@audience"}},

		{"a field added", "tags: [String] }", "tags: [String] author: User }", nil},
		{"a type added", "enum Role", "scalar Cursor\nenum Role", nil},
		{"an optional argument added", "user(id: ID!)", "user(id: ID!, realm: String)", nil},
		{"a required argument added with a default", "user(id: ID!)", `user(id: ID!, realm: String! = "main")`, nil},
		{"an optional input field added", " body: String }", " body: String author: ID }", nil},
		{"a description changed", `"Posts."`, `"Posts, newest first."`, nil},
		{"an output field made non-null", "body: String tags", "body: String! tags", nil},
		{"an output list made non-null", "tags: [String]", "tags: [String!]!", nil},
		{"an argument made nullable", "search(text: String!)", "search(text: String)", nil},
		{"an enum value added", "{ ADMIN READER }", "{ ADMIN READER WRITER }", nil},
		{"a union member added", "= Post | User", "= Post | User | Draft", nil},
		{"an interface added to a type", "type Draft {", "type Draft implements Node { id: ID!", nil},
		{"a directive's location added", "FIELD_DEFINITION | OBJECT", "FIELD_DEFINITION | OBJECT | ENUM", nil},
	}
	checkBreakCases(t, base, tests, graphQLBreakingChanges)
}
