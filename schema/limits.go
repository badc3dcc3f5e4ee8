package schema

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/posts"
)

// Limits bound what one operation may ask for. Prepare checks them before any resolver runs, so a
// refused operation costs no database call.
type Limits struct {
	// MaxQueryLength is the longest query document accepted, in bytes.
	MaxQueryLength int
	// MaxDepth is the deepest nesting of fields accepted, and of lists and input objects in a
	// value written in the query.
	MaxDepth int
	// MaxCost is the most values an operation may return: every object (post, user, edge, page
	// info) and every field of one counts, with every list as long as its limit or first
	// argument, or its default, lets it be.
	MaxCost int
	// DisableIntrospection refuses operations that select __schema or __type.
	DisableIntrospection bool
	// MaxFeeds is how many distinct subscription operations may run at once; subscribers of
	// the same one share it.
	MaxFeeds int
	// MaxFeedsPerClient is how many of MaxFeeds one client (a user, or an anonymous client
	// address) may take part in at once.
	MaxFeedsPerClient int
	// MaxAliases is the most aliased fields (an alias other than the field's name) the
	// operation that runs may have, fragments expanded.
	MaxAliases int
	// MaxRootFields is the most fields the operation that runs may select at its root,
	// fragments expanded, __typename aside: for a mutation, the most writes one request makes.
	MaxRootFields int
	// MaxFields is the most fields a document may select in all, fragments expanded (a fragment
	// counts each time it is spread): those of every operation, and of fragments no operation
	// spreads, since graphql-go validates all of them though one runs. The uses of variables and
	// the fragment spreads and inline fragments of the document, counted the same way, may not
	// exceed it either: graphql-go's validation repeats them for each operation too.
	MaxFields int
	// MaxResponseSize is the largest result an operation may produce, in bytes of JSON; past it
	// the operation stops and answers RESPONSE_TOO_LARGE.
	MaxResponseSize int64
}

// The default limits. The standard introspection query of graphql-js passes them.
const (
	DefaultMaxQueryLength = 16 << 10
	DefaultMaxDepth       = 15
	DefaultMaxCost        = 2000
	DefaultMaxFeeds       = 1000
	DefaultMaxAliases     = 30
	DefaultMaxRootFields  = 10
	DefaultMaxFields      = 500
	// DefaultMaxResponseSize is 8 MiB.
	DefaultMaxResponseSize = 8 << 20
	// MaxMaxCost bounds max_cost, so that the count cannot overflow.
	MaxMaxCost = 1 << 30
)

// overlapValidationLimit bounds the pairs of selections graphql-go's validation compares to
// check that the fields of one response name can merge, a number that grows with the square of
// the fields: past it, validation stops with an error. 10,000 pairs cost it about 10 ms and 3 MB;
// the 499 fields of one name that max_fields admits would make 124,251 pairs (55 ms, 25 MB) and
// 500 fragments spread side by side 374,250. graphql-js's standard introspection query makes 1,
// ten copies of __schema { types { name fields { name args { name type { name } } } } } 405.
const overlapValidationLimit = 10_000

// printedGrowth is how many times longer than the client's text the document Prepare prints can
// be: a DEL in a string (one byte) prints as \u007F (six). graphql-go's own limit on a query's
// length is that many times max_query_length, so that it refuses no document Prepare admits.
const printedGrowth = 6

// maxIntrospectionLists is how deep the lists of introspection that lead back to types may
// nest (graphql-js's MaxIntrospectionDepthRule): the standard query needs 2, and each level
// more multiplies the answer by the number of types.
const maxIntrospectionLists = 2

// introspectionLists are the introspection fields that rule counts.
var introspectionLists = map[string]bool{"fields": true, "interfaces": true, "possibleTypes": true, "inputFields": true}

// Request is one GraphQL request, as any transport receives it.
type Request struct {
	Query         string
	OperationName string
	Variables     map[string]any
}

// Operation is a request that passed the limits, ready to execute.
type Operation struct {
	// Type is "query", "mutation" or "subscription".
	Type    string
	request Request
	// personal says the answer depends on the caller: it selects User.email, which only the user
	// themselves may read. Subscribers of other operations share one feed.
	personal bool
	// document is the query printed from the syntax tree that the limits checked: graphql-go
	// runs it rather than the client's text, whose reading by graphql-go's own lexer may differ
	// (it ends a block string at \""", for one), so what runs is what was checked.
	document string
	// shape is what the response budget reads of the document (see budget).
	shape *shape
}

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

