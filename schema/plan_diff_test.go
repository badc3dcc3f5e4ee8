// The differential test of plans (plan.go): every GraphQL document of the repository's tests,
// interop suites and documentation (plan_diff_corpus_test.go), and generated ones
// (plan_diff_gen_test.go), gets the same bytes from a schema that runs plans as from one that
// runs everything through graphql-go's Exec, on one store, for each caller.

package schema_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/graph-gophers/graphql-go"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/internal/race"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store"
)

// generatedDocuments is how many documents the generator writes; generatorSeed makes them the
// same on every run.
const (
	generatedDocuments = 400
	generatorSeed      = 27
)

// diffMaxLimit is the service's max_limit: small, so that lists are cut and a limit past it is
// easy to ask for.
const diffMaxLimit = 5

// diffCaller is a caller the responses are compared for: email is visible to its user only.
type diffCaller struct {
	name   string
	caller posts.Caller
}

var diffCallers = []diffCaller{{"anonymous", posts.Caller{}}, {"alice", alice}, {"bob", bob}}

// diffSite is a schema that runs plans and one that does not, with the same limits, over one
// service.
type diffSite struct {
	name               string
	planned, unplanned *schema.Schema
	// defaults says the limits are the defaults: every query there that graphql-go validates
	// and that reads no introspection must be planned.
	defaults bool
}

// diffData is what the store holds, for the arguments of the documents.
type diffData struct {
	postIDs []string // one post of each kind
	cursors []string // the cursors of some of them
}

func TestPlansAnswerAsGraphQLGoDoes(t *testing.T) {
	t.Parallel() // beside the other long tests of the package, after the ones that measure memory
	sites, data := newDiffSites(t)
	defaults, tiny, shallow := sites[0], sites[1], sites[2]

	root, err := repositoryRoot()
	if err != nil {
		t.Fatalf("the repository's root: %v", err)
	}
	corpus, err := repositoryDocuments(root)
	if err != nil {
		t.Fatalf("reading the repository's documents: %v", err)
	}
	// The race detector makes graphql-go's goroutines about ten times slower. With it, the
	// documents run on the default limits only, and one generated document in eight: the plan's
	// concurrency is what it checks there. make test runs them all without it too.
	everySite := !race.Enabled
	for _, source := range []struct{ name, source string }{
		{"the documents of the Go tests answer alike", "go"},
		{"the documents of the interop suites answer alike", "interop"},
		{"the documents of the documentation answer alike", "docs"},
	} {
		t.Run(source.name, func(t *testing.T) {
			var c diffCounts
			for i, d := range corpus {
				if d.source != source.source {
					continue
				}
				kind := ""
				for j, vars := range variableSets(d, data) {
					req := schema.Request{Query: d.query, OperationName: d.operationName, Variables: vars}
					kind = cmp.Or(kind, compareOn(t, defaults, req, d.file, callersFor(d.query, i), &c))
					if j == 0 && everySite {
						kind = cmp.Or(kind, compareOn(t, tiny, req, d.file, oneCaller(i), &c))
					}
				}
				c.document(kind)
			}
			c.log(t)
			if c.documents == 0 {
				t.Errorf("no document found in the %s sources", source.source)
			}
		})
	}

	t.Run("generated documents answer alike", func(t *testing.T) {
		g, err := newDocGen(generatorSeed, argPoolsOf(data))
		if err != nil {
			t.Fatal(err)
		}
		var c diffCounts
		for i := range generatedDocuments {
			d := g.document()
			if !everySite && i%8 != 0 {
				continue
			}
			kind := ""
			for j, vars := range d.variables {
				req := schema.Request{Query: d.query, OperationName: d.operationName, Variables: vars}
				kind = cmp.Or(kind, compareOn(t, defaults, req, "generated", callersFor(d.query, i), &c))
				if j == 0 && everySite {
					kind = cmp.Or(kind, compareOn(t, tiny, req, "generated", oneCaller(i), &c))
					kind = cmp.Or(kind, compareOn(t, shallow, req, "generated", oneCaller(i), &c))
				}
			}
			c.document(kind)
		}
		c.log(t)
		if c.queries < c.documents*9/10 {
			t.Errorf("only %d of %d generated documents were admitted as queries", c.queries, c.documents)
		}
	})
}

