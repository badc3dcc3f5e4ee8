// The generated documents of the differential test (plan_diff_test.go): queries over the
// schema's object types, from a seeded source, with what a plan must answer as graphql-go does:
// aliases, one response key selected twice with selections that merge, named and inline
// fragments, nested spreads, @skip and @include, __typename, variables with and without
// defaults, given, left out and null, and arguments that make errors (limits out of range, bad
// cursors).

package schema_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/postsedge/caddy-posts/schema"
)

// generated is a generated document and the sets of variables to run it with.
type generated struct {
	query, operationName string
	variables            []map[string]any // nil: none
}

// argPools are the values an argument takes, by "Type.field.argument" or, for every field, by
// the argument's name alone.
type argPools map[string]argPool

// enumValue is a value of an enum: a name as a literal, a string as a variable's value.
type enumValue string

// argPool is the values of an argument (nil is null), and those that make its field fail.
type argPool struct{ values, failing []any }

// docGen writes documents over the object types of the schema.
type docGen struct {
	r     *rand.Rand
	types map[string]*ast.Definition // the object types of the SDL, by name
	pools argPools

	// The document being written.
	failing  bool                     // its arguments may take the values that fail
	blocks   bool                     // its strings may be block strings, which plans leave to graphql-go
	keys     map[string]*responseKeys // the response keys of each type, across the document
	vars     []genVar
	frags    []*genFrag
	aliases  int
	named    int // fragments named so far
	maxDepth int
}

// responseKeys binds each response key used on a type to the field and arguments it selects,
// in the whole document: a key met again selects the same (so the selections merge), and any
// other field or arguments take another key, so validation finds no conflict.
type responseKeys struct {
	order []string
	sig   map[string]string
}

// genVar is a variable of the operation.
type genVar struct {
	name, typ string
	def       string // the default's literal, "" for none
	pool      []any
	use       string // the pool's key
}

// genFrag is a named fragment, written with the depth it was spread at: it is spread again
// only as deep or shallower, so max_depth stays as it was meant.
type genFrag struct {
	name, typ, body string
	depth           int
}

func newDocGen(seed uint64, pools argPools) (*docGen, error) {
	doc, err := parser.ParseSchema(&ast.Source{Input: schema.SDL()})
	if err != nil {
		return nil, err
	}
	types := map[string]*ast.Definition{}
	for _, d := range doc.Definitions {
		if d.Kind == ast.Object && d.Name != "Mutation" && d.Name != "Subscription" {
			types[d.Name] = d
		}
	}
	return &docGen{r: rand.New(rand.NewPCG(seed, seed^0x5eed)), types: types, pools: pools}, nil
}

// chance is true with probability p.
func (g *docGen) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g *docGen, xs []T) T { return xs[g.r.IntN(len(xs))] }

// document writes one query document.
func (g *docGen) document() generated {
	g.keys = map[string]*responseKeys{}
	g.vars, g.frags, g.aliases, g.named = nil, nil, 0, 0
	g.maxDepth = 2 + g.r.IntN(3)
	// One document in three may fail: an error nulls its field, and the parents of a field that
	// cannot be null, so errors everywhere would leave little data to compare.
	g.failing = g.chance(0.35)
	g.blocks = g.chance(0.1)
	body := g.selectionSet("Query", 0)

	var b strings.Builder
	name := ""
	if len(g.vars) > 0 || g.chance(0.5) {
		name = fmt.Sprintf("Q%d", g.r.IntN(100))
		fmt.Fprintf(&b, "query %s", name)
		if len(g.vars) > 0 {
			b.WriteString("(")
			for i, v := range g.vars {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "$%s: %s", v.name, v.typ)
				if v.def != "" {
					b.WriteString(" = " + v.def)
				}
			}
			b.WriteString(")")
		}
		b.WriteString(" ")
	}
	b.WriteString(body)
	operationName := ""
	if name != "" && g.chance(0.1) { // another operation beside it: the request names which runs
		b.WriteString("\nquery Other { __typename posts(limit: 1) { id } }")
		operationName = name
	}
	for _, f := range g.frags {
		fmt.Fprintf(&b, "\nfragment %s on %s %s", f.name, f.typ, f.body)
	}
	return generated{query: b.String(), operationName: operationName, variables: g.variableSets()}
}

// variableSets is the variables to run the operation with: all given, then two sets where each
// is given, left out or null as its type allows.
func (g *docGen) variableSets() []map[string]any {
	if len(g.vars) == 0 {
		return []map[string]any{nil}
	}
	var sets []map[string]any
	seen := map[string]bool{}
	for i := range 3 {
		set := map[string]any{}
		for _, v := range g.vars {
			nullable := !strings.HasSuffix(v.typ, "!")
			given := nonNull(v.pool)
			switch x := g.r.IntN(3); {
			case i == 0 || x == 0 || (!nullable && v.def == ""):
				set[v.name] = pick(g, given)
			case x == 1 && nullable:
				set[v.name] = nil
			}
		}
		// As a transport reads them: the numbers of JSON are float64.
		text, _ := json.Marshal(set)
		if !seen[string(text)] {
			seen[string(text)] = true
			var decoded map[string]any
			json.Unmarshal(text, &decoded)
			sets = append(sets, decoded)
		}
	}
	return sets
}

