// Prepare, the entry point of admission: what a request must pass before anything runs, in the
// order it is checked. Each check reads a document that the checks before it have bounded:
//
//  1. the length of the query (max_query_length), then its text: UTF-8, and no escape of half
//     a surrogate pair (text.go);
//  2. the parse, and the choice of the operation to run;
//  3. the admission pass (admission.go): the counts of max_aliases, max_root_fields and
//     max_fields, fragment cycles, and every literal value against its place (literals.go),
//     in one walk linear in the document's size;
//  4. the variables, checked and coerced against their types (variables.go);
//  5. the cost (cost.go): max_cost, and introspection, which is refused when turned off and
//     bounded in aliases and nesting;
//  6. the document is printed: what graphql-go runs is what was checked.
//
// Execute then runs it; graphql-go's own validation (max_depth among it) comes first there.
// Every refusal is a request error: nothing has run, no store call was made.

package schema

import (
	"fmt"
	"strings"
	"unicode/utf8"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/postsedge/caddy-posts/errcode"
)

// Request is one GraphQL request, as any transport receives it.
type Request struct {
	Query         string
	OperationName string
	Variables     map[string]any
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
}

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
	return &Operation{Type: string(op.Operation), Name: op.Name, request: req, personal: c.personal, document: document.String(), shape: shapeOf(doc, document.Len())}, nil
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

func at(p *ast.Position) []gqlerrors.Location {
	if p == nil {
		return nil
	}
	return []gqlerrors.Location{{Line: p.Line, Column: p.Column}}
}