// newDiffSites builds the sites of the test over one service on a fresh store and writes the
// posts and users the documents read: posts with bodies and without, updated and not, titles and
// bodies with text that JSON escapes (written straight into the store when the service would
// refuse it, as rows from before its checks could be), users with a saved profile (alice with a
// name and email, bob with neither, dave with no posts) and one with posts but no profile
// (carol). The sites: the default limits; a max_response_size most lists do not fit in; a
// max_depth of 3, which graphql-go's validation checks.
func newDiffSites(t *testing.T) ([]diffSite, diffData) {
	t.Helper()
	st := newStore(t)
	svc := posts.NewService(posts.Config{Store: st, Timeout: 5 * time.Second, MaxLimit: diffMaxLimit, Logger: zap.NewNop()})
	site := func(name string, limits schema.Limits, defaults bool) diffSite {
		planned, err := schema.New(svc, zap.NewNop(), limits)
		if err != nil {
			t.Fatal(err)
		}
		unplanned, err := schema.New(svc, zap.NewNop(), limits)
		if err != nil {
			t.Fatal(err)
		}
		return diffSite{name: name, planned: planned, unplanned: schema.Unplanned(unplanned), defaults: defaults}
	}
	sites := []diffSite{
		site("the default limits", schema.DefaultLimits, true),
		site("a max_response_size of 400 bytes", limitsWith(func(l *schema.Limits) { l.MaxResponseSize = 400 }), false),
		site("a max_depth of 3", limitsWith(func(l *schema.Limits) { l.MaxDepth = 3 }), false),
	}

	ctx := t.Context()
	str := func(s string) *string { return &s }
	dave := posts.Caller{UserID: "dave", Method: auth.MethodJWT, Name: "Dave <dave@example.com> & \"co\""}
	carol := posts.Caller{UserID: "carol"} // never writes through the service: no profile
	// Oldest first; the newest five, which a list without arguments shows, hold alice's text
	// with escapes and carol's rows.
	var written []posts.Post
	for _, w := range []struct {
		caller      posts.Caller
		title       string
		body        *string
		update, del bool
	}{
		{bob, "bob's first", str("from bob"), false, false},
		{bob, "bob's second", nil, false, false},
		{dave, "dave's only, deleted", nil, false, true},
		{alice, "no body", nil, true, false},
		// Text the service refuses, written straight into the store: controls, C1 controls, a
		// line break in a title, bytes that are not UTF-8 (json.Marshal writes U+FFFD for
		// them), NUL.
		{carol, "controls \x01\x1f\x7f and C1 \u0085\u009f", str("nul \x00 and bell \a and escape \x1b[31m"), false, false},
		{carol, "a line\nbreak and U+2028 \u2028 in a title", nil, false, false},
		{carol, "not UTF-8: \xff\xfe end", str("half \xc3 a character"), false, false},
		{alice, "an empty body", str(""), false, false},
		{alice, "Ünïcødé 日本語 🙂👩‍💻 é", str("line\u2028separator\u2029paragraph\r\nand \U0001F600"), false, false},
		{alice, `Quotes "double", a back\slash, <b>tags</b> & ampersands`, str("<script>alert('x')</script>\n\"quoted\"\t\\n"), false, false},
	} {
		if w.caller.UserID == carol.UserID {
			created := time.Now().UTC().Truncate(time.Millisecond)
			raw := store.Post{ID: store.NewID(created), UserID: carol.UserID, Title: w.title, Body: w.body, CreatedAt: created, UpdatedAt: created, Version: 1}
			if _, err := st.InsertPost(ctx, raw); err != nil {
				t.Fatalf("inserting %q: %v", w.title, err)
			}
			p, err := svc.Get(ctx, raw.ID)
			if err != nil {
				t.Fatal(err)
			}
			written = append(written, p)
			continue
		}
		p, err := svc.Create(ctx, w.caller, posts.NewPost{Title: w.title, Body: w.body})
		if err != nil {
			t.Fatalf("creating %q: %v", w.title, err)
		}
		if w.update {
			if p, err = svc.Update(ctx, w.caller, p.ID, posts.Changes{Title: posts.Change{Set: true, Value: str("updated: " + p.Title)}, Body: posts.Change{Set: true, Value: str("now with a body")}}, posts.Expect{}); err != nil {
				t.Fatalf("updating %q: %v", w.title, err)
			}
		}
		if w.del {
			if err := svc.Delete(ctx, w.caller, p.ID, posts.Expect{}); err != nil {
				t.Fatalf("deleting %q: %v", w.title, err)
			}
			continue
		}
		written = append(written, p)
	}
	var data diffData
	slices.Reverse(written) // newest first: the first ids and cursors are alice's
	for i, p := range written {
		data.postIDs = append(data.postIDs, p.ID)
		if i%2 == 0 {
			data.cursors = append(data.cursors, posts.Cursor(p))
		}
	}
	return sites, data
}