func nonNull(pool []any) []any {
	return slices.DeleteFunc(slices.Clone(pool), func(v any) bool { return v == nil })
}

// selectionSet writes the selections of an object of type typ at depth.
func (g *docGen) selectionSet(typ string, depth int) string {
	var parts []string
	for range 1 + g.r.IntN(3) {
		switch x := g.r.IntN(20); {
		case x < 11:
			parts = append(parts, g.field(typ, depth, false))
		case x < 13:
			parts = append(parts, g.typename(typ))
		case x < 15:
			parts = append(parts, g.inlineFragment(typ, depth))
		case x < 17:
			parts = append(parts, g.spread(typ, depth))
		case x < 18:
			parts = append(parts, g.twoAliases(typ, depth)...)
		default:
			parts = append(parts, g.mergedTwice(typ, depth)...)
		}
	}
	parts = slices.DeleteFunc(parts, func(p string) bool { return p == "" })
	if len(parts) == 0 {
		parts = append(parts, "__typename")
	}
	return "{ " + strings.Join(parts, " ") + " }"
}

// typename selects __typename, under an alias at times.
func (g *docGen) typename(typ string) string {
	key := g.key(typ, "__typename", "__typename", g.chance(0.3))
	if key == "" {
		return ""
	}
	return g.keyed(key, "__typename") + g.directive()
}

func (g *docGen) keyed(key, field string) string {
	if key == field {
		return field
	}
	return key + ": " + field
}

// field selects one field of typ, past depth only a scalar one; aliased says it takes an alias.
func (g *docGen) field(typ string, depth int, aliased bool) string {
	f := g.pickField(typ, depth, false)
	if f == nil {
		return ""
	}
	declared := len(g.vars)
	args, sig := g.arguments(typ, f)
	key := g.key(typ, f.Name, sig, aliased || g.chance(0.1))
	if key == "" {
		g.vars = g.vars[:declared] // those of the arguments are not used
		return ""
	}
	return g.keyed(key, f.Name) + args + g.directive() + g.subselection(f, depth)
}

// pickField is a field of typ: a scalar one at the deepest level; with withArgs, one that
// takes arguments. Nil when there is none.
func (g *docGen) pickField(typ string, depth int, withArgs bool) *ast.FieldDefinition {
	var fields []*ast.FieldDefinition
	for _, f := range g.types[typ].Fields {
		if strings.HasPrefix(f.Name, "__") || (withArgs && len(f.Arguments) == 0) {
			continue
		}
		if _, object := g.types[f.Type.Name()]; object && depth+1 >= g.maxDepth {
			continue
		}
		fields = append(fields, f)
	}
	if len(fields) == 0 {
		return nil
	}
	return pick(g, fields)
}

func (g *docGen) subselection(f *ast.FieldDefinition, depth int) string {
	if _, object := g.types[f.Type.Name()]; !object {
		return ""
	}
	return " " + g.selectionSet(f.Type.Name(), depth+1)
}

// twoAliases selects one field with arguments twice, under two aliases, with other arguments.
func (g *docGen) twoAliases(typ string, depth int) []string {
	f := g.pickField(typ, depth, true)
	if f == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for range 2 {
		declared := len(g.vars)
		args, sig := g.arguments(typ, f)
		key := ""
		if !seen[sig] {
			key = g.key(typ, f.Name, sig, true)
		}
		if key == "" {
			g.vars = g.vars[:declared]
			continue
		}
		seen[sig] = true
		out = append(out, g.keyed(key, f.Name)+args+g.subselection(f, depth))
	}
	return out
}

// mergedTwice selects one object field twice under one response key, with two selections that
// merge into one object.
func (g *docGen) mergedTwice(typ string, depth int) []string {
	var objects []*ast.FieldDefinition
	for _, f := range g.types[typ].Fields {
		if _, object := g.types[f.Type.Name()]; object && depth+1 < g.maxDepth {
			objects = append(objects, f)
		}
	}
	if len(objects) == 0 {
		return nil
	}
	f := pick(g, objects)
	declared := len(g.vars)
	args, sig := g.arguments(typ, f)
	key := g.key(typ, f.Name, sig, g.chance(0.5))
	if key == "" {
		g.vars = g.vars[:declared]
		return nil
	}
	return []string{
		g.keyed(key, f.Name) + args + g.subselection(f, depth),
		g.keyed(key, f.Name) + args + g.directive() + g.subselection(f, depth),
	}
}

