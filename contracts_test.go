//go:build !race

// The contracts a release promises, held against the last release: the OpenAPI description and
// the GraphQL schema may break their copies in release/ only where CHANGELOG.md's Unreleased
// section says so; CHANGELOG.md keeps Keep a Changelog's form; and the build recipes pin the
// module at the changelog's latest release, the version ./caddy reports. Nothing concurrent:
// the race detector would only slow the link of a binary with the whole module in it.

package caddyposts

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	graphql "github.com/graph-gophers/graphql-go"
	"github.com/graph-gophers/graphql-go/ast"
	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi/what-changed/model"
)

// The files of the contracts, and the last release's copies of them.
const (
	openAPIFile        = "openapi/openapi.yaml"
	schemaFile         = "schema/schema.graphql"
	releasedOpenAPI    = "release/openapi.yaml"
	releasedSchema     = "release/schema.graphql"
	changelogFile      = "CHANGELOG.md"
	changelogRepoURL   = "https://github.com/postsedge/caddy-posts"
	breakingEntryStart = "- **Breaking:**"
)

// A breakingChange is named as a person writes it in the changelog (`Post.title`,
// `Query.posts(limit:)`, `GET /posts/{id}`, `NewPost.body`); detail says what changed.
type breakingChange struct {
	name, detail string
}

func (c breakingChange) String() string { return "`" + c.name + "`: " + c.detail }

func TestEveryBreakingChangeOfTheContractsSinceTheLastReleaseIsInTheChangelog(t *testing.T) {
	if err := checkContracts(".", contractsRead(t, changelogFile)); err != nil {
		t.Error(err)
	}
}

func TestTheContractCheckFailsOnABreakTheChangelogDoesNotName(t *testing.T) {
	changelog := contractsRead(t, changelogFile)
	tests := []struct {
		name   string
		file   string
		cut    *regexp.Regexp // its first match in the copy of file becomes with
		with   string
		breaks string // the name of the break the changelog must give
	}{
		{"a GraphQL field removed", schemaFile, regexp.MustCompile(`(?m)^  """\n[^"]*"""\n  title: String!\n`), "", "Post.title"},
		{"a REST path removed", openAPIFile, regexp.MustCompile(`(?ms)^  /posts/\{id\}:\n.*?^components:\n`), "components:\n", "/posts/{id}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, file := range []string{openAPIFile, schemaFile, releasedOpenAPI, releasedSchema} {
				text := contractsRead(t, file)
				if file == tt.file {
					m := tt.cut.FindStringIndex(text)
					if m == nil {
						t.Fatalf("%s holds nothing that matches %s", file, tt.cut)
					}
					text = text[:m[0]] + tt.with + text[m[1]:]
				}
				contractsWrite(t, filepath.Join(dir, file), text)
			}
			err := checkContracts(dir, changelog)
			if err == nil || !strings.Contains(err.Error(), "`"+tt.breaks+"`") {
				t.Fatalf("the check gave %v, want a failure naming `%s`", err, tt.breaks)
			}
			announced := strings.Replace(changelog, "## [Unreleased]\n",
				"## [Unreleased]\n\n### Removed\n\n- **Breaking:** `"+tt.breaks+"` is gone.\n", 1)
			if err := checkContracts(dir, announced); err != nil {
				t.Errorf("with the break in the changelog, the check gave %v", err)
			}
		})
	}
}

// checkContracts holds the contracts of the repository at root against its release/ copies and
// the changelog's Unreleased section.
func checkContracts(root, changelog string) error {
	read := func(file string) ([]byte, error) { return os.ReadFile(filepath.Join(root, file)) }
	files := map[string][]byte{}
	for _, file := range []string{openAPIFile, schemaFile, releasedOpenAPI, releasedSchema} {
		data, err := read(file)
		if err != nil {
			return err
		}
		files[file] = data
	}
	graphQL, err := graphQLBreakingChanges(string(files[releasedSchema]), string(files[schemaFile]))
	if err != nil {
		return err
	}
	rest, err := openAPIBreakingChanges(files[releasedOpenAPI], files[openAPIFile])
	if err != nil {
		return err
	}
	log, problems := parseChangelog(changelog)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	var missing []string
	for _, set := range []struct {
		file    string
		changes []breakingChange
	}{{schemaFile, graphQL}, {openAPIFile, rest}} {
		for _, c := range unannounced(set.changes, log.unreleased) {
			missing = append(missing, fmt.Sprintf("%s breaks %s: %s", set.file, releasedCopy(set.file), c))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the Unreleased section of %s has no entry starting %q that names in backticks:\n%s",
			changelogFile, breakingEntryStart, strings.Join(missing, "\n"))
	}
	return nil
}