// argPoolsOf is the values the generator gives arguments: posts that exist and one that does
// not, users of every kind, limits in range and out of it, cursors good and bad, and null.
func argPoolsOf(data diffData) argPools {
	pool := func(xs ...any) []any { return xs }
	var ids, cursors []any
	for _, id := range data.postIDs {
		ids = append(ids, id)
	}
	for _, c := range data.cursors {
		cursors = append(cursors, c)
	}
	users := pool("alice", "bob", "carol", "dave", "nobody")
	limits := argPool{pool(1, 2, 3, 5, nil), pool(0, 6, -1)}
	return argPools{
		"Query.post.id": {ids, pool("000000000000000000000000", "not an id")},
		"Query.user.id": {users, nil},
		"userId":        {append(users, nil), nil},
		"limit":         limits,
		"first":         limits,
		"after":         {append(cursors, nil), pool("", "not a cursor")},
		"search":        {pool("post", "Alice's", "PO", "nothing here", nil), pool("", "!!", strings.Repeat("word ", 9))},
		"since":         {pool("2020-01-01T00:00:00Z", time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano), nil), pool("yesterday")},
		"until":         {pool("2999-01-01T00:00:00.5+01:00", nil), pool("2000-01-01T00:00:00Z", "soon")},
		"order":         {pool(enumValue(schema.NewestFirst), enumValue(schema.OldestFirst), nil), nil},
	}
}

// callersFor is the callers a document is run as: all when it reads an email (only its user
// sees it), else one, in turn.
func callersFor(query string, i int) []diffCaller {
	if strings.Contains(query, "email") {
		return diffCallers
	}
	return oneCaller(i)
}

// oneCaller is the caller of the ith document that runs as one: each in turn.
func oneCaller(i int) []diffCaller { return diffCallers[i%len(diffCallers):][:1] }

// variableSets is the variables a document found in the repository runs with: those its source
// gave; and, when its operation declares variables, each one filled (filledVariables), and only
// those without a default filled.
func variableSets(d corpusDoc, data diffData) []map[string]any {
	sets := []map[string]any{d.variables}
	doc, err := parser.ParseQuery(&ast.Source{Input: d.query})
	if err != nil {
		return sets
	}
	op := doc.Operations.ForName(d.operationName)
	if op == nil && len(doc.Operations) == 1 {
		op = doc.Operations[0]
	}
	if op == nil || len(op.VariableDefinitions) == 0 {
		return sets
	}
	for _, all := range []bool{true, false} {
		filled := filledVariables(doc, op, data, all)
		if len(filled) > 0 && !jsonEqual(filled, d.variables) {
			sets = append(sets, filled)
		}
	}
	return sets
}

