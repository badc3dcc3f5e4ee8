// Prepare, the entry point of admission: what a request must pass before anything runs, in the
// order it is checked. Each check reads a document that the checks before it have bounded:
//
//  1. the document of a persisted query (persisted.go): with a hash alone, the document the
//     schema holds under it, or PERSISTED_QUERY_NOT_FOUND; with a query, the hash must be the
//     query's; with persisted_queries_only, the manifest's documents only;
//  2. the length of the query (max_query_length), then its text: UTF-8, and no escape of half
//     a surrogate pair (text.go);
//  3. the parse, and the choice of the operation to run;
//  4. the admission pass (admission.go): the counts of max_aliases, max_root_fields and
//     max_fields, fragment cycles, and every literal value against its place (literals.go),
//     in one walk linear in the document's size;
//  5. the variables, checked and coerced against their types (variables.go);
//  6. the cost (cost.go): max_cost, and introspection, which is refused when turned off and
//     bounded in aliases and nesting;
//  7. the document is printed: what graphql-go runs is what was checked.
//
// A document admitted once is kept in the schema's cache (documents.go) by the SHA-256 of its
// text: the next request that sends it skips what no request changes (the text's checks, the
// parse, the walk of the admission pass, a cost that reads no variable, the printing) and is
// checked again on the rest, in the same order, so that it is refused as it would be uncached.
//
// Execute then runs it; graphql-go's own validation (max_depth among it) comes first there, once
// for a query's document (by its plan, plan.go), each time for other operations.
// Every refusal is a request error: nothing has run, no store call was made.

package schema

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/spans"
)

// Request is one GraphQL request, as any transport receives it.
type Request struct {
	Query         string
	OperationName string
	Variables     map[string]any
	// PersistedHash is the sha256Hash of an automatic persisted query, or "": with no Query,
	// the request runs the document the schema holds under that hash; with one, it must be the
	// SHA-256 of Query.
	PersistedHash string
	// ResumeFrom is extensions.resumeFrom as sent, nil when absent: the cursor of the last event
	// a subscriber received, after which its subscription resumes (replay.go).
	ResumeFrom json.RawMessage
	// NoMutation says the transport may not run a mutation (GraphQL over HTTP's GET): Prepare
	// refuses one with errcode.MethodNotAllowed as soon as it has chosen the operation, before
	// any other check of it, so that whatever else the request holds (resumeFrom, variables
	// that would be refused) a mutation by GET is told to use POST.
	NoMutation bool
}

// Operation is a request that passed the limits, ready to execute.
type Operation struct {
	// Type is "query", "mutation" or "subscription".
	Type string
	// Name is the operation's name in the document, or "" for an anonymous one.
	Name    string
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
	// root is the root selection of the operation, which idempotency.go reads.
	root ast.SelectionSet
	// doc is the document prepared, and def the operation of it that runs: a plan's source.
	doc *document
	def *ast.OperationDefinition
	// resumeFrom is the cursor a subscription resumes after, "" for none.
	resumeFrom string
	// checked says that its resume was checked and counted before it started, by the stream
	// that runs it (ChangesOf): its replay neither refuses it as too long nor counts it.
	checked bool
	// span is the operation's span, when its request is traced (PrepareIn): what runs it knows
	// from it whether to make spans, with no lookup of the context.
	span spans.Span
	// traced is what a subscription whose request is traced keeps for its spans (PrepareIn).
	traced *Traced
}

// Prepare finds the document of req (in the cache, or parsed), picks its operation and checks
// it against the limits. A refusal is a request error: nothing has run. The first check after
// parsing is the admission pass (see admission), linear in the document's size, so that whatever
// reads the document after it (the variables, the cost, graphql-go's validation) reads one of
// bounded size.
func (s *Schema) Prepare(req Request) (*Operation, *gqlerrors.QueryError) {
	d, refusal := s.find(&req)
	if refusal != nil {
		return nil, refusal
	}
	fresh := d.tree == nil // not in the cache: it is parsed and checked whole
	if fresh {
		if refusal = s.parse(d); refusal != nil {
			return nil, refusal
		}
	}
	op, refusal := operation(d.tree, req.OperationName)
	if refusal != nil {
		return nil, refusal
	}
	if req.NoMutation && op.Operation == ast.Mutation {
		return nil, refusedAs(errcode.MethodNotAllowed, "a mutation cannot be sent with GET; use POST")
	}
	resume, refusal := resumeFrom(req.ResumeFrom, op)
	if refusal != nil {
		return nil, refusal
	}
	if fresh {
		if d.tallies, refusal = s.admit(d.tree); refusal != nil {
			return nil, refusal
		}
	}
	if refusal := s.limit(d.tree, d.tallies, op); refusal != nil {
		return nil, refusal
	}
	if req.Variables, refusal = s.variables(op, req.Variables); refusal != nil {
		return nil, refusal
	}
	cost, refusal := s.cost(d, op, req.Variables)
	if refusal != nil {
		return nil, refusal
	}
	if fresh {
		s.print(d)
		s.documents.add(d)
	}
	return &Operation{Type: string(op.Operation), Name: op.Name, request: req, personal: cost.personal, document: d.printed, shape: d.shape, root: op.SelectionSet, doc: d, def: op, resumeFrom: resume}, nil
}

