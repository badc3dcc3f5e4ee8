// The cost of an operation, the last check of Prepare: how many values it can return at most,
// which max_cost bounds, and the limits of introspection, whose answers the cost does not count.

package schema

import (
	"strconv"
	"strings"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/posts"
)

// MaxMaxCost bounds max_cost, so that the count cannot overflow.
const MaxMaxCost = 1 << 30

// maxIntrospectionLists is how deep the lists of introspection that lead back to types may
// nest (graphql-js's MaxIntrospectionDepthRule): the standard query needs 2, and each level
// more multiplies the answer by the number of types.
const maxIntrospectionLists = 2

// introspectionLists are the introspection fields that rule counts.
var introspectionLists = map[string]bool{"fields": true, "interfaces": true, "possibleTypes": true, "inputFields": true}

// coster counts the values an operation can return, the upper bound that MaxCost limits.
type coster struct {
	schema   *Schema
	doc      *ast.QueryDocument
	op       *ast.OperationDefinition
	vars     map[string]any
	memo     map[costKey]int // fragments already counted: shared fragments cost no walk twice
	active   map[string]bool // fragments being walked: a cycle (refused by validation) stops here
	refusal  *gqlerrors.QueryError
	personal bool // User.email is selected
	// variables says the cost read a variable (a limit or first given as $n): it is then the
	// cost of this request's variables only, and is counted again for the next request.
	variables bool
}

type costKey struct {
	fragment string
	size     int
	lists    int
}

// selections is the cost of set, on an object of typeName. size is the length its lists take
// when they have no argument of their own (the first of a connection, for its edges); lists
// is how deep introspection lists nest here, or -1 outside introspection.
func (c *coster) selections(set ast.SelectionSet, typeName string, size, lists int) int {
	total := 0
	for _, sel := range set {
		if total > c.schema.limits.MaxCost || c.refusal != nil {
			break
		}
		switch sel := sel.(type) {
		case *ast.Field:
			total += c.field(sel, typeName, size, lists)
		case *ast.InlineFragment:
			on := typeName
			if sel.TypeCondition != "" {
				on = sel.TypeCondition
			}
			total += c.selections(sel.SelectionSet, on, size, lists)
		case *ast.FragmentSpread:
			def := c.doc.Fragments.ForName(sel.Name)
			if def == nil || c.active[sel.Name] {
				continue // validation refuses both
			}
			key := costKey{sel.Name, size, lists}
			cost, ok := c.memo[key]
			if !ok {
				c.active[sel.Name] = true
				cost = c.selections(def.SelectionSet, def.TypeCondition, size, lists)
				c.active[sel.Name] = false
				c.memo[key] = cost
			}
			total += cost
		}
	}
	return c.capped(total)
}

func (c *coster) field(f *ast.Field, typeName string, size, lists int) int {
	if lists >= 0 || f.Name == "__schema" || f.Name == "__type" {
		c.introspection(f, lists)
		return 0 // bounded by the schema's size and the nesting rule, not by data
	}
	def := c.schema.field(typeName, f.Name)
	if def == nil {
		return 1 // __typename, or a field validation refuses
	}
	if typeName == "User" && f.Name == "email" {
		c.personal = true
	}
	if !c.schema.isObject(def.Type.Name()) {
		return 1 // a scalar: one value (the schema has no lists of scalars)
	}
	own, hasOwn := c.size(f, typeName)
	searches := 0
	if _, pages := c.schema.defaultSizes[typeName+"."+f.Name]; pages && c.searches(f) {
		searches = c.schema.limits.SearchCost
	}
	n := 1
	if def.Type.Elem != nil { // a list
		switch {
		case hasOwn:
			n = own
		case size > 0:
			n = size
		default:
			n = c.schema.maxLimit
		}
		n = c.capped(n) // a list longer than the limit is over it already
		own = 0         // the list's own argument is spent on it
	}
	return c.capped(searches + n*(1+c.selections(f.SelectionSet, def.Type.Name(), own, -1)))
}