// filledVariables gives the variables of op values by where they are used: a post's id for a
// post's, alice for a user's, 2 for a limit, a good cursor for after, an input with a title;
// otherwise a value of their type. With all false, only those that have no default.
func filledVariables(doc *ast.QueryDocument, op *ast.OperationDefinition, data diffData, all bool) map[string]any {
	uses := map[string]string{} // variable → field.argument where it is used
	var walkValue func(field, arg string, v *ast.Value)
	walkValue = func(field, arg string, v *ast.Value) {
		switch v.Kind {
		case ast.Variable:
			uses[v.Raw] = field + "." + arg
		case ast.ObjectValue:
			for _, c := range v.Children {
				walkValue(arg, c.Name, c.Value)
			}
		case ast.ListValue:
			for _, c := range v.Children {
				walkValue(field, arg, c.Value)
			}
		}
	}
	eachField(doc, op.SelectionSet, func(f *ast.Field) {
		for _, a := range f.Arguments {
			walkValue(f.Name, a.Name, a.Value)
		}
	})

	vars := map[string]any{}
	for _, v := range op.VariableDefinitions {
		if !all && v.DefaultValue != nil {
			continue
		}
		var value any
		switch use := uses[v.Variable]; {
		case use == "post.id" || strings.HasSuffix(use, "Post.id") || use == "postUpdated.id":
			value = data.postIDs[0]
		case strings.HasSuffix(use, ".userId") || use == "user.id":
			value = "alice"
		case strings.HasSuffix(use, ".limit") || strings.HasSuffix(use, ".first"):
			value = 2
		case strings.HasSuffix(use, ".after"):
			value = data.cursors[0]
		case strings.HasSuffix(use, ".expectedVersion"):
			value = 1
		default:
			value = valueOfType(v.Type)
		}
		vars[v.Variable] = value
	}
	// As a transport reads them: the numbers of JSON are float64.
	text, _ := json.Marshal(vars)
	var decoded map[string]any
	json.Unmarshal(text, &decoded)
	return decoded
}

