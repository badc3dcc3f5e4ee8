// Plans: a query compiled once per document, which calls the resolvers directly and writes the
// response's JSON itself, rather than through graphql-go's Exec. Exec parses and validates the
// document again on every request (graphql-go has no way to run a document it parsed before),
// then resolves with reflection, a goroutine for each field that takes a context, and a buffer
// for each field's JSON, copied into its parent's.
//
// graphql-go stays the judge of what is valid: a document is planned only once its own
// validation (ValidateWithVariables, as Exec runs it) has passed, and whatever a plan does not
// cover goes through Exec as before: mutations (serial, and each a write whose cost is the
// store's), subscriptions, documents of more than one operation (graphql-go validates the
// variables of every operation of one), and introspection. A plan answers what Exec would, byte
// for byte (plan_diff_test.go holds the two to it):
//
//   - fields are flattened as graphql-go does: @skip and @include applied, fragments spread in
//     place, and the fields of one response key merged, with the arguments of the first, their
//     selections in order;
//   - arguments are read as graphql-go's packer reads them; one it would refuse sends the request
//     to Exec, before any resolver runs;
//   - a resolver's error is a null with an error at its path; a null where the schema says
//     non-null makes its parent null, up to the nearest field that may be null;
//   - strings are written as encoding/json writes them (graphql-go's json.Marshal), HTML
//     escaped.
//
// What differs is when: a plan runs the fields one after the other, so the errors of one
// response come in the order of their fields, where Exec's goroutines add them as they finish;
// and a user of whom a query asks only its posts is known by them, its profile read only when it
// has none (Resolver.userByPosts).

package schema

import (
	"cmp"
	"math"
	"strconv"

	"github.com/graph-gophers/graphql-go"
	"github.com/vektah/gqlparser/v2/ast"
)

// plan is the compiled form of one operation.
type plan struct {
	root *selection // the fields of the query's root
	// bound are the fields whose arguments read variables, which run checks before anything runs.
	bound []*field
}

// selection is what a plan asks of one object: its fields, merged by response key, in order.
type selection struct {
	fields []*field
}

// field is one member of a response object.
type field struct {
	key  string // the response key: its alias, or its name
	name string
	kind fieldKind
	// nonNull says the schema's type of the field is non-null: its null makes its object null.
	nonNull bool
	args    ast.ArgumentList // those of its first occurrence, as graphql-go takes them
	sel     *selection       // for an object, or a list of objects: the fields of each
	// authors says, of a list of posts, that their authors are selected: they are read ahead
	// in one query, as graphql-go's HasSelectedField tells the resolvers.
	authors bool
	// byPosts is, of a user whose selection is only its id and its posts, the first posts
	// field: the user is known by its posts (Resolver.userByPosts).
	byPosts *field
	typ     string // for __typename: the object's type
}

// fieldKind is a field of the schema that a plan knows how to resolve.
type fieldKind uint8

const (
	typename fieldKind = iota
	queryPost
	queryPosts
	queryPostsConnection
	queryUser
	postID
	postUserID
	postTitle
	postBody
	postCreatedAt
	postUpdatedAt
	postVersion
	postAuthor
	userID
	userName
	userEmail
	userPosts
	connectionEdges
	connectionPageInfo
	edgeCursor
	edgeNode
	pageHasNextPage
	pageEndCursor
)

// fieldType is what a plan knows of a field of the schema.
type fieldType struct {
	kind    fieldKind
	nonNull bool
	of      string // the object type it returns, itself or in a list; "" for a scalar
}

// fieldTypes are the fields of each object type of the schema (schema.graphql).
var fieldTypes = map[string]map[string]fieldType{
	"Query": {
		"post":            {queryPost, false, "Post"},
		"posts":           {queryPosts, true, "Post"},
		"postsConnection": {queryPostsConnection, true, "PostConnection"},
		"user":            {queryUser, false, "User"},
	},
	"Post": {
		"id":        {postID, true, ""},
		"userId":    {postUserID, true, ""},
		"title":     {postTitle, true, ""},
		"body":      {postBody, false, ""},
		"createdAt": {postCreatedAt, true, ""},
		"updatedAt": {postUpdatedAt, true, ""},
		"version":   {postVersion, true, ""},
		"author":    {postAuthor, false, "User"},
	},
	"User": {
		"id":    {userID, true, ""},
		"name":  {userName, false, ""},
		"email": {userEmail, false, ""},
		"posts": {userPosts, true, "Post"},
	},
	"PostConnection": {
		"edges":    {connectionEdges, true, "PostEdge"},
		"pageInfo": {connectionPageInfo, true, "PageInfo"},
	},
	"PostEdge": {
		"cursor": {edgeCursor, true, ""},
		"node":   {edgeNode, true, "Post"},
	},
	"PageInfo": {
		"hasNextPage": {pageHasNextPage, true, ""},
		"endCursor":   {pageEndCursor, false, ""},
	},
}

