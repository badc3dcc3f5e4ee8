// The admission pass of Prepare: one walk of the document that counts what max_aliases,
// max_root_fields and max_fields bound and refuses fragment cycles. The literal values it meets
// are checked by literals.go, in the same walk.

package schema

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/postsedge/caddy-posts/errcode"
)

// admission is the first pass of Prepare over a parsed document, before the variables, the
// cost and graphql-go's validation read it: one walk, each fragment definition walked once
// however often it is spread, so its time is linear in the document's size whatever its shape.
// It counts what max_aliases, max_root_fields and max_fields bound, refuses fragment cycles,
// and checks every literal value against the type its place takes (graphql-go answers a list
// or an object given for a scalar only once a resolver reads it, in Go's terms).
//
// The counts are those of the document expanded: a fragment counts each time it is spread, its
// count memoised on its first walk and added with saturating arithmetic, so a fan-out of
// fragments costs one walk each and no overflow. The limits on aliases and root fields bound
// what the chosen operation makes run. max_fields bounds the size of the whole document as
// graphql-go's validation walks it: every operation and every fragment, since it validates all of
// them (a shared fragment once per operation) although one runs; in fields, and in the two other
// things that multiply its work per operation, uses of variables and fragments (spreads and
// inline fragments).
type admission struct {
	types     *typeSystem
	fragments map[string]*ast.FragmentDefinition // by name, the first of each name, as graphql-go reads them
	// counts are the counts of the fragments walked; a fragment being walked is present with
	// nil, so a spread that finds nil has closed a cycle.
	counts  map[*ast.FragmentDefinition]*tally
	walking []*ast.FragmentDefinition // the fragments being walked, outermost first
	path    []valueStep               // where the value being checked is, within its place
	// maxValueDepth is how deep lists and input objects may nest in a literal: the printer
	// spells a value out once per level it nests in, so a deeper one costs the square of its
	// size to print. No input type of the schema nests deeper than max_depth allows fields to.
	maxValueDepth int
	refusal       *gqlerrors.QueryError
}

// tally is what a selection set selects, fragments expanded. Every count saturates at
// math.MaxInt.
type tally struct {
	fields  int // field selections, __typename included
	aliases int // fields whose alias differs from their name
	// roots are the fields at the top of the selection set, through fragments and inline
	// fragments, __typename excepted: it resolves nothing and writes nothing.
	roots int
	// variables are the uses of variables in arguments and directives: graphql-go checks each
	// use in a fragment once per operation that spreads the fragment.
	variables int
	// fragments are the fragment spreads and inline fragments: graphql-go walks a fragment's
	// selections again for each operation that spreads it, nested inline fragments and all.
	fragments int
}

func (t *tally) add(u tally, top bool) {
	t.fields = saturated(t.fields, u.fields)
	t.aliases = saturated(t.aliases, u.aliases)
	t.variables = saturated(t.variables, u.variables)
	t.fragments = saturated(t.fragments, u.fragments)
	if top {
		t.roots = saturated(t.roots, u.roots)
	}
}