// resumeFrom reads extensions.resumeFrom of a request that runs op: a string, of a
// subscription. Whether the log made the cursor is known once the subscription starts.
func resumeFrom(raw json.RawMessage, op *ast.OperationDefinition) (string, *gqlerrors.QueryError) {
	if raw == nil {
		return "", nil
	}
	var cursor string
	switch {
	case op.Operation != ast.Subscription:
		return "", refused(errcode.BadUserInput, nil, "extensions.resumeFrom resumes a subscription, and this is a %s: send it without", op.Operation)
	case json.Unmarshal(raw, &cursor) != nil || cursor == "":
		return "", refused(errcode.BadUserInput, nil, "extensions.resumeFrom must be the string of a cursor: the extensions.cursor of the last event received")
	}
	return cursor, nil
}

// parse checks the text of d, whose length find has checked, and parses it.
func (s *Schema) parse(d *document) *gqlerrors.QueryError {
	if !utf8.ValidString(d.query) {
		return refused(errcode.ParseFailed, nil, "syntax error: the query is not valid UTF-8")
	}
	if i := halfSurrogateInQuery(d.query); i >= 0 {
		return refused(errcode.ParseFailed, nil, "syntax error: the escape %s at byte %d is half of a surrogate pair, which is no character", d.query[i:i+6], i)
	}
	tree, err := parser.ParseQuery(&ast.Source{Input: d.query})
	if err != nil {
		var at []gqlerrors.Location
		if e, ok := err.(*gqlerror.Error); ok {
			for _, l := range e.Locations {
				at = append(at, gqlerrors.Location{Line: l.Line, Column: l.Column})
			}
			err = fmt.Errorf("%s", e.Message)
		}
		return refused(errcode.ParseFailed, at, "syntax error: %v", err)
	}
	d.tree, d.costs = tree, make([]atomic.Pointer[costed], len(tree.Operations))
	return nil
}

// cost checks the cost of op, an operation of d, with vars: counted once for an operation whose
// cost reads no variable, and for each request of one whose cost does.
func (s *Schema) cost(d *document, op *ast.OperationDefinition, vars map[string]any) (costed, *gqlerrors.QueryError) {
	i := slices.Index(d.tree.Operations, op)
	if known := d.costs[i].Load(); known != nil {
		return *known, nil
	}
	within, refusal, fixed := s.count(d.tree, op, vars)
	if refusal == nil && fixed {
		d.costs[i].Store(&within)
	}
	return within, refusal
}

// count counts the cost of op, an operation of doc, with vars, against max_cost; fixed says
// that it read no variable, so that every request of op gets the same answer.
func (s *Schema) count(doc *ast.QueryDocument, op *ast.OperationDefinition, vars map[string]any) (within costed, refusal *gqlerrors.QueryError, fixed bool) {
	c := &coster{schema: s, doc: doc, op: op, vars: vars, memo: map[costKey]int{}, active: map[string]bool{}}
	cost := c.selections(op.SelectionSet, operationRoots[op.Operation], 0, -1)
	switch {
	case c.refusal != nil:
		refusal = c.refusal
	case cost > s.limits.MaxCost:
		refusal = refusedLimit("max_cost", errcode.ValidationFailed, nil,
			"the operation could return more than %d values (max_cost): ask for fewer fields, smaller limit or first arguments, fewer nested lists, or fewer searches (search_cost: %d each)", s.limits.MaxCost, s.limits.SearchCost)
	}
	return costed{personal: c.personal}, refusal, !c.variables
}

// print prints the document graphql-go runs, and finds its shape for the response budget.
func (s *Schema) print(d *document) {
	var printed strings.Builder
	// No indentation: indenting each level would make the document grow with the square of its
	// depth, which is checked only later, by graphql-go.
	formatter.NewFormatter(&printed, formatter.WithoutDescription(), formatter.WithIndent("")).FormatQueryDocument(d.tree)
	d.printed, d.shape = printed.String(), shapeOf(d.tree, printed.Len())
	d.size = documentSize(d)
}

// printedGrowth is how many times longer than the client's text the document Prepare prints can
// be: a DEL in a string (one byte) prints as \u007F (six). graphql-go's own limit on a query's
// length is that many times max_query_length, so that it refuses no document Prepare admits.
const printedGrowth = 6

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

// refusedLimit is refused, for the limit that the subdirective named limit sets, which the
// metrics count.
func refusedLimit(limit string, code errcode.Code, at []gqlerrors.Location, format string, args ...any) *gqlerrors.QueryError {
	metrics.LimitRefused(limit)
	return refused(code, at, format, args...)
}

func at(p *ast.Position) []gqlerrors.Location {
	if p == nil {
		return nil
	}
	return []gqlerrors.Location{{Line: p.Line, Column: p.Column}}
}