// planned is what is known of a document's plan once graphql-go has read it.
type planned struct {
	plan *plan // nil when the document has none (graphql-go refused it, or it introspects), or when perRequest
	// perRequest says the plan depends on the variables (an @skip or @include reads one): it
	// is compiled again for each request.
	perRequest bool
}

// planOf is the plan that runs op, or nil when graphql-go's Exec does. The first request of a
// document has graphql-go validate it with the request's variables, as Exec would; a document
// it refuses is not planned, and Exec answers with the errors.
func (s *Schema) planOf(op *Operation) *plan {
	d := op.doc
	if s.unplanned || op.Type != string(ast.Query) || len(d.tree.Operations) != 1 {
		return nil
	}
	known := d.planned.Load()
	if known == nil {
		if len(s.exec.ValidateWithVariables(d.printed, op.request.Variables)) > 0 {
			d.planned.Store(&planned{}) // Exec answers it, now and next time
			return nil
		}
		p, static := compile(d.tree, op.def, op.request.Variables)
		known = &planned{perRequest: !static}
		if static {
			known.plan = p
		}
		d.planned.Store(known)
		if !static {
			return p
		}
	}
	if known.perRequest {
		p, _ := compile(d.tree, op.def, op.request.Variables)
		return p
	}
	return known.plan
}

// compile plans op, an operation of doc that graphql-go has validated, for a request with
// vars; p is nil when op is not for a plan. static says that the plan is the same for any
// variables.
func compile(doc *ast.QueryDocument, op *ast.OperationDefinition, vars map[string]any) (p *plan, static bool) {
	c := compiler{doc: doc, op: op, vars: vars, static: true}
	root, ok := c.selection("Query", []ast.SelectionSet{op.SelectionSet}, 0)
	if !ok {
		return nil, c.static
	}
	return &plan{root: root, bound: c.bound}, c.static
}

type compiler struct {
	doc    *ast.QueryDocument
	op     *ast.OperationDefinition
	vars   map[string]any
	static bool     // no @skip or @include read a variable
	bound  []*field // the fields whose arguments read variables
}

// maxPlanDepth bounds the recursion of a compiler: deeper than graphql-go's validation lets a
// document be (max_depth), and than a fragment cycle it refuses.
const maxPlanDepth = 64

// selection flattens and merges sets, selections on an object of type typ, as graphql-go does:
// ok is false for a selection a plan cannot run as graphql-go would.
func (c *compiler) selection(typ string, sets []ast.SelectionSet, depth int) (sel *selection, ok bool) {
	if depth > maxPlanDepth {
		return nil, false
	}
	sel, ok = &selection{}, true
	var subsets map[*field][]ast.SelectionSet // each field's selections, merged
	var add func(set ast.SelectionSet, spread int)
	add = func(set ast.SelectionSet, spread int) {
		for _, s := range set {
			var skip bool
			switch s := s.(type) {
			case *ast.Field:
				if skip, ok = c.skipped(s.Directives); !ok || skip {
					break
				}
				key := cmp.Or(s.Alias, s.Name)
				f := sel.field(key)
				if f == nil {
					if f, ok = c.field(typ, key, s); !ok {
						break
					}
					sel.fields = append(sel.fields, f)
				}
				if len(s.SelectionSet) > 0 {
					if subsets == nil {
						subsets = map[*field][]ast.SelectionSet{}
					}
					subsets[f] = append(subsets[f], s.SelectionSet)
				}
			case *ast.InlineFragment:
				if skip, ok = c.skipped(s.Directives); ok && !skip {
					add(s.SelectionSet, spread)
				}
			case *ast.FragmentSpread:
				frag := c.doc.Fragments.ForName(s.Name)
				if skip, ok = c.skipped(s.Directives); ok && !skip {
					if ok = frag != nil && spread < maxPlanDepth; ok {
						add(frag.SelectionSet, spread+1)
					}
				}
			}
			if !ok {
				return
			}
		}
	}
	for _, set := range sets {
		if add(set, 0); !ok {
			return nil, false
		}
	}
	for _, f := range sel.fields {
		of := fieldTypes[typ][f.name].of
		if of == "" {
			continue
		}
		if f.sel, ok = c.selection(of, subsets[f], depth+1); !ok {
			return nil, false
		}
		switch f.kind {
		case queryPosts:
			f.authors = f.sel.has("author")
		case queryPostsConnection:
			f.authors = f.sel.has("edges", "node", "author")
		case queryUser:
			f.byPosts = f.sel.onlyPosts()
		}
	}
	return sel, true
}