// key is the response key for field with the signature sig (its name and arguments) on typ: one
// the document uses for sig already (at times), the field's name if free, or a new alias; "" when
// the document has as many aliases as it should.
func (g *docGen) key(typ, field, sig string, alias bool) string {
	keys := g.keys[typ]
	if keys == nil {
		keys = &responseKeys{sig: map[string]string{}}
		g.keys[typ] = keys
	}
	if !alias || g.chance(0.5) {
		for _, k := range keys.order {
			if keys.sig[k] == sig && (k == field || !alias || g.chance(0.5)) {
				return k
			}
		}
	}
	if s, taken := keys.sig[field]; !alias && (!taken || s == sig) {
		if !taken {
			keys.order = append(keys.order, field)
			keys.sig[field] = sig
		}
		return field
	}
	if g.aliases >= 8 {
		return ""
	}
	g.aliases++
	k := fmt.Sprintf("%s%d", strings.TrimPrefix(field, "__")[:1], g.aliases)
	keys.order = append(keys.order, k)
	keys.sig[k] = sig
	return k
}

// arguments writes the arguments of f: each required one, and each optional one at times, as a
// literal or a variable. sig is the field with the values of its arguments, whatever their
// spelling: one response key may select "alice" and "\u0061lice", which merge.
func (g *docGen) arguments(typ string, f *ast.FieldDefinition) (args, sig string) {
	var written, values []string
	for _, a := range f.Arguments {
		if !a.Type.NonNull && g.chance(0.4) {
			continue
		}
		use := typ + "." + f.Name + "." + a.Name
		p, ok := g.pools[use]
		if !ok {
			use = a.Name
			p = g.pools[a.Name]
		}
		pool := p.values
		if g.failing {
			pool = append(slices.Clone(pool), p.failing...)
		}
		if a.Type.NonNull {
			pool = nonNull(pool)
		}
		if g.chance(0.3) {
			v := "$" + g.variable(a.Type.String(), use, pool)
			written, values = append(written, a.Name+": "+v), append(values, a.Name+": "+v)
		} else {
			v := pick(g, pool)
			value, _ := json.Marshal(v)
			written, values = append(written, a.Name+": "+g.literal(v)), append(values, a.Name+": "+string(value))
		}
	}
	if len(written) == 0 {
		return "", f.Name
	}
	return "(" + strings.Join(written, ", ") + ")", f.Name + "(" + strings.Join(values, ", ") + ")"
}

// variable is a variable of type typ for the pool use: one the operation has (at times), or a
// new one, with a default at times.
func (g *docGen) variable(typ, use string, pool []any) string {
	for _, v := range g.vars {
		if v.use == use && v.typ == typ && g.chance(0.5) {
			return v.name
		}
	}
	v := genVar{name: fmt.Sprintf("v%d", len(g.vars)), typ: typ, pool: pool, use: use}
	if !strings.HasSuffix(typ, "!") && g.chance(0.4) {
		v.def = g.literal(pick(g, nonNull(pool)))
	}
	g.vars = append(g.vars, v)
	return v.name
}

// directive is "", or @skip or @include with a literal or a variable, at times.
func (g *docGen) directive() string {
	if !g.chance(0.15) {
		return ""
	}
	name := pick(g, []string{"skip", "include"})
	if g.chance(0.5) {
		return fmt.Sprintf(" @%s(if: %t)", name, g.chance(0.5))
	}
	typ := "Boolean!"
	if g.chance(0.05) { // which graphql-go refuses in a Boolean! position, default or not
		typ = "Boolean"
	}
	return fmt.Sprintf(" @%s(if: $%s)", name, g.variable(typ, "if", []any{true, false}))
}

// inlineFragment is an inline fragment on typ, with its type condition or without, and a
// directive at times.
func (g *docGen) inlineFragment(typ string, depth int) string {
	cond := ""
	if g.chance(0.6) {
		cond = " on " + typ
	}
	return "..." + cond + g.directive() + " " + g.selectionSet(typ, depth)
}

// spread spreads a named fragment on typ: one of the document's, or a new one, whose body may
// spread others in turn (never one written after it, so there is no cycle).
func (g *docGen) spread(typ string, depth int) string {
	var fits []*genFrag
	for _, f := range g.frags {
		if f.typ == typ && f.depth >= depth {
			fits = append(fits, f)
		}
	}
	var f *genFrag
	if len(fits) > 0 && g.chance(0.6) {
		f = pick(g, fits)
	} else {
		f = &genFrag{name: fmt.Sprintf("F%d%s", g.named, typ), typ: typ, depth: depth}
		g.named++
		f.body = g.selectionSet(typ, depth)
		g.frags = append(g.frags, f)
	}
	return "..." + f.name + g.directive()
}

// literal writes v as a GraphQL literal. A string is written in one of the spellings that read
// as it: quoted with JSON's escapes, with its first letter as a \u escape, or, in a document
// that may have them, as a block string.
func (g *docGen) literal(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		switch x := g.r.IntN(6); {
		case x == 0 && v != "" && v[0] < 0x80 && v[0] >= 0x20:
			q, _ := json.Marshal(v[1:])
			return fmt.Sprintf(`"\u%04x%s`, v[0], q[1:])
		case x == 1 && g.blocks && !strings.ContainsAny(v, `"\`) && v != "":
			return `"""` + v + `"""`
		default:
			q, _ := json.Marshal(v)
			return string(q)
		}
	case enumValue:
		return string(v)
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	}
	panic(fmt.Sprintf("no literal for %T", v))
}