func releasedCopy(file string) string {
	if file == schemaFile {
		return releasedSchema
	}
	return releasedOpenAPI
}

// unannounced are the changes no breaking entry names: an entry starting "- **Breaking:**" with
// the change's name, exactly, between backticks.
func unannounced(changes []breakingChange, entries []string) []breakingChange {
	named := map[string]bool{}
	code := regexp.MustCompile("`([^`]+)`")
	for _, entry := range entries {
		if strings.HasPrefix(entry, breakingEntryStart) {
			for _, m := range code.FindAllStringSubmatch(entry, -1) {
				named[m[1]] = true
			}
		}
	}
	var out []breakingChange
	for _, c := range changes {
		if !named[c.name] {
			out = append(out, c)
		}
	}
	return out
}

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

// openAPIBreakingChanges are the changes libopenapi's what-changed marks breaking, each named by
// where it is: an operation's (its parameters, body, responses, inline schemas) as
// `GET /posts/{id}`; a path's, or the path itself removed, as `/posts/{id}`; a schema of
// components as `Post`, a property of it as `Post.body` (also when the property is removed or
// becomes required); anything else by libopenapi's property, `components.securitySchemes.apiKey`
// for a security scheme.
func openAPIBreakingChanges(oldDoc, newDoc []byte) ([]breakingChange, error) {
	useOpenAPIRules()
	before, err := libopenapi.NewDocument(oldDoc)
	if err != nil {
		return nil, fmt.Errorf("the old OpenAPI document: %w", err)
	}
	after, err := libopenapi.NewDocument(newDoc)
	if err != nil {
		return nil, fmt.Errorf("the new OpenAPI document: %w", err)
	}
	diff, err := libopenapi.CompareDocuments(before, after)
	if err != nil {
		return nil, fmt.Errorf("comparing the OpenAPI documents: %w", err)
	}
	if diff == nil {
		return nil, nil
	}

	// Each change is named once, by the most specific place that holds it: the walk goes from the
	// inside out, and a change already named keeps its name.
	names := map[*model.Change]string{}
	name := func(n string, changes ...*model.Change) {
		for _, c := range changes {
			if _, ok := names[c]; !ok {
				names[c] = n
			}
		}
	}
	if paths := diff.PathsChanges; paths != nil {
		for _, path := range slices.Sorted(maps.Keys(paths.PathItemsChanges)) {
			item := paths.PathItemsChanges[path]
			operations := map[string]*model.OperationChanges{
				"get": item.GetChanges, "put": item.PutChanges, "post": item.PostChanges,
				"delete": item.DeleteChanges, "options": item.OptionsChanges, "head": item.HeadChanges,
				"patch": item.PatchChanges, "trace": item.TraceChanges, "query": item.QueryChanges,
			}
			maps.Copy(operations, item.AdditionalOperationChanges)
			for method, op := range operations {
				if op != nil {
					name(strings.ToUpper(method)+" "+path, op.GetAllChanges()...)
				}
			}
			for _, c := range item.Changes {
				if slices.Contains(httpMethods, c.Property) {
					name(strings.ToUpper(c.Property)+" "+path, c)
				}
			}
			name(path, item.GetAllChanges()...)
		}
		for _, c := range paths.Changes {
			if strings.HasPrefix(c.Property, "/") {
				name(c.Property, c)
			}
		}
	}
	if components := diff.ComponentsChanges; components != nil {
		for schema, changes := range components.SchemaChanges {
			nameSchemaChanges(schema, changes, name)
		}
		for scheme, changes := range components.SecuritySchemeChanges {
			name("components.securitySchemes."+scheme, changes.GetAllChanges()...)
		}
	}
	var changes []breakingChange
	for _, c := range diff.GetAllChanges() {
		if !c.Breaking {
			continue
		}
		n, ok := names[c]
		if !ok {
			n = c.Property
		}
		changes = append(changes, breakingChange{n, describeChange(c)})
	}
	slices.SortStableFunc(changes, func(a, b breakingChange) int { return strings.Compare(a.name, b.name) })
	return changes, nil
}