func saturated(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

// countText writes n for a message; a count that saturated is only known to be large.
func countText(n int) string {
	if n == math.MaxInt {
		return "more than " + strconv.Itoa(math.MaxInt-1)
	}
	return strconv.Itoa(n)
}

// tallies are what the admission pass found of a document: the counts of each of its
// operations and of the whole, from which the limits refuse an operation or admit it. A cached
// document keeps it, so that a request for another of its operations is checked without a walk.
type tallies struct {
	operations map[*ast.OperationDefinition]tally
	document   tally
	unspread   int // fragments that no operation spreads
}

// admit makes the admission pass over doc and refuses it when a literal or a fragment cycle
// says so; the limits are checked on what it found, for the operation that runs, by limit.
func (s *Schema) admit(doc *ast.QueryDocument) (*tallies, *gqlerrors.QueryError) {
	types, err := typeSystemOnce()
	if err != nil {
		return nil, refused(errcode.ValidationFailed, nil, "the schema cannot be read: %v", err) // unreachable: New read it
	}
	a := &admission{
		types:         types,
		fragments:     make(map[string]*ast.FragmentDefinition, len(doc.Fragments)),
		counts:        make(map[*ast.FragmentDefinition]*tally, len(doc.Fragments)),
		maxValueDepth: s.limits.MaxDepth,
	}
	for _, f := range doc.Fragments {
		if _, seen := a.fragments[f.Name]; !seen {
			a.fragments[f.Name] = f
		}
	}
	found := &tallies{operations: make(map[*ast.OperationDefinition]tally, len(doc.Operations))}
	for _, o := range doc.Operations {
		t := a.operation(o)
		if a.refusal != nil {
			return nil, a.refusal
		}
		found.operations[o] = t
		found.document.add(t, false)
	}
	for _, f := range doc.Fragments {
		if _, walked := a.counts[f]; walked {
			continue
		}
		found.unspread++
		found.document.add(a.fragment(f, f.Position), false) // validated all the same: it counts once
		if a.refusal != nil {
			return nil, a.refusal
		}
	}
	return found, nil
}

// limit refuses op, an operation of doc, when what the admission pass found of doc passes a
// limit.
func (s *Schema) limit(doc *ast.QueryDocument, found *tallies, op *ast.OperationDefinition) *gqlerrors.QueryError {
	limits, chosen, document := s.limits, found.operations[op], found.document
	switch {
	case chosen.aliases > limits.MaxAliases:
		return refusedLimit("max_aliases", errcode.MaxAliases, at(op.Position),
			"the %s has %s aliased fields, fragments expanded, more than the limit of %d (max_aliases)", op.Operation, countText(chosen.aliases), limits.MaxAliases)
	case chosen.roots > limits.MaxRootFields:
		return refusedLimit("max_root_fields", errcode.MaxRootFields, at(op.Position),
			"the %s selects %s fields at its root, fragments expanded, more than the limit of %d (max_root_fields)%s",
			op.Operation, countText(chosen.roots), limits.MaxRootFields, map[ast.Operation]string{ast.Mutation: ": each is a write; send the rest in another request"}[op.Operation])
	case document.fields > limits.MaxFields && len(doc.Operations) == 1 && found.unspread == 0:
		return refusedLimit("max_fields", errcode.MaxFields, at(op.Position),
			"the %s selects %s fields, fragments expanded, more than the limit of %d (max_fields)", op.Operation, countText(document.fields), limits.MaxFields)
	case document.fields > limits.MaxFields:
		return refusedLimit("max_fields", errcode.MaxFields, nil,
			"the document selects %s fields in its %d operations and %d fragments, fragments expanded, more than the limit of %d (max_fields): all of a document is validated, though one operation runs, so send only the operation to run",
			countText(document.fields), len(doc.Operations), len(doc.Fragments), limits.MaxFields)
	case document.variables > limits.MaxFields:
		return refusedLimit("max_fields", errcode.MaxFields, nil,
			"the document uses variables %s times, fragments expanded, more than the limit of %d (max_fields, which bounds the uses of variables as well as fields)",
			countText(document.variables), limits.MaxFields)
	case document.fragments > limits.MaxFields:
		return refusedLimit("max_fields", errcode.MaxFields, nil,
			"the document spreads fragments and inline fragments %s times, fragments expanded, more than the limit of %d (max_fields, which bounds fragments as well as fields)",
			countText(document.fragments), limits.MaxFields)
	}
	return nil
}

// operation walks o: its variables' default values, its directives and its selections.
func (a *admission) operation(o *ast.OperationDefinition) tally {
	var t tally
	for _, v := range o.VariableDefinitions {
		t.variables = saturated(t.variables, a.directives(v.Directives))
		if v.DefaultValue != nil {
			a.value(v.DefaultValue, v.Type, place{variable: v.Variable}, 0)
		}
	}
	t.variables = saturated(t.variables, a.directives(o.Directives))
	t.add(a.selections(o.SelectionSet, operationRoots[o.Operation], true), true)
	return t
}

// selections walks set, selected on a value of the type typeName ("" when unknown); top says
// it is the top of an operation or fragment, whose fields are root fields.
func (a *admission) selections(set ast.SelectionSet, typeName string, top bool) tally {
	var t tally
	for _, sel := range set {
		if a.refusal != nil {
			break
		}
		switch sel := sel.(type) {
		case *ast.Field:
			t.fields = saturated(t.fields, 1)
			if sel.Alias != "" && sel.Alias != sel.Name {
				t.aliases = saturated(t.aliases, 1)
			}
			if top && sel.Name != "__typename" {
				t.roots = saturated(t.roots, 1)
			}
			def := a.types.field(typeName, sel.Name)
			var args ast.ArgumentDefinitionList
			if def != nil {
				args = def.Arguments
			}
			for _, arg := range sel.Arguments {
				t.variables = saturated(t.variables, a.value(arg.Value, argumentType(args, arg.Name), place{owner: typeName, field: sel.Name, argument: arg.Name}, 0))
			}
			t.variables = saturated(t.variables, a.directives(sel.Directives))
			if len(sel.SelectionSet) > 0 {
				fieldType := ""
				if def != nil {
					fieldType = def.Type.Name()
				}
				t.add(a.selections(sel.SelectionSet, fieldType, false), false)
			}
		case *ast.InlineFragment:
			t.fragments = saturated(t.fragments, 1)
			t.variables = saturated(t.variables, a.directives(sel.Directives))
			on := typeName
			if sel.TypeCondition != "" {
				on = sel.TypeCondition
			}
			t.add(a.selections(sel.SelectionSet, on, top), top)
		case *ast.FragmentSpread:
			t.fragments = saturated(t.fragments, 1)
			t.variables = saturated(t.variables, a.directives(sel.Directives))
			if def := a.fragments[sel.Name]; def != nil { // an unknown one, validation refuses
				t.add(a.fragment(def, sel.Position), top)
			}
		}
	}
	return t
}

// fragment is the tally of def, spread at pos: walked on its first spread, remembered after.
func (a *admission) fragment(def *ast.FragmentDefinition, pos *ast.Position) tally {
	if t, walked := a.counts[def]; walked {
		if t == nil {
			a.refusal = refused(errcode.ValidationFailed, at(pos), "%s", a.cycle(def))
			return tally{}
		}
		return *t
	}
	a.counts[def] = nil
	a.walking = append(a.walking, def)
	var t tally
	for _, v := range def.VariableDefinition {
		if v.DefaultValue != nil {
			a.value(v.DefaultValue, v.Type, place{variable: v.Variable}, 0)
		}
	}
	t.variables = a.directives(def.Directives)
	t.add(a.selections(def.SelectionSet, def.TypeCondition, true), true)
	a.walking = a.walking[:len(a.walking)-1]
	a.counts[def] = &t
	return t
}

// cycle says how def, being walked, spreads itself.
func (a *admission) cycle(def *ast.FragmentDefinition) string {
	var names []string
	for i := len(a.walking) - 1; i >= 0 && a.walking[i] != def; i-- {
		names = append(names, strconv.Quote(a.walking[i].Name))
	}
	if len(names) == 0 {
		return fmt.Sprintf("fragment %q spreads itself: a fragment cannot contain itself", def.Name)
	}
	for i, j := 0, len(names)-1; i < j; i, j = i+1, j-1 {
		names[i], names[j] = names[j], names[i]
	}
	return fmt.Sprintf("fragment %q spreads itself through %s: fragments cannot spread each other in a cycle", def.Name, strings.Join(names, ", "))
}

// directives checks the arguments of ds and counts their uses of variables.
func (a *admission) directives(ds ast.DirectiveList) int {
	n := 0
	for _, d := range ds {
		def := a.types.directives[d.Name]
		for _, arg := range d.Arguments {
			var t *ast.Type
			if def != nil {
				t = argumentType(def.Arguments, arg.Name)
			}
			n = saturated(n, a.value(arg.Value, t, place{directive: d.Name, argument: arg.Name}, 0))
		}
	}
	return n
}
