// The checks of the literal values of a document, made by the admission pass as it meets them:
// every value written in the query, in an argument or a variable's default, against the type of
// its place, so that a wrong one is a request error in GraphQL's terms rather than a resolver's
// failure in Go's.

package schema

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/postsedge/caddy-posts/errcode"
)

// place is where a literal value is, for messages: an argument of a field or a directive, or
// the default value of a variable.
type place struct {
	owner, field string // the field's type and name
	directive    string
	argument     string
	variable     string
}

func (p place) String() string {
	switch {
	case p.variable != "":
		return "the default value of $" + p.variable
	case p.directive != "":
		return fmt.Sprintf("argument %q of @%s", p.argument, p.directive)
	case p.owner == "":
		return fmt.Sprintf("argument %q of %s", p.argument, p.field)
	}
	return fmt.Sprintf("argument %q of %s.%s", p.argument, p.owner, p.field)
}

// verb says what the place does with a value: an argument takes it, a variable's default value
// must be one.
func (p place) verb() string {
	if p.variable != "" {
		return "must be"
	}
	return "takes"
}

// valueStep is one step into a value: the member name of an object, or else the item index
// of a list.
type valueStep struct {
	member string
	item   int
}

// where names the value being checked: its place, and the path to it within.
func (a *admission) where(p place) string {
	var b strings.Builder
	for i := len(a.path) - 1; i >= 0; i-- {
		if step := a.path[i]; step.member != "" {
			fmt.Fprintf(&b, "member %q of ", step.member)
		} else {
			fmt.Fprintf(&b, "item %d of ", step.item+1)
		}
	}
	return b.String() + p.String()
}

// value checks the literal v at p against t, nil when the type of the place is unknown (an
// argument the schema does not have, which validation refuses), and counts its uses of
// variables. A refusal is left in a.refusal.
func (a *admission) value(v *ast.Value, t *ast.Type, p place, depth int) int {
	if a.refusal != nil {
		return 0
	}
	if v.Kind == ast.Variable {
		return 1 // graphql-go checks its type against the place's
	}
	for t != nil && t.Elem != nil && v.Kind != ast.ListValue && v.Kind != ast.NullValue {
		t = t.Elem // a single value given for a list is a list of one
	}
	var def *ast.Definition
	if t != nil {
		def = a.types.types[t.NamedType]
	}
	switch v.Kind {
	case ast.ListValue, ast.ObjectValue:
		if depth >= a.maxValueDepth {
			a.refusal = refused(errcode.ValidationFailed, at(v.Position), "%s nests lists and objects more than %d deep (max_depth)", p, a.maxValueDepth)
			return 0
		}
		if def != nil && v.Kind == ast.ListValue && t.Elem == nil || def != nil && v.Kind == ast.ObjectValue && def.Kind != ast.InputObject {
			a.wrongKind(v, def, p)
			return 0
		}
		n := 0
		for i, child := range v.Children {
			var childType *ast.Type
			step := valueStep{item: i}
			if v.Kind == ast.ObjectValue {
				step = valueStep{member: child.Name}
				if def != nil {
					childType = memberType(def.Fields, child.Name) // an unknown member, validation refuses
				}
			} else if t != nil {
				childType = t.Elem
			}
			a.path = append(a.path, step)
			n = saturated(n, a.value(child.Value, childType, p, depth+1))
			if a.refusal != nil {
				return 0
			}
			a.path = a.path[:len(a.path)-1]
		}
		return n
	case ast.IntValue:
		if _, err := strconv.ParseInt(v.Raw, 10, 32); err == nil {
			break
		}
		switch {
		case def == nil || def.Kind == ast.Scalar && scalarWants[def.Name] == "":
			a.refusal = refused(errcode.ValidationFailed, at(v.Position), "%s: the number %s is out of range: a whole number in a query is an Int, from -2147483648 to 2147483647", a.where(p), v.Raw)
		case def.Name == "Int":
			a.wrongKind(v, def, p)
		case def.Name == "ID":
			a.refusal = refused(errcode.ValidationFailed, at(v.Position), "%s %s an ID (a string, or a whole number from -2147483648 to 2147483647), not %s", a.where(p), p.verb(), literalKind(v))
		}
		if a.refusal != nil {
			return 0
		}
	}
	if def != nil && !literalFits(v, def) {
		a.wrongKind(v, def, p)
	}
	return 0
}

func (a *admission) wrongKind(v *ast.Value, def *ast.Definition, p place) {
	a.refusal = refused(errcode.ValidationFailed, at(v.Position), "%s %s %s, not %s", a.where(p), p.verb(), literalWant(def), literalKind(v))
}

// literalFits says whether a literal of v's kind can be a value of the type def, a list or
// an object aside. Null fits anywhere here: graphql-go refuses it for a non-null type, in
// GraphQL's terms.
func literalFits(v *ast.Value, def *ast.Definition) bool {
	if v.Kind == ast.NullValue {
		return true
	}
	switch def.Kind {
	case ast.Enum:
		return v.Kind == ast.EnumValue && def.EnumValues.ForName(v.Raw) != nil
	case ast.InputObject:
		return v.Kind == ast.ObjectValue
	case ast.Scalar:
		switch def.Name {
		case "Int":
			return v.Kind == ast.IntValue
		case "Float":
			return v.Kind == ast.IntValue || v.Kind == ast.FloatValue
		case "String":
			return v.Kind == ast.StringValue || v.Kind == ast.BlockValue
		case "Boolean":
			return v.Kind == ast.BooleanValue
		case "ID":
			return v.Kind == ast.StringValue || v.Kind == ast.BlockValue || v.Kind == ast.IntValue
		}
		// A custom scalar reads its own literals, but not lists or objects: the schema's one,
		// Time, is a string.
		return v.Kind != ast.ListValue && v.Kind != ast.ObjectValue
	}
	return true // an output type: validation refuses the argument
}

// literalWant says what a literal of the type def is, as variables says it of a variable.
func literalWant(def *ast.Definition) string {
	if want := scalarWants[def.Name]; want != "" && def.Kind == ast.Scalar {
		return want
	}
	switch def.Kind {
	case ast.Enum:
		return "one of the values of " + def.Name
	case ast.InputObject:
		return "a " + def.Name + " object"
	}
	return "a " + def.Name
}

// literalKind names what a literal is, for messages.
func literalKind(v *ast.Value) string {
	switch v.Kind {
	case ast.IntValue, ast.FloatValue:
		return "the number " + v.Raw
	case ast.StringValue, ast.BlockValue:
		return "a string"
	case ast.BooleanValue:
		return "the boolean " + v.Raw
	case ast.EnumValue:
		return "the enum value " + v.Raw
	case ast.ListValue:
		return "a list"
	case ast.ObjectValue:
		return "an object"
	}
	return "null"
}