// nameSchemaChanges names the changes of a schema and of its properties, property by property.
func nameSchemaChanges(schema string, changes *model.SchemaChanges, name func(string, ...*model.Change)) {
	if changes == nil {
		return
	}
	for property, sub := range changes.SchemaPropertyChanges {
		nameSchemaChanges(schema+"."+property, sub, name)
	}
	for _, c := range changes.Changes {
		// A property added, removed, made required or optional is the property's change.
		if c.Property == "properties" || c.Property == "required" {
			if p := c.New + c.Original; p != "" && !strings.ContainsAny(p, " \n") {
				name(schema+"."+p, c)
			}
		}
	}
	name(schema, changes.GetAllChanges()...)
}

// describeChange says what libopenapi found and where: a line of the last release's copy for a
// removal, of the current file otherwise.
func describeChange(c *model.Change) string {
	var what string
	line, of := (*int)(nil), ""
	if c.Context != nil {
		line = c.Context.NewLine
	}
	switch c.ChangeType {
	case model.Modified:
		what = fmt.Sprintf("%s changed from %q to %q", c.Property, c.Original, c.New)
	case model.PropertyAdded, model.ObjectAdded:
		what = fmt.Sprintf("%s: %q added", c.Property, c.New)
	case model.PropertyRemoved, model.ObjectRemoved:
		what = fmt.Sprintf("%s: %q removed", c.Property, c.Original)
		if c.Context != nil {
			line, of = c.Context.OriginalLine, " of the last release's copy"
		}
	default:
		what = c.Property + " changed"
	}
	if line != nil {
		what += fmt.Sprintf(" (line %d%s)", *line, of)
	}
	return what
}

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
	tests := []struct {
		name     string
		old, new string // edits of base: each old replaced by new
		want     []string
	}{
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(base, tt.old) {
				t.Fatalf("the schema holds no %q", tt.old)
			}
			changes, err := graphQLBreakingChanges(base, strings.Replace(base, tt.old, tt.new, 1))
			if err != nil {
				t.Fatal(err)
			}
			if got := changeNames(changes); !slices.Equal(got, tt.want) {
				t.Errorf("got %v (%v), want %v", got, changes, tt.want)
			}
		})
	}
}