// searches says whether f, a list of posts, has a search: a search argument that is not null,
// written in the query or given as a variable (or its default).
func (c *coster) searches(f *ast.Field) bool {
	arg := f.Arguments.ForName("search")
	if arg == nil {
		return false
	}
	v := arg.Value
	if v.Kind == ast.Variable {
		c.variables = true
		if value, given := c.vars[v.Raw]; given {
			return value != nil
		}
		def := c.op.VariableDefinitions.ForName(v.Raw)
		if def == nil || def.DefaultValue == nil {
			return false
		}
		v = def.DefaultValue
	}
	return v.Kind != ast.NullValue
}

// capped keeps a cost that is already over the limit from growing further: with MaxCost at most
// MaxMaxCost, a product of two capped costs cannot overflow.
func (c *coster) capped(cost int) int { return min(cost, c.schema.limits.MaxCost+1) }

// introspection refuses __schema and __type when introspection is off, aliases within them, and
// lists of types nested deeper than maxIntrospectionLists. Without aliases each field answers
// once per object, so the answer is bounded by the schema's size and that nesting, and the cost
// need not count it; with them, a few kilobytes of query could ask for the schema thousands of
// times over.
func (c *coster) introspection(f *ast.Field, lists int) {
	switch {
	case c.schema.limits.DisableIntrospection:
		c.refusal = refused(errcode.ValidationFailed, at(f.Position), "introspection is turned off on this server")
		return
	case f.Alias != f.Name:
		c.refusal = refused(errcode.ValidationFailed, at(f.Position), "introspection takes no aliases (%s: %s)", f.Alias, f.Name)
		return
	}
	if lists < 0 {
		lists = 0
	}
	if introspectionLists[f.Name] {
		lists++
		if lists > maxIntrospectionLists {
			c.refusal = refused(errcode.ValidationFailed, at(f.Position), "introspection lists (fields, interfaces, possibleTypes, inputFields) nest more than %d deep", maxIntrospectionLists)
			return
		}
	}
	c.selections(f.SelectionSet, "", 0, lists)
}

// size is the length that the limit or first argument of f gives it, or the default of
// Type.field when it names none, within 1..max_limit as posts.Service keeps it. A value it
// cannot read (a variable not given) counts as max_limit.
func (c *coster) size(f *ast.Field, typeName string) (int, bool) {
	arg := f.Arguments.ForName("limit")
	if arg == nil {
		arg = f.Arguments.ForName("first")
	}
	if arg == nil {
		n, ok := c.schema.defaultSizes[typeName+"."+f.Name]
		return n, ok
	}
	n, ok := c.intValue(arg.Value)
	if !ok {
		return c.schema.maxLimit, true
	}
	return max(1, min(n, c.schema.maxLimit)), true
}

func (c *coster) intValue(v *ast.Value) (int, bool) {
	if v.Kind == ast.Variable {
		c.variables = true
		if value, given := c.vars[v.Raw]; given {
			switch n := value.(type) {
			case float64: // as JSON decodes it, and variables has checked it is an Int
				return int(n), true
			}
			return 0, false
		}
		def := c.op.VariableDefinitions.ForName(v.Raw)
		if def == nil || def.DefaultValue == nil {
			return 0, false
		}
		v = def.DefaultValue
	}
	if v.Kind != ast.IntValue {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v.Raw), 10, 32)
	return int(n), err == nil
}

// defaultSizes are the lengths of the lists (and connections) of the schema when the query
// names no limit: what posts.Service and the resolvers use.
func defaultSizes(maxLimit int) map[string]int {
	return map[string]int{
		"Query.posts":           min(posts.DefaultLimit, maxLimit),
		"Query.postsConnection": min(posts.DefaultLimit, maxLimit),
		"User.posts":            min(UserPostsLimit, maxLimit),
	}
}