// valueOfType is a value of a variable's type.
func valueOfType(t *ast.Type) any {
	if t.Elem != nil {
		return []any{valueOfType(t.Elem)}
	}
	switch t.NamedType {
	case "ID":
		return "alice"
	case "Int":
		return 1
	case "Float":
		return 1.5
	case "Boolean":
		return true
	case "PostInput", "PostPatch":
		return map[string]any{"title": "filled"}
	}
	return "filled"
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// diffCounts tallies a subtest's documents and runs, for its log line.
type diffCounts struct {
	documents, refused                   int      // documents; those Prepare refused every time
	queries, mutations, subscriptions    int      // documents admitted, by their operation's type
	runs, planned, invalid, introspected int      // query runs compared, and of what kind
	byDesign                             int      // runs that plans leave to graphql-go by design
	withErrors, tooLarge                 int      // runs whose response has errors; RESPONSE_TOO_LARGE
	differences, notPlanned              int      // failures: shown up to maxDifferencesShown each
	reordered                            []string // graphql-go itself answered in two orders
}

// document counts a document whose operation, when Prepare admitted it, is of type kind.
func (c *diffCounts) document(kind string) {
	c.documents++
	switch kind {
	case "":
		c.refused++
	case "query":
		c.queries++
	case "mutation":
		c.mutations++
	case "subscription":
		c.subscriptions++
	}
}

func (c *diffCounts) log(t *testing.T) {
	t.Logf("%d documents: %d queries, %d mutations and %d subscriptions admitted, %d refused by Prepare; "+
		"%d runs of queries compared (%d planned; %d invalid for graphql-go, %d with introspection, %d left to graphql-go by design; "+
		"%d with errors, %d of them RESPONSE_TOO_LARGE); %d differences",
		c.documents, c.queries, c.mutations, c.subscriptions, c.refused, c.runs, c.planned, c.invalid, c.introspected, c.byDesign,
		c.withErrors, c.tooLarge, c.differences)
	for _, r := range c.reordered {
		t.Logf("graphql-go answered in two orders of errors: %s", r)
	}
	if n := c.differences - maxDifferencesShown; n > 0 {
		t.Errorf("%d more differences, not shown", n)
	}
	if n := c.notPlanned - maxDifferencesShown; n > 0 {
		t.Errorf("%d more queries not planned, not shown", n)
	}
}

// maxDifferencesShown bounds the differences a subtest prints in full.
const maxDifferencesShown = 10

// compareOn prepares req on both schemas of site and, for a query, executes it as each caller
// on both (graphql-go's side twice) and requires the same bytes, as answer.WriteGraphQL writes
// the response. A mutation changes the store and a subscription is not executed here: neither
// may be planned. It returns the type of the operation, "" when Prepare refused it.
func compareOn(t *testing.T, site diffSite, req schema.Request, file string, callers []diffCaller, c *diffCounts) string {
	t.Helper()
	pOp, pRefusal := site.planned.Prepare(req)
	uOp, uRefusal := site.unplanned.Prepare(req)
	if (pRefusal == nil) != (uRefusal == nil) {
		t.Errorf("%s: Prepare refused on one side only: %v, %v\n%s", site.name, pRefusal, uRefusal, describe(req, file, ""))
		return ""
	}
	if pRefusal != nil {
		return ""
	}
	if pOp.Type != "query" {
		if site.planned.Planned(pOp) {
			t.Errorf("%s: a %s is planned; it must run on graphql-go\n%s", site.name, pOp.Type, describe(req, file, ""))
		}
		return pOp.Type
	}
	if site.unplanned.Planned(uOp) {
		t.Fatalf("%s: schema.Unplanned's side plans; the comparison would be of the plan with itself", site.name)
	}
	introspects, byDesign := readsIntrospection(req), leftToGraphQLGo(req)
	for _, caller := range callers {
		ctx := auth.NewContext(t.Context(), caller.caller)
		wantRes := site.unplanned.Execute(ctx, uOp)
		want := encodeResponse(wantRes)
		again := encodeResponse(site.unplanned.Execute(ctx, uOp))
		got := encodeResponse(site.planned.Execute(ctx, pOp))
		c.runs++
		if len(wantRes.Errors) > 0 {
			c.withErrors++
			if wantRes.Errors[0].Extensions["code"] == "RESPONSE_TOO_LARGE" {
				c.tooLarge++
			}
		}
		planned := site.planned.Planned(pOp)
		if planned {
			c.planned++
		}
		switch {
		case wantRes.Data == nil:
			c.invalid++
		case introspects:
			c.introspected++
		case byDesign:
			c.byDesign++
		case site.defaults && !planned:
			if c.notPlanned++; c.notPlanned <= maxDifferencesShown {
				t.Errorf("%s: a query that graphql-go validates and that reads no introspection is not planned\n%s", site.name, describe(req, file, caller.name))
			}
		}
		if want != again {
			if !sameButErrorOrder(want, again) {
				t.Errorf("%s: graphql-go answered differently twice\n%s\nonce:  %sagain: %s", site.name, describe(req, file, caller.name), want, again)
				continue
			}
			c.reordered = append(c.reordered, fmt.Sprintf("%s, %s as %s: %q", site.name, file, caller.name, req.Query))
		}
		if got == want || got == again {
			continue
		}
		// graphql-go's errors have no one order. It resolves each field that takes a context on
		// a goroutine of its own, so two errors of execution come in the order their goroutines
		// ended; and its validation reports some errors in the order of a map's iteration (two
		// fragments of one name: "There can be only one fragment named"). So the errors are
		// compared as a list sorted by path; the rest of the response byte for byte.
		if sameButErrorOrder(got, want) {
			continue
		}
		if c.differences++; c.differences <= maxDifferencesShown {
			t.Errorf("%s: the plan answers otherwise than graphql-go\n%s\nplanned:    %sgraphql-go: %s", site.name, describe(req, file, caller.name), got, want)
		}
	}
	return pOp.Type
}

// encodeResponse is res as answer.WriteGraphQL (handlers/answer/graphql.go) writes it.
func encodeResponse(res *graphql.Response) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return "encoding failed: " + err.Error()
	}
	return b.String()
}