func TestTheOpenAPICheckFindsEachKindOfBreakAndLetsSafeChangesPass(t *testing.T) {
	const base = `openapi: 3.1.0
info: {title: t, version: 1.0.0}
paths:
  /posts:
    get:
      description: A page of posts.
      parameters:
      - {name: limit, in: query, schema: {type: integer}}
      responses:
        '200':
          description: The page.
          content:
            application/json:
              schema: {type: array, items: {$ref: '#/components/schemas/Post'}}
        '400': {description: A bad request.}
    post:
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/NewPost'}
      responses:
        '201':
          description: Created.
          headers:
            Location: {required: true, schema: {type: string}}
  /posts/{id}:
    parameters:
    - {name: id, in: path, required: true, schema: {type: string}}
    get:
      responses:
        '200': {description: The post.}
    delete:
      responses:
        '204': {description: Deleted.}
components:
  securitySchemes:
    apiKey: {type: apiKey, in: header, name: X-API-Key}
  schemas:
    Post:
      type: object
      required: [id, title]
      properties:
        id: {type: string}
        title: {type: string}
        body: {type: string}
        version: {type: integer}
    NewPost:
      type: object
      required: [title]
      properties:
        title: {type: string}
        body: {type: string}
`
	tests := []struct {
		name     string
		old, new string
		want     []string
	}{
		{"a path removed", "  /posts/{id}:\n", "  /users/{id}:\n", []string{"/posts/{id}"}},
		{"an operation removed", "    delete:\n      responses:\n        '204': {description: Deleted.}\n", "", []string{"DELETE /posts/{id}"}},
		{"a parameter removed", "      parameters:\n      - {name: limit, in: query, schema: {type: integer}}\n", "", []string{"GET /posts"}},
		{"a parameter's type changed", "name: limit, in: query, schema: {type: integer}", "name: limit, in: query, schema: {type: string}", []string{"GET /posts"}},
		{"a parameter made required", "name: limit, in: query,", "name: limit, in: query, required: true,", []string{"GET /posts"}},
		{"a path's parameter renamed", "name: id, in: path", "name: postId, in: path", []string{"/posts/{id}", "/posts/{id}"}},
		{"a response removed", "        '400': {description: A bad request.}\n", "", []string{"GET /posts"}},
		{"a response header no longer required", "Location: {required: true,", "Location: {", []string{"POST /posts"}},
		{"a request body's media type removed", "          application/json:\n            schema: {$ref: '#/components/schemas/NewPost'}", "          text/plain:\n            schema: {$ref: '#/components/schemas/NewPost'}", []string{"POST /posts"}},
		{"a schema's property removed", "        body: {type: string}\n        version", "        version", []string{"Post.body"}},
		{"a schema's property's type changed", "version: {type: integer}", "version: {type: string}", []string{"Post.version"}},
		{"a property made required", "required: [title]", "required: [title, body]", []string{"NewPost.body"}},
		{"a security scheme changed", "in: header, name: X-API-Key", "in: header, name: X-Key", []string{"components.securitySchemes.apiKey"}},

		{"a path added", "  /posts/{id}:\n", "  /users:\n    get:\n      responses:\n        '200': {description: Users.}\n  /posts/{id}:\n", nil},
		{"an operation added", "    delete:\n", "    put:\n      responses:\n        '200': {description: Put.}\n    delete:\n", nil},
		{"an optional parameter added", "      - {name: limit,", "      - {name: userId, in: query, schema: {type: string}}\n      - {name: limit,", nil},
		{"a description changed", "A page of posts.", "A page of posts, newest first.", nil},
		{"a property added", "        version: {type: integer}\n", "        version: {type: integer}\n        tags: {type: array, items: {type: string}}\n", nil},
		{"a response added", "        '400': {description: A bad request.}\n", "        '400': {description: A bad request.}\n        '503': {description: Unavailable.}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(base, tt.old) {
				t.Fatalf("the document holds no %q", tt.old)
			}
			changes, err := openAPIBreakingChanges([]byte(base), []byte(strings.Replace(base, tt.old, tt.new, 1)))
			if err != nil {
				t.Fatal(err)
			}
			if got := changeNames(changes); !slices.Equal(got, tt.want) {
				t.Errorf("got %v (%v), want %v", got, changes, tt.want)
			}
		})
	}
}

func changeNames(changes []breakingChange) []string {
	var names []string
	for _, c := range changes {
		names = append(names, c.name)
	}
	return names
}

func TestABreakIsAnnouncedOnlyByABreakingEntryNamingItInBackticks(t *testing.T) {
	changes := []breakingChange{{"Post.title", ""}, {"GET /posts/{id}", ""}}
	tests := []struct {
		name    string
		entries []string
		missing []string
	}{
		{"both named", []string{"- **Breaking:** `Post.title` is gone, and so is\n  `GET /posts/{id}`."}, nil},
		{"in two entries", []string{"- **Breaking:** `Post.title` is gone.", "- **Breaking:** `GET /posts/{id}` is gone."}, nil},
		{"one named without backticks", []string{"- **Breaking:** Post.title and `GET /posts/{id}` are gone."}, []string{"Post.title"}},
		{"named in an entry that does not say it breaks", []string{"- `Post.title` is gone.", "- **Breaking:** `GET /posts/{id}` is gone."}, []string{"Post.title"}},
		{"named by a part only", []string{"- **Breaking:** `Post` and `/posts/{id}` changed."}, []string{"Post.title", "GET /posts/{id}"}},
		{"no entries", nil, []string{"Post.title", "GET /posts/{id}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := changeNames(unannounced(changes, tt.entries)); !slices.Equal(got, tt.missing) {
				t.Errorf("unannounced: %v, want %v", got, tt.missing)
			}
		})
	}
}

// A changelog as parseChangelog reads it.
type changelog struct {
	unreleased []string // the entries of the Unreleased section, each with its continuation lines
	releases   []string // the versions released, newest first
}

