//go:build !race

// The breaking changes of an OpenAPI description, as libopenapi's what-changed marks them.

package caddyposts

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi/what-changed/model"
)

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
	tests := []breakCase{
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
	checkBreakCases(t, base, tests, func(old, new string) ([]breakingChange, error) {
		return openAPIBreakingChanges([]byte(old), []byte(new))
	})
}