// field is the field of type typ selected by s under key; false for a field a plan does not
// know (introspection), or whose literal arguments graphql-go would refuse.
func (c *compiler) field(typ, key string, s *ast.Field) (*field, bool) {
	f := &field{key: key, name: s.Name, args: s.Arguments}
	if s.Name == "__typename" {
		f.kind, f.typ = typename, typ
		return f, true
	}
	t, ok := fieldTypes[typ][s.Name]
	if !ok {
		return nil, false
	}
	f.kind, f.nonNull = t.kind, t.nonNull
	for _, a := range f.args {
		if a.Value.Kind == ast.Variable {
			c.bound = append(c.bound, f)
			break
		}
	}
	return f, bindable(f, arguments{list: f.args, op: c.op, later: true})
}

// skipped says whether directives leave their selection out, as graphql-go reads @skip and
// @include; ok is false when graphql-go would report an error instead (a variable with no
// value), which a plan leaves to it.
func (c *compiler) skipped(directives ast.DirectiveList) (skip, ok bool) {
	for _, d := range directives {
		if d.Name != "skip" && d.Name != "include" {
			continue
		}
		arg := d.Arguments.ForName("if")
		if arg == nil {
			return false, false
		}
		if arg.Value.Kind == ast.Variable {
			c.static = false
		}
		v, _ := valueOf(arg.Value, c.vars, c.op)
		b, isBool := v.(bool)
		if !isBool {
			return false, false
		}
		if b == (d.Name == "skip") {
			return true, true
		}
	}
	return false, true
}

// field is the field of s with the response key key, or nil.
func (s *selection) field(key string) *field {
	for _, f := range s.fields {
		if f.key == key {
			return f
		}
	}
	return nil
}

// onlyPosts is the first posts field of s, the selection of a user, when it selects nothing
// else but the id, and not the posts' author (the user, whose profile it would show); nil
// otherwise.
func (s *selection) onlyPosts() *field {
	var first *field
	for _, f := range s.fields {
		switch {
		case f.kind == userPosts && f.sel.has("author"):
			return nil
		case f.kind == userPosts && first == nil:
			first = f
		case f.kind != userPosts && f.kind != userID && f.kind != typename:
			return nil
		}
	}
	return first
}

// has says whether s selects a field at the path of field names, as HasSelectedField does.
func (s *selection) has(path ...string) bool {
	for _, f := range s.fields {
		if f.name == path[0] && (len(path) == 1 || f.sel != nil && f.sel.has(path[1:]...)) {
			return true
		}
	}
	return false
}

// valueOf is the value v gives, as graphql-go deserializes it: a variable's from vars, or its
// default; given is false when there is neither. A value a plan does not read (a block string,
// which graphql-go's reader may read otherwise; a list or an object, which no argument of a
// query takes) is unread{}, which no argument accepts: the document is left to graphql-go.
func valueOf(v *ast.Value, vars map[string]any, op *ast.OperationDefinition) (value any, given bool) {
	switch v.Kind {
	case ast.Variable:
		if x, ok := vars[v.Raw]; ok {
			return x, true
		}
		if def := op.VariableDefinitions.ForName(v.Raw); def != nil && def.DefaultValue != nil {
			return valueOf(def.DefaultValue, nil, op)
		}
		return nil, false
	case ast.IntValue:
		n, err := strconv.ParseInt(v.Raw, 10, 64)
		switch {
		case err != nil:
			return unread{}, true
		case n < math.MinInt32 || n > math.MaxInt32:
			return n, true
		}
		return int32(n), true
	case ast.FloatValue:
		f, err := strconv.ParseFloat(v.Raw, 64)
		if err != nil {
			return unread{}, true
		}
		return f, true
	case ast.StringValue, ast.EnumValue:
		return v.Raw, true
	case ast.BooleanValue:
		return v.Raw == "true", true
	case ast.NullValue:
		return nil, true
	}
	return unread{}, true
}