var (
	releaseHeading  = regexp.MustCompile(`^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$`)
	linkReference   = regexp.MustCompile(`^\[[^\]]+\]: \S+$`)
	changelogGroups = []string{"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
)

// parseChangelog reads a changelog in Keep a Changelog's form, and says where it departs from it:
// "# Changelog" and an intro; "## [Unreleased]"; the releases, "## [x.y.z] - YYYY-MM-DD", newest
// first; under each, only Keep a Changelog's "### " groups, each once; at the bottom, a link
// reference for Unreleased and for each release, as make release writes them.
func parseChangelog(text string) (changelog, []string) {
	var log changelog
	var problems []string
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if lines[0] != "# Changelog" {
		problem("%s starts with %q, not \"# Changelog\"", changelogFile, lines[0])
	}
	// The link references are the lines at the bottom after the last section's text.
	end := len(lines)
	for end > 0 && (linkReference.MatchString(lines[end-1]) || lines[end-1] == "") {
		end--
	}
	links := slices.DeleteFunc(slices.Clone(lines[end:]), func(s string) bool { return s == "" })

	section := ""       // the "## " heading of the lines being read
	var groups []string // the "### " headings of that section
	var dates []time.Time
	var versions [][3]int
	intro := false
	for i, line := range lines[1:end] {
		at := fmt.Sprintf("%s:%d", changelogFile, i+2)
		switch {
		case strings.HasPrefix(line, "## "):
			groups = nil
			if section == "" {
				if line != "## [Unreleased]" {
					problem("%s: the first section is %q, not \"## [Unreleased]\"", at, line)
				}
				if !intro {
					problem("%s: no intro paragraph before %q", at, line)
				}
				section = line
				continue
			}
			section = line
			m := releaseHeading.FindStringSubmatch(line)
			if m == nil {
				problem("%s: %q is not a release heading \"## [x.y.z] - YYYY-MM-DD\"", at, line)
				continue
			}
			var v [3]int
			for j := range v {
				v[j], _ = strconv.Atoi(m[j+1])
			}
			date, err := time.Parse(time.DateOnly, m[4])
			if err != nil {
				problem("%s: %q has no real date: %v", at, line, err)
			}
			if n := len(versions); n > 0 && slices.Compare(v[:], versions[n-1][:]) >= 0 {
				problem("%s: %s follows %s: releases go newest first, with versions increasing going up", at, m[1]+"."+m[2]+"."+m[3], log.releases[n-1])
			}
			if n := len(dates); n > 0 && err == nil && date.After(dates[n-1]) {
				problem("%s: %s is dated after the release above it", at, line)
			}
			versions = append(versions, v)
			dates = append(dates, date)
			log.releases = append(log.releases, m[1]+"."+m[2]+"."+m[3])
		case strings.HasPrefix(line, "### ") && section != "":
			group := strings.TrimPrefix(line, "### ")
			if !slices.Contains(changelogGroups, group) {
				problem("%s: %q is not one of Keep a Changelog's groups (%s)", at, line, strings.Join(changelogGroups, ", "))
			}
			if slices.Contains(groups, group) {
				problem("%s: %q twice in %q", at, line, section)
			}
			groups = append(groups, group)
		case strings.HasPrefix(line, "#"):
			problem("%s: the heading %q is neither a release's nor one of its groups", at, line)
		case section == "":
			if strings.TrimSpace(line) != "" {
				intro = true
			}
		case section == "## [Unreleased]":
			if strings.HasPrefix(line, "- ") {
				log.unreleased = append(log.unreleased, line)
			} else if n := len(log.unreleased); n > 0 && strings.HasPrefix(line, " ") {
				log.unreleased[n-1] += "\n" + line
			}
		}
	}
	if section == "" {
		problem("%s has no \"## [Unreleased]\" section", changelogFile)
	}

	var want []string
	if len(log.releases) == 0 {
		want = []string{"[Unreleased]: " + changelogRepoURL + "/commits/HEAD"}
	} else {
		want = []string{fmt.Sprintf("[Unreleased]: %s/compare/v%s...HEAD", changelogRepoURL, log.releases[0])}
		for i, v := range log.releases {
			if i+1 < len(log.releases) {
				want = append(want, fmt.Sprintf("[%s]: %s/compare/v%s...v%s", v, changelogRepoURL, log.releases[i+1], v))
			} else {
				want = append(want, fmt.Sprintf("[%s]: %s/releases/tag/v%s", v, changelogRepoURL, v))
			}
		}
	}
	if !slices.Equal(links, want) {
		problem("%s ends with the link references\n\t%s\nwant\n\t%s", changelogFile, strings.Join(links, "\n\t"), strings.Join(want, "\n\t"))
	}
	return log, problems
}

func TestTheChangelogIsInKeepAChangelogsForm(t *testing.T) {
	log, problems := parseChangelog(contractsRead(t, changelogFile))
	for _, p := range problems {
		t.Error(p)
	}
	if len(log.releases) == 0 {
		t.Errorf("%s names no release", changelogFile)
	}
}

func TestTheChangelogCheckRefusesEachDepartureFromTheForm(t *testing.T) {
	const good = `# Changelog

The intro.

## [Unreleased]

### Added

- A thing.

## [0.2.0] - 2026-12-01

### Removed

- **Breaking:** ` + "`Post.title`" + `.

## [0.1.0] - 2026-11-27

The first release.

### Added

- Everything.

[Unreleased]: https://github.com/postsedge/caddy-posts/compare/v0.2.0...HEAD
[0.2.0]: https://github.com/postsedge/caddy-posts/compare/v0.1.0...v0.2.0
[0.1.0]: https://github.com/postsedge/caddy-posts/releases/tag/v0.1.0
`
	if log, problems := parseChangelog(good); len(problems) > 0 || !slices.Equal(log.releases, []string{"0.2.0", "0.1.0"}) || len(log.unreleased) != 1 {
		t.Fatalf("the good changelog: %v, %v", log, problems)
	}
	tests := []struct {
		name, old, new string
		says           string
	}{
		{"another title", "# Changelog", "# Changes", "not \"# Changelog\""},
		{"no intro", "The intro.\n", "", "no intro"},
		{"no Unreleased section", "## [Unreleased]\n\n### Added\n\n- A thing.\n\n", "", "the first section"},
		{"a release without a date", "## [0.2.0] - 2026-12-01", "## [0.2.0]", "is not a release heading"},
		{"a version that is not x.y.z", "## [0.2.0] - 2026-12-01", "## [0.2] - 2026-12-01", "is not a release heading"},
		{"a date that is not one", "2026-12-01", "2026-13-01", "no real date"},
		{"releases oldest first", "## [0.2.0] - 2026-12-01", "## [0.0.9] - 2026-12-01", "newest first"},
		{"the same version twice", "## [0.2.0] - 2026-12-01", "## [0.1.0] - 2026-12-01", "newest first"},
		{"a newer release dated earlier", "2026-12-01", "2026-11-01", "dated after"},
		{"a group of another name", "### Removed", "### Breaking", "not one of Keep a Changelog's groups"},
		{"a group twice", "- A thing.\n", "- A thing.\n\n### Added\n\n- Another.\n", "twice"},
		{"a deeper heading", "- Everything.\n", "- Everything.\n\n#### Details\n", "neither a release's"},
		{"a link reference missing", "[0.1.0]: https://github.com/postsedge/caddy-posts/releases/tag/v0.1.0\n", "", "link references"},
		{"Unreleased compared with an older release", "compare/v0.2.0...HEAD", "compare/v0.1.0...HEAD", "link references"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(good, tt.old) {
				t.Fatalf("the changelog holds no %q", tt.old)
			}
			_, problems := parseChangelog(strings.Replace(good, tt.old, tt.new, 1))
			if !strings.Contains(strings.Join(problems, "\n"), tt.says) {
				t.Errorf("problems %q, want one saying %q", problems, tt.says)
			}
		})
	}
}

