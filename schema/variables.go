package schema

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/vektah/gqlparser/v2/ast"
)

// variables checks the values given for op's variables against their types, and coerces them as
// the spec's input coercion does (an integer ID becomes its string, a single value given for a
// list a list of one). A bad value is then a request error before anything runs, rather than
// the failure of whichever field reads it halfway through execution. Variables op declares with
// a default and that are not given are left for graphql-go to fill in; those it does not declare
// are kept, since graphql-go checks the variables of every operation of the document.
func (s *Schema) variables(op *ast.OperationDefinition, given map[string]any) (map[string]any, *gqlerrors.QueryError) {
	out := maps.Clone(given)
	if out == nil {
		out = map[string]any{}
	}
	for _, v := range op.VariableDefinitions {
		value, ok := given[v.Variable]
		if !ok {
			if v.Type.NonNull && v.DefaultValue == nil {
				return nil, badVariable(v, "$%s is required: give a value of type %s", v.Variable, v.Type)
			}
			continue
		}
		coerced, problem := s.coerce(value, v.Type, "$"+v.Variable)
		if problem != "" {
			return nil, badVariable(v, "%s", problem)
		}
		out[v.Variable] = coerced
	}
	return out, nil
}

// scalarWants say what a value of each scalar GraphQL defines is, for messages; any other
// scalar reads its own values.
var scalarWants = map[string]string{
	"Int":     "an Int (a whole number from -2147483648 to 2147483647)",
	"Float":   "a Float",
	"String":  "a String",
	"Boolean": "a Boolean",
	"ID":      "an ID (a string or a whole number)",
}

func badVariable(v *ast.VariableDefinition, format string, args ...any) *gqlerrors.QueryError {
	return &gqlerrors.QueryError{Message: fmt.Sprintf(format, args...), Locations: at(v.Position), Extensions: map[string]any{"code": errcode.BadUserInput.GraphQL}}
}

// coerce checks value, found at path, against t; problem says what is wrong, or is "".
func (s *Schema) coerce(value any, t *ast.Type, path string) (coerced any, problem string) {
	if value == nil {
		if t.NonNull {
			return nil, path + " cannot be null: give a value of type " + t.String()
		}
		return nil, ""
	}
	if t.Elem != nil {
		items, ok := value.([]any)
		if !ok {
			items = []any{value}
		}
		out := make([]any, len(items))
		for i, item := range items {
			if out[i], problem = s.coerce(item, t.Elem, path+"["+strconv.Itoa(i)+"]"); problem != "" {
				return nil, problem
			}
		}
		return out, ""
	}
	wrong := func(want string) (any, string) {
		return nil, fmt.Sprintf("%s must be %s, not %s", path, want, jsonKind(value))
	}
	switch t.NamedType {
	case "Int":
		if n, ok := value.(float64); ok && n == math.Trunc(n) && n >= math.MinInt32 && n <= math.MaxInt32 {
			return value, ""
		}
		return wrong(scalarWants["Int"])
	case "Float":
		if _, ok := value.(float64); ok {
			return value, ""
		}
		return wrong(scalarWants["Float"])
	case "String":
		if _, ok := value.(string); ok {
			return value, ""
		}
		return wrong(scalarWants["String"])
	case "Boolean":
		if _, ok := value.(bool); ok {
			return value, ""
		}
		return wrong(scalarWants["Boolean"])
	case "ID":
		switch id := value.(type) {
		case string:
			return id, ""
		case float64:
			if id == math.Trunc(id) && math.Abs(id) < 1<<53 {
				return strconv.FormatInt(int64(id), 10), ""
			}
		}
		return wrong(scalarWants["ID"])
	}
	def := s.types[t.NamedType]
	switch {
	case def == nil || def.Kind == ast.Scalar:
		return value, "" // a custom scalar reads its own values; an unknown type fails validation
	case def.Kind == ast.Enum:
		name, _ := value.(string)
		if !slices.ContainsFunc(def.EnumValues, func(v *ast.EnumValueDefinition) bool { return v.Name == name }) {
			return wrong("one of the values of " + def.Name)
		}
		return value, ""
	case def.Kind == ast.InputObject:
		object, ok := value.(map[string]any)
		if !ok {
			return wrong("a " + def.Name + " object")
		}
		for name := range object {
			if def.Fields.ForName(name) == nil {
				return nil, fmt.Sprintf("%s has no field %q: a %s has %s", path, name, def.Name, fieldNames(def))
			}
		}
		out := map[string]any{}
		for _, f := range def.Fields {
			fieldValue, given := object[f.Name]
			if !given {
				if f.Type.NonNull && f.DefaultValue == nil {
					return nil, fmt.Sprintf("%s.%s is required", path, f.Name)
				}
				continue
			}
			if out[f.Name], problem = s.coerce(fieldValue, f.Type, path+"."+f.Name); problem != "" {
				return nil, problem
			}
		}
		return out, ""
	}
	return value, "" // an output type: validation refuses the variable
}

func fieldNames(def *ast.Definition) string {
	names := make([]string, len(def.Fields))
	for i, f := range def.Fields {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// jsonKind names the JSON kind of a decoded value, for messages.
func jsonKind(value any) string {
	switch v := value.(type) {
	case string:
		return "a string"
	case float64:
		return "the number " + strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", value)
}