// Prepare parses req, picks its operation and checks it against the limits. A refusal is a
// request error: nothing has run. The first check after parsing is the admission pass (see
// admission), linear in the document's size, so that whatever reads the document after it (the
// variables, the cost, graphql-go's validation) reads one of bounded size.
func (s *Schema) Prepare(req Request) (*Operation, *gqlerrors.QueryError) {
	if n := s.limits.MaxQueryLength; len(req.Query) > n {
		return nil, refused(errcode.ValidationFailed, nil, "the query is %d bytes long, more than the limit of %d (max_query_length)", len(req.Query), n)
	}
	if !utf8.ValidString(req.Query) {
		return nil, refused(errcode.ParseFailed, nil, "syntax error: the query is not valid UTF-8")
	}
	if i := halfSurrogateInQuery(req.Query); i >= 0 {
		return nil, refused(errcode.ParseFailed, nil, "syntax error: the escape %s at byte %d is half of a surrogate pair, which is no character", req.Query[i:i+6], i)
	}
	doc, err := parser.ParseQuery(&ast.Source{Input: req.Query})
	if err != nil {
		var at []gqlerrors.Location
		if e, ok := err.(*gqlerror.Error); ok {
			for _, l := range e.Locations {
				at = append(at, gqlerrors.Location{Line: l.Line, Column: l.Column})
			}
			err = fmt.Errorf("%s", e.Message)
		}
		return nil, refused(errcode.ParseFailed, at, "syntax error: %v", err)
	}
	op, qerr := operation(doc, req.OperationName)
	if qerr != nil {
		return nil, qerr
	}
	if qerr := s.admit(doc, op); qerr != nil {
		return nil, qerr
	}
	if req.Variables, qerr = s.variables(op, req.Variables); qerr != nil {
		return nil, qerr
	}
	c := &coster{schema: s, doc: doc, op: op, vars: req.Variables, memo: map[costKey]int{}, active: map[string]bool{}}
	cost := c.selections(op.SelectionSet, operationRoots[op.Operation], 0, -1)
	if c.refusal != nil {
		return nil, c.refusal
	}
	if cost > s.limits.MaxCost {
		return nil, refused(errcode.ValidationFailed, nil,
			"the operation could return more than %d values (max_cost): ask for fewer fields, smaller limit or first arguments, or fewer nested lists", s.limits.MaxCost)
	}
	var document strings.Builder
	// No indentation: indenting each level would make the document grow with the square of its
	// depth, which is checked only later, by graphql-go.
	formatter.NewFormatter(&document, formatter.WithoutDescription(), formatter.WithIndent("")).FormatQueryDocument(doc)
	return &Operation{Type: string(op.Operation), request: req, personal: c.personal, document: document.String(), shape: shapeOf(doc, document.Len())}, nil
}

// operation is the operation of doc that req names, or its only one.
func operation(doc *ast.QueryDocument, name string) (*ast.OperationDefinition, *gqlerrors.QueryError) {
	switch {
	case len(doc.Operations) == 0:
		return nil, refused(errcode.ValidationFailed, nil, "the document has no operation to run")
	case name != "":
		if op := doc.Operations.ForName(name); op != nil {
			return op, nil
		}
		return nil, refused(errcode.ValidationFailed, nil, "the document has no operation named %q", name)
	case len(doc.Operations) > 1:
		return nil, refused(errcode.ValidationFailed, nil, "the document has %d operations: name the one to run in operationName", len(doc.Operations))
	}
	return doc.Operations[0], nil
}

func refused(code errcode.Code, at []gqlerrors.Location, format string, args ...any) *gqlerrors.QueryError {
	return &gqlerrors.QueryError{Message: fmt.Sprintf(format, args...), Locations: at, Extensions: map[string]any{"code": code.GraphQL}}
}

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
	return c.capped(n * (1 + c.selections(f.SelectionSet, def.Type.Name(), own, -1)))
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

func at(p *ast.Position) []gqlerrors.Location {
	if p == nil {
		return nil
	}
	return []gqlerrors.Location{{Line: p.Line, Column: p.Column}}
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