// The build recipes' version of the module is what ./caddy build-info and list-modules --versions
// report; make test checks the binary, this the recipes.
func TestTheBuildRecipesPinTheModuleAtTheChangelogsLatestRelease(t *testing.T) {
	log, _ := parseChangelog(contractsRead(t, changelogFile))
	if len(log.releases) == 0 {
		t.Fatalf("%s names no release", changelogFile)
	}
	want := "v" + log.releases[0]
	for _, recipe := range []string{"xcaddy.json", "xcaddy.ecosystem.json"} {
		if got := recipeVersions(t, contractsRead(t, recipe)); !slices.Equal(got, []string{want, want}) {
			t.Errorf("%s pins github.com/postsedge/caddy-posts at %v (plugin, replacement), want %s, %s's latest release",
				recipe, got, want, changelogFile)
		}
	}
}

// recipeVersions are the module's version in a recipe's plugins and in its replacement's "old".
func recipeVersions(t *testing.T, recipe string) []string {
	t.Helper()
	var r struct {
		Plugins []struct {
			ModulePath string `json:"module_path"`
			Version    string `json:"version"`
		} `json:"plugins"`
		Replacements []struct {
			Old string `json:"old"`
		} `json:"replacements"`
	}
	if err := json.Unmarshal([]byte(recipe), &r); err != nil {
		t.Fatal(err)
	}
	const module = "github.com/postsedge/caddy-posts"
	var versions []string
	for _, p := range r.Plugins {
		if p.ModulePath == module {
			versions = append(versions, p.Version)
		}
	}
	for _, rp := range r.Replacements {
		if v, ok := strings.CutPrefix(rp.Old, module+"@"); ok {
			versions = append(versions, v)
		}
	}
	return versions
}

