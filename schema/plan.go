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
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/postsedge/caddy-posts/posts"
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
		_, ok = a.optInt("limit")
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

// listArgs reads the arguments of a list of posts, its limit under the name limit.
func (a arguments) listArgs(limit string) (listArgs, bool) {
	userID, ok1 := a.optID("userId")
	n, ok2 := a.optInt(limit)
	after, ok3 := a.optString("after")
	return listArgs{UserID: userID, Limit: n, After: after}, ok1 && ok2 && ok3
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

// executePlan runs op by its plan with the budget b and says whether it did; an operation with
// no plan goes through graphql-go's Exec.
func (s *Schema) executePlan(ctx context.Context, op *Operation, b *budget) (*graphql.Response, bool) {
	p := s.planOf(op)
	if p == nil {
		return nil, false
	}
	vars := op.request.Variables
	for _, f := range p.bound {
		if !bindable(f, arguments{vars: vars, op: op.def}) {
			return nil, false
		}
	}
	x := runs.Get().(*run)
	defer x.release()
	x.ctx, x.b, x.r, x.vars, x.op = ctx, b, s.root, vars, op.def // the resolvers are given b
	x.object(p.root, nil)
	if err := ctx.Err(); err != nil { // as Exec ends a request whose context ended
		return &graphql.Response{Errors: []*gqlerrors.QueryError{gqlerrors.Errorf("%s", err)}}, true
	}
	res := &graphql.Response{Data: append([]byte(nil), x.out...), Errors: x.errs}
	return res, true
}

// run is the state of one execution of a plan; runs keeps them for the next.
type run struct {
	ctx  context.Context
	b    *budget
	r    *Resolver
	vars map[string]any
	op   *ast.OperationDefinition
	out  []byte
	errs []*gqlerrors.QueryError
	path []pathKey // of the value being written
}

// pathKey is one step of a path: a response key, or an index in a list when key is "".
type pathKey struct {
	key   string
	index int
}

var runs = sync.Pool{New: func() any { return &run{out: make([]byte, 0, 1024)} }}

func (x *run) release() {
	if cap(x.out) > 64<<10 {
		return // a large response's buffer is not kept
	}
	*x = run{out: x.out[:0], path: x.path[:0]}
	runs.Put(x)
}

// fail adds err, a resolver's, as graphql-go adds it: at the path of the value being written.
func (x *run) fail(err error) {
	e := gqlerrors.Errorf("%s", err)
	e.Path, e.ResolverError = x.pathNow(), err
	if ex, ok := err.(interface{ Extensions() map[string]any }); ok {
		e.Extensions = ex.Extensions()
	}
	x.errs = append(x.errs, e)
}

// pathNow is the path of the value being written, as graphql-go writes a path.
func (x *run) pathNow() []any {
	path := make([]any, len(x.path))
	for i, k := range x.path {
		if k.key == "" {
			path[i] = k.index
		} else {
			path[i] = k.key
		}
	}
	return path
}

// nilNonNull adds the error graphql-go adds for a field of the non-null type typ that resolved
// to nil.
func (x *run) nilNonNull(typ string) {
	e := gqlerrors.Errorf("graphql: got nil for non-null %q", typ)
	e.Path = x.pathNow()
	x.errs = append(x.errs, e)
}

// object writes the fields of sel of the object on, one of the schema's resolvers (nil for the
// query's root), and says whether it is null: a non-null field of it was.
func (x *run) object(sel *selection, on any) (null bool) {
	start := len(x.out)
	x.out = append(x.out, '{')
	for i, f := range sel.fields {
		if i > 0 {
			x.out = append(x.out, ',')
		}
		x.out = append(x.out, '"')
		x.out = append(x.out, f.key...)
		x.out = append(x.out, '"', ':')
		x.path = append(x.path, pathKey{key: f.key})
		// Every field runs, as graphql-go runs them all before it writes the object.
		if x.field(f, on) && f.nonNull {
			null = true
		}
		x.path = x.path[:len(x.path)-1]
	}
	if null {
		x.out = append(x.out[:start], "null"...)
		return true
	}
	x.out = append(x.out, '}')
	return false
}

// field writes the value of f on the object on and says whether it is null.
func (x *run) field(f *field, on any) (null bool) {
	defer x.recoverField(len(x.out), &null)
	a := arguments{list: f.args, vars: x.vars, op: x.op}
	switch f.kind {
	case typename:
		x.out = AppendJSONString(x.out, f.typ, true)
		return false
	case queryPost:
		id, _ := a.id("id")
		p, err := x.r.post(x.ctx, x.b, id)
		return x.post(f, p, err)
	case queryUser:
		id, _ := a.id("id")
		if f.byPosts == nil {
			u, err := x.r.user(x.ctx, x.b, "user", string(id))
			return x.user(f, u, err)
		}
		limit, _ := arguments{list: f.byPosts.args, vars: x.vars, op: x.op}.optInt("limit")
		u, err := x.r.userByPosts(x.ctx, x.b, string(id), x.r.postsLimit(limit))
		return x.user(f, u, err)
	case queryPosts:
		args, _ := a.listArgs("limit")
		ps, err := x.r.posts(x.ctx, x.b, args, f.authors)
		return x.posts(f, ps, err)
	case queryPostsConnection:
		args, _ := a.listArgs("first")
		c, err := x.r.postsConnection(x.ctx, x.b, args, f.authors)
		switch {
		case err != nil:
			x.fail(err)
			return x.null()
		case c == nil:
			x.nilNonNull("PostConnection")
			return x.null()
		}
		return x.object(f.sel, c)
	}
	switch on := on.(type) {
	case *Post:
		return x.postField(f, on)
	case *User:
		return x.userField(f, on, a)
	case *PostConnection:
		switch f.kind {
		case connectionEdges:
			return x.edges(f, on.Edges())
		case connectionPageInfo:
			if info := on.PageInfo(); info != nil {
				return x.object(f.sel, info)
			}
			x.nilNonNull("PageInfo")
			return x.null()
		}
	case *PostEdge:
		switch f.kind {
		case edgeCursor:
			x.out = AppendJSONString(x.out, on.Cursor(), true)
		case edgeNode:
			if node := on.Node(); node != nil {
				return x.object(f.sel, node)
			}
			x.nilNonNull("Post")
			return x.null()
		}
	case *PageInfo:
		switch f.kind {
		case pageHasNextPage:
			x.out = strconv.AppendBool(x.out, on.HasNextPage())
		case pageEndCursor:
			x.optString(on.EndCursor())
		}
	}
	return false
}

// recoverField answers a resolver's panic as graphql-go does: logged, and the field, which
// began at start, null with a server fault at its path.
func (x *run) recoverField(start int, null *bool) {
	if v := recover(); v != nil {
		x.r.LogPanic(x.ctx, v)
		e := x.r.MakePanicError(x.ctx, v)
		e.Path = x.pathNow()
		x.errs = append(x.errs, e)
		x.out = x.out[:start]
		*null = x.null()
	}
}

// null writes null and says so.
func (x *run) null() bool {
	x.out = append(x.out, "null"...)
	return true
}

func (x *run) optString(s *string) bool {
	if s == nil {
		return x.null()
	}
	x.out = AppendJSONString(x.out, *s, true)
	return false
}

// post writes the post p (nil: null) that a field resolved, or its error.
func (x *run) post(f *field, p *Post, err error) bool {
	if err != nil {
		x.fail(err)
		return x.null()
	}
	if p == nil {
		return x.null()
	}
	return x.object(f.sel, p)
}

// user writes the user u (nil: null) that a field resolved, or its error.
func (x *run) user(f *field, u *User, err error) bool {
	if err != nil {
		x.fail(err)
		return x.null()
	}
	if u == nil {
		return x.null()
	}
	return x.object(f.sel, u)
}

// posts writes a list of posts, [Post!]!, or its error.
func (x *run) posts(f *field, ps []*Post, err error) bool {
	if err != nil {
		x.fail(err)
		return x.null()
	}
	if ps == nil {
		x.nilNonNull("[Post!]")
		return x.null()
	}
	return writeList(x, f.sel, ps)
}

// edges writes the edges of a connection, [PostEdge!]!.
func (x *run) edges(f *field, edges []*PostEdge) bool {
	if edges == nil {
		x.nilNonNull("[PostEdge!]")
		return x.null()
	}
	return writeList(x, f.sel, edges)
}

// writeList writes items, a list of non-null objects each with the fields of sel, and says whether
// it is null: a null among them makes it null, once all are written, as graphql-go does.
func writeList[T any](x *run, sel *selection, items []T) (null bool) {
	start := len(x.out)
	x.out = append(x.out, '[')
	for i, item := range items {
		if i > 0 {
			x.out = append(x.out, ',')
		}
		x.path = append(x.path, pathKey{index: i})
		if x.object(sel, item) {
			null = true
		}
		x.path = x.path[:len(x.path)-1]
	}
	if null {
		x.out = append(x.out[:start], "null"...)
		return true
	}
	x.out = append(x.out, ']')
	return false
}

// postField writes the field f of the post p.
func (x *run) postField(f *field, p *Post) bool {
	switch f.kind {
	case postID:
		x.out = AppendJSONString(x.out, string(p.ID()), true)
	case postUserID:
		x.out = AppendJSONString(x.out, string(p.UserID()), true)
	case postTitle:
		x.out = AppendJSONString(x.out, p.Title(), true)
	case postBody:
		return x.optString(p.Body())
	case postCreatedAt:
		x.out = appendTime(x.out, p.CreatedAt())
	case postUpdatedAt:
		x.out = appendTime(x.out, p.UpdatedAt())
	case postVersion:
		x.out = strconv.AppendInt(x.out, int64(p.Version()), 10)
	case postAuthor:
		u, err := p.Author(x.ctx)
		return x.user(f, u, err)
	default:
		panic(fmt.Sprintf("a plan has field kind %d on a Post", f.kind))
	}
	return false
}

// userField writes the field f of the user u.
func (x *run) userField(f *field, u *User, a arguments) bool {
	switch f.kind {
	case userID:
		x.out = AppendJSONString(x.out, string(u.ID()), true)
	case userName:
		return x.optString(u.Name())
	case userEmail:
		return x.optString(u.Email())
	case userPosts:
		limit, _ := a.optInt("limit")
		ps, err := u.Posts(x.ctx, struct{ Limit *int32 }{limit})
		return x.posts(f, ps, err)
	default:
		panic(fmt.Sprintf("a plan has field kind %d on a User", f.kind))
	}
	return false
}

// appendTime appends t as Time's MarshalJSON writes it.
func appendTime(out []byte, t Time) []byte {
	out = append(out, '"')
	out = t.UTC().AppendFormat(out, posts.TimeFormat)
	return append(out, '"')
}