// sameButErrorOrder says whether a and b are one response but for the order of its errors.
func sameButErrorOrder(a, b string) bool {
	type response struct {
		Data       json.RawMessage   `json:"data"`
		Errors     []json.RawMessage `json:"errors"`
		Extensions json.RawMessage   `json:"extensions"`
	}
	var ra, rb response
	if json.Unmarshal([]byte(a), &ra) != nil || json.Unmarshal([]byte(b), &rb) != nil {
		return false
	}
	if !bytes.Equal(ra.Data, rb.Data) || !bytes.Equal(ra.Extensions, rb.Extensions) || len(ra.Errors) != len(rb.Errors) {
		return false
	}
	return slices.Equal(sortedByPath(ra.Errors), sortedByPath(rb.Errors))
}

// sortedByPath is errs sorted by their paths, and those with one path (or none: validation's)
// by their JSON.
func sortedByPath(errs []json.RawMessage) []string {
	var sorted []string
	for _, e := range errs {
		var withPath struct{ Path json.RawMessage }
		json.Unmarshal(e, &withPath)
		sorted = append(sorted, string(withPath.Path)+"\x00"+string(e))
	}
	slices.SortFunc(sorted, cmp.Compare)
	return sorted
}

// readsIntrospection says whether the request's document selects __schema or __type.
func readsIntrospection(req schema.Request) bool {
	doc, err := parser.ParseQuery(&ast.Source{Input: req.Query})
	if err != nil {
		return true
	}
	found := false
	for _, op := range doc.Operations {
		eachField(doc, op.SelectionSet, func(f *ast.Field) {
			found = found || f.Name == "__schema" || f.Name == "__type"
		})
	}
	return found
}

// eachField calls f with each field of set, at any depth, through inline fragments and the
// fragments it spreads (each once).
func eachField(doc *ast.QueryDocument, set ast.SelectionSet, f func(*ast.Field)) {
	eachSelection(doc, set, func(sel ast.Selection) {
		if field, ok := sel.(*ast.Field); ok {
			f(field)
		}
	})
}

// eachSelection calls f with each selection of set, at any depth: fields, inline fragments,
// spreads, and the selections of the fragments spread (each once).
func eachSelection(doc *ast.QueryDocument, set ast.SelectionSet, f func(ast.Selection)) {
	spread := map[string]bool{}
	var walk func(set ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			f(sel)
			switch sel := sel.(type) {
			case *ast.Field:
				walk(sel.SelectionSet)
			case *ast.InlineFragment:
				walk(sel.SelectionSet)
			case *ast.FragmentSpread:
				if def := doc.Fragments.ForName(sel.Name); def != nil && !spread[sel.Name] {
					spread[sel.Name] = true
					walk(def.SelectionSet)
				}
			}
		}
	}
	walk(set)
}

// leftToGraphQLGo says whether plan.go leaves req to graphql-go's Exec by design, as its opening
// comment says: a document of more than one operation; a block string, which graphql-go's
// reader may read otherwise than gqlparser's; a directive's if that is a variable given null.
func leftToGraphQLGo(req schema.Request) bool {
	doc, err := parser.ParseQuery(&ast.Source{Input: req.Query})
	if err != nil || len(doc.Operations) != 1 || strings.Contains(req.Query, `"""`) {
		return true
	}
	nullIf := false
	eachSelection(doc, doc.Operations[0].SelectionSet, func(sel ast.Selection) {
		var directives ast.DirectiveList
		switch sel := sel.(type) {
		case *ast.Field:
			directives = sel.Directives
		case *ast.InlineFragment:
			directives = sel.Directives
		case *ast.FragmentSpread:
			directives = sel.Directives
		}
		for _, d := range directives {
			if arg := d.Arguments.ForName("if"); arg != nil && arg.Value.Kind == ast.Variable {
				if v, given := req.Variables[arg.Value.Raw]; given && v == nil {
					nullIf = true
				}
			}
		}
	})
	return nullIf
}

// describe is a request as a difference shows it.
func describe(req schema.Request, file, caller string) string {
	vars, _ := json.Marshal(req.Variables)
	s := fmt.Sprintf("document (%s): %s\noperationName: %q variables: %s", file, req.Query, req.OperationName, vars)
	if caller != "" {
		s += "\ncaller: " + caller
	}
	return s
}