// make release runs release/release.sh; here it runs on a copy of the files it changes.
func TestTheReleaseScriptCutsAReleaseTheChecksAccept(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	setUp := func(t *testing.T, unreleased string) string {
		dir := t.TempDir()
		for _, file := range []string{openAPIFile, schemaFile, releasedOpenAPI, releasedSchema, "xcaddy.json", "xcaddy.ecosystem.json"} {
			contractsWrite(t, filepath.Join(dir, file), contractsRead(t, file))
		}
		log := contractsRead(t, changelogFile)
		// The copy's Unreleased section holds only the entry given.
		start := strings.Index(log, "## [Unreleased]\n")
		next := start + strings.Index(log[start+1:], "\n## [") + 2
		contractsWrite(t, filepath.Join(dir, changelogFile), log[:start]+"## [Unreleased]\n"+unreleased+"\n"+log[next:])
		// The contracts of the copy change since the release, as a release would have them.
		schema := strings.Replace(contractsRead(t, schemaFile), "type Post {", "type Post {\n  \"A tag.\"\n  tag: String", 1)
		contractsWrite(t, filepath.Join(dir, schemaFile), schema)
		return dir
	}
	script, err := filepath.Abs("release/release.sh")
	if err != nil {
		t.Fatal(err)
	}
	run := func(dir, version string) (string, error) {
		cmd := exec.Command(sh, script, version)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	log, _ := parseChangelog(contractsRead(t, changelogFile))
	latest := strings.Split(log.releases[0], ".")
	minor, _ := strconv.Atoi(latest[1])
	next := fmt.Sprintf("%s.%d.0", latest[0], minor+1)

	dir := setUp(t, "\n### Added\n\n- `Post.tag`.\n")
	if out, err := run(dir, next); err != nil {
		t.Fatalf("release.sh %s: %v\n%s", next, err, out)
	}
	cut, problems := parseChangelog(contractsRead(t, filepath.Join(dir, changelogFile)))
	for _, p := range problems {
		t.Error(p)
	}
	if len(cut.unreleased) != 0 || cut.releases[0] != next || !slices.Equal(cut.releases[1:], log.releases) {
		t.Errorf("after the release: Unreleased %q, releases %v", cut.unreleased, cut.releases)
	}
	if !strings.Contains(contractsRead(t, filepath.Join(dir, changelogFile)), "## ["+next+"] - "+time.Now().Format(time.DateOnly)+"\n\n### Added\n\n- `Post.tag`.\n") {
		t.Errorf("the release's section is not today's with the Unreleased entries")
	}
	for _, file := range []string{openAPIFile, schemaFile} {
		if contractsRead(t, filepath.Join(dir, file)) != contractsRead(t, filepath.Join(dir, releasedCopy(file))) {
			t.Errorf("%s is not a copy of %s", releasedCopy(file), file)
		}
	}
	for _, recipe := range []string{"xcaddy.json", "xcaddy.ecosystem.json"} {
		if got := recipeVersions(t, contractsRead(t, filepath.Join(dir, recipe))); !slices.Equal(got, []string{"v" + next, "v" + next}) {
			t.Errorf("%s pins %v, want v%s", recipe, got, next)
		}
	}

	refusals := []struct {
		name, unreleased, version string
	}{
		{"an empty Unreleased section", "", next},
		{"a version not above the latest", "\n- `Post.tag`.\n", log.releases[0]},
		{"a version that is not x.y.z", "\n- `Post.tag`.\n", "v" + next},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			dir := setUp(t, tt.unreleased)
			before := contractsRead(t, filepath.Join(dir, changelogFile))
			if out, err := run(dir, tt.version); err == nil {
				t.Errorf("release.sh %s succeeded:\n%s", tt.version, out)
			}
			if contractsRead(t, filepath.Join(dir, changelogFile)) != before {
				t.Errorf("release.sh changed %s", changelogFile)
			}
		})
	}
}

func contractsRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func contractsWrite(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