// unread is a value a plan does not read (see valueOf).
type unread struct{}

// arguments are the arguments of a field, read with a request's variables; or, later, at
// compile time: then a variable reads as fine, to be checked once the request's are known.
type arguments struct {
	list  ast.ArgumentList
	vars  map[string]any
	op    *ast.OperationDefinition
	later bool
}

// bindable says whether the arguments of f read as graphql-go's packer reads them.
func bindable(f *field, a arguments) bool {
	a.list = f.args
	ok := true
	switch f.kind {
	case queryPost, queryUser:
		_, ok = a.id("id")
	case queryPosts:
		_, ok = a.listArgs("limit")
	case queryPostsConnection:
		_, ok = a.listArgs("first")
	case userPosts:
		_, ok = a.userPostsArgs()
	}
	return ok
}

// get is the argument name's value: given is false when it is absent, and later when it is
// a variable read later.
func (a arguments) get(name string) (v any, given, later bool) {
	arg := a.list.ForName(name)
	if arg == nil {
		return nil, false, false
	}
	if a.later && arg.Value.Kind == ast.Variable {
		return nil, true, true
	}
	v, given = valueOf(arg.Value, a.vars, a.op)
	return v, given, false
}

// id reads a required ID.
func (a arguments) id(name string) (graphql.ID, bool) {
	v, _, later := a.get(name)
	if later {
		return "", true
	}
	return toID(v)
}

// optID reads an ID that may be null or absent.
func (a arguments) optID(name string) (*graphql.ID, bool) {
	v, given, later := a.get(name)
	if later || !given || v == nil {
		return nil, true
	}
	id, ok := toID(v)
	return &id, ok
}

// optInt reads an Int that may be null or absent.
func (a arguments) optInt(name string) (*int32, bool) {
	v, given, later := a.get(name)
	if later || !given || v == nil {
		return nil, true
	}
	var n int32
	switch v := v.(type) {
	case int32:
		n = v
	case float64:
		if v != float64(int32(v)) {
			return nil, false
		}
		n = int32(v)
	default:
		return nil, false
	}
	return &n, true
}

// optString reads a String that may be null or absent.
func (a arguments) optString(name string) (*string, bool) {
	v, given, later := a.get(name)
	if later || !given || v == nil {
		return nil, true
	}
	s, ok := v.(string)
	return &s, ok
}

// optTime reads a Time that may be null or absent, as TimeArg.UnmarshalGraphQL does.
func (a arguments) optTime(name string) (*TimeArg, bool) {
	s, ok := a.optString(name)
	if s == nil || !ok {
		return nil, ok
	}
	return &TimeArg{text: *s}, true
}

// listArgs reads the arguments of a list of posts, its limit under the name limit.
func (a arguments) listArgs(limit string) (listArgs, bool) {
	userID, ok1 := a.optID("userId")
	of, ok2 := a.userPostsArgs()
	n, ok3 := a.optInt(limit)
	after, ok4 := a.optString("after")
	return listArgs{UserID: userID, Search: of.Search, Since: of.Since, Until: of.Until, Order: of.Order, Limit: n, After: after}, ok1 && ok2 && ok3 && ok4
}

// userPostsArgs reads the arguments of User.posts: those of every list but userId and after.
func (a arguments) userPostsArgs() (userPostsArgs, bool) {
	search, ok1 := a.optString("search")
	since, ok2 := a.optTime("since")
	until, ok3 := a.optTime("until")
	order, ok4 := a.optString("order") // an enum, which validation has checked
	n, ok5 := a.optInt("limit")
	return userPostsArgs{Search: search, Since: since, Until: until, Order: order, Limit: n}, ok1 && ok2 && ok3 && ok4 && ok5
}

// toID is v as an ID argument, as graphql.ID reads it.
func toID(v any) (graphql.ID, bool) {
	switch v := v.(type) {
	case string:
		return graphql.ID(v), true
	case int32:
		return graphql.ID(strconv.Itoa(int(v))), true
	}
	return "", false
}
