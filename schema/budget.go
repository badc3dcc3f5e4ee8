package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/posts"
)

// budget is what is left of max_response_size for one execution. graphql-go builds the
// whole result in memory before anything is written, so the resolvers charge it with the JSON
// each value will take, key and punctuation included, before graphql-go writes it: once it
// runs out, the execution's context is cancelled (graphql-go then calls no more resolvers),
// the resolvers that still run return errResponseTooLarge at once, and no store call starts.
//
// A subscription's events are each one response, with a budget of their own (see eventBudget):
// there graphql-go makes each event's context itself, so nothing can cancel an event alone:
// the resolvers' errResponseTooLarge is what stops it, and how the stream tells such an event
// from the others.
//
// Every field of every object charges: key (the longest the operation writes that field
// under: exact unless one field has aliases of different lengths), quotes, colon and comma,
// then its value as graphql-go encodes it. An object charges its braces and, if the operation
// selects __typename anywhere, that member too. A nil *budget charges nothing.
//
// An event's budget also draws on writes (see there): past its first writeFreeBytes, what it
// charges, and what ahead is sure it will, comes out of what every subscription's response to
// the same write shares, and out of what the responses being resolved at once share; when
// either is gone, the response stops as it does past max_response_size, and answers so
// (overWrite).
type budget struct {
	*shape
	left atomic.Int64
	stop context.CancelCauseFunc
	// write is what is left of the budget of the write this response answers, shared with every
	// other response to it, and w where the responses being resolved hold their part of
	// writes.building; both nil, which bounds nothing, outside subscriptions.
	write *atomic.Int64
	w     *writes
	// free is what the response may still charge without drawing on write: writeFreeBytes at
	// first, and what ahead took from write for it.
	free atomic.Int64
	// overWrite says that the response stopped because write or w.building ran out, not left.
	overWrite atomic.Bool

	// Guarded by mu: drawn is what the response took from write, held what it holds of
	// w.building, and holding and released say whether hold and release were called.
	mu                sync.Mutex
	drawn, held       int64
	holding, released bool
}

// shape is what a budget reads of its document, found once by Prepare from the tree it parsed.
type shape struct {
	keys     map[string]int // by field name, the longest key it is written under
	unknown  int            // the key length of a field not in keys (none should be): the document's length
	typename int            // the key length of __typename, 0 when it is never selected
	// least is, for each field of postFields, how many times at the fewest one of its posts is
	// written with its title and with its body, aliases counted: see ahead.
	least map[string]leaves
}

// leaves counts the titles and bodies written of one post.
type leaves struct{ title, body int }

// errResponseTooLarge is the cause of an execution stopped by its budget, and what the
// resolvers that still run return.
var errResponseTooLarge = &errcode.Error{Code: errcode.ResponseTooLarge, Message: "the response is too large"}

// newBudget is a budget of limit bytes for one response of a document of shape sh, whose
// exhaustion calls stop (if not nil).
func newBudget(limit int64, sh *shape, stop context.CancelCauseFunc) *budget {
	b := &budget{shape: sh, stop: stop}
	b.left.Store(limit)
	return b
}

// shapeOf is the shape of doc, whose printed text is length bytes long.
func shapeOf(doc *ast.QueryDocument, length int) *shape {
	sh := &shape{keys: map[string]int{}, unknown: length}
	for _, op := range doc.Operations {
		sh.collectKeys(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		sh.collectKeys(f.SelectionSet)
	}
	sh.typename = sh.keys["__typename"]
	sh.least = leastLeaves(doc)
	return sh
}

// postFields are the fields whose posts are known before their selection resolves, and the path
// from each to a post: the lists (a page of posts, read before its posts resolve) and the
// subscription roots (an event's post, as it came).
var postFields = map[string][]string{"posts": nil, "postsConnection": {"edges", "node"}, "postCreated": nil, "postUpdated": nil}

// leastLeaves is budget.least for doc: for each occurrence of a field of postFields, the titles
// and bodies its selection writes per post, fragments expanded, and of those the fewest.
func leastLeaves(doc *ast.QueryDocument) map[string]leaves {
	least := map[string]leaves{}
	var walk func(set ast.SelectionSet, depth int)
	walk = func(set ast.SelectionSet, depth int) {
		if depth > 64 { // deeper than max_depth allows; a fragment cycle is refused before
			return
		}
		for _, sel := range selections(doc, set, false) {
			path, ok := postFields[sel.Name]
			if ok {
				n := leaves{count(doc, sel.SelectionSet, append(path[:len(path):len(path)], "title"), 0), count(doc, sel.SelectionSet, append(path[:len(path):len(path)], "body"), 0)}
				if seen, ok := least[sel.Name]; ok {
					n = leaves{min(n.title, seen.title), min(n.body, seen.body)}
				}
				least[sel.Name] = n
			}
			walk(sel.SelectionSet, depth+1)
		}
	}
	for _, op := range doc.Operations {
		walk(op.SelectionSet, 0)
	}
	return least
}

// selections are the fields of set, the fields of its fragments included; with sure, only
// those that no @skip or @include may leave out.
func selections(doc *ast.QueryDocument, set ast.SelectionSet, sure bool) []*ast.Field {
	var out []*ast.Field
	conditional := func(d ast.DirectiveList) bool {
		return sure && (d.ForName("skip") != nil || d.ForName("include") != nil)
	}
	var add func(set ast.SelectionSet, depth int)
	add = func(set ast.SelectionSet, depth int) {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				if !conditional(sel.Directives) {
					out = append(out, sel)
				}
			case *ast.InlineFragment:
				if !conditional(sel.Directives) {
					add(sel.SelectionSet, depth+1)
				}
			case *ast.FragmentSpread:
				if f := doc.Fragments.ForName(sel.Name); f != nil && depth < 64 && !conditional(sel.Directives) {
					add(f.SelectionSet, depth+1)
				}
			}
		}
	}
	add(set, 0)
	return out
}

// count is how many times set is sure to write the field at path, aliases and fragments counted.
func count(doc *ast.QueryDocument, set ast.SelectionSet, path []string, depth int) int {
	n := 0
	for _, f := range selections(doc, set, true) {
		switch {
		case f.Name != path[0]:
		case len(path) == 1:
			n++
		case depth < 64:
			n += count(doc, f.SelectionSet, path[1:], depth+1)
		}
	}
	return n
}

func (sh *shape) collectKeys(set ast.SelectionSet) {
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			key := sel.Alias
			if key == "" {
				key = sel.Name
			}
			sh.keys[sel.Name] = max(sh.keys[sel.Name], len(key))
			sh.collectKeys(sel.SelectionSet)
		case *ast.InlineFragment:
			sh.collectKeys(sel.SelectionSet)
		}
	}
}

type budgetKey struct{}

type eventBudgetKey struct{}

// withEventBudgets returns a context whose subscriptions give each event the budget that
// budgetFor makes for its value, of type typ, under the root field name, the event at position.
func withEventBudgets(ctx context.Context, budgetFor func(name, typ string, position int64) *budget) context.Context {
	return context.WithValue(ctx, eventBudgetKey{}, budgetFor)
}

// eventBudget is a fresh budget for the event at position of the subscription of ctx, its
// value of type typ under the root field name already charged; nil, which charges nothing,
// outside Schema.subscribe.
func eventBudget(ctx context.Context, name, typ string, position int64) *budget {
	if budgetFor, _ := ctx.Value(eventBudgetKey{}).(func(string, string, int64) *budget); budgetFor != nil {
		return budgetFor(name, typ, position)
	}
	return nil
}

func withBudget(ctx context.Context, b *budget) context.Context {
	return context.WithValue(ctx, budgetKey{}, b)
}

// budgetOf is the budget of the execution that ctx belongs to, or nil.
func budgetOf(ctx context.Context) *budget {
	b, _ := ctx.Value(budgetKey{}).(*budget)
	return b
}

// charge takes n bytes from b, and from its write what its free bytes do not cover, and says
// whether they fit. The first charge that does not fit stops the execution.
func (b *budget) charge(n int) bool {
	if b == nil {
		return true
	}
	if b.left.Add(-int64(n)) >= 0 && b.draw(int64(n)) {
		return true
	}
	if b.stop != nil {
		b.stop(errResponseTooLarge)
	}
	return false
}

// draw takes from b's write what b's free bytes do not cover of n more bytes, and says whether
// it had them; when not, b is spent (overWrite).
func (b *budget) draw(n int64) bool {
	if b.write == nil {
		return true
	}
	if free := b.free.Add(-n); free >= 0 || b.reserve(min(-free, n)) {
		return true
	}
	b.left.Store(-1) // nothing adds to left: it stays spent
	return false
}

// reserve takes n bytes from b's write, and says whether it had them; when not, it takes
// nothing and b is overWrite. Once b holds its part of w.building (hold), the n bytes are held
// of it too, room or not: a resolution under way waits for nothing, and is bounded by its write.
func (b *budget) reserve(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !take(b.write, n) {
		b.overWrite.Store(true)
		return false
	}
	if b.holding {
		b.w.take(n)
		b.held += n
	}
	b.drawn += n
	return true
}

// hold waits until w.building has room for what b took from its write before it resolves
// (ahead's, of an event's post), and holds it, and what b takes after, until release: the
// large responses resolved at once, each allocated some six times over as graphql-go builds
// it, take max_response_size between them past their free bytes, and the others wait their
// turn. b is spent if ctx ends first.
// A response with nothing drawn yet waits for nothing: a small one never waits.
func (b *budget) hold(ctx context.Context) {
	if b == nil || b.w == nil || b.exceeded() {
		return
	}
	b.mu.Lock()
	n := b.drawn
	b.mu.Unlock()
	if n > 0 && !b.w.acquire(ctx, n) { // with mu free: release does not wait for it
		b.left.Store(-1)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.released { // its stream ended meanwhile
		b.w.release(n)
		return
	}
	b.holding, b.held = true, n
}

// release gives back what b holds of w.building: its response is built, or its stream ended.
// Once only: what b takes after holds nothing.
func (b *budget) release() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.holding && b.held > 0 {
		b.w.release(b.held)
	}
	b.holding, b.held, b.released = false, 0, true
}

// take takes n from left if it has them, and says whether it did: a response that cannot fit
// takes nothing that a smaller one could have had.
func take(left *atomic.Int64, n int64) bool {
	for {
		l := left.Load()
		if l < n {
			return false
		}
		if left.CompareAndSwap(l, l-n) {
			return true
		}
	}
}

// ahead charges nothing, but stops the execution at once when the titles and bodies that the
// field name of postFields is sure to write of ps (a list's page, or an event's one post)
// cannot fit in what is left: its answer is too large. Without it, graphql-go would encode the
// posts up to the limit, and copy that twice more on the way up, before a charge failed: for an
// event, in every feed that selects it.
func (b *budget) ahead(name string, ps []posts.Post) bool {
	if b == nil {
		return true
	}
	n := b.least[name]
	if n.title == 0 && n.body == 0 {
		return true
	}
	left, need := b.left.Load(), int64(0)
	for _, p := range ps {
		need += int64(n.title * jsonStringLen(p.Title))
		if p.Body != nil {
			need += int64(n.body * jsonStringLen(*p.Body))
		}
		if need > left {
			return b.charge(int(left) + 1)
		}
	}
	// What the write must give for them is taken now, before any is built: the responses to
	// one write are resolved at once, and each would see room that the others will take.
	if extra := need - b.free.Load(); b.write != nil && extra > 0 {
		if !b.reserve(extra) {
			return b.charge(int(left) + 1)
		}
		b.free.Add(extra)
	}
	return true
}

// exceeded says whether b ran out.
func (b *budget) exceeded() bool { return b != nil && b.left.Load() < 0 }

// err is errResponseTooLarge once b ran out: resolvers check it before any store call.
func (b *budget) err() error {
	if b.exceeded() {
		return errResponseTooLarge
	}
	return nil
}

// member is the size of the object member of field name whose value takes n bytes.
func (b *budget) member(name string, n int) int {
	key, ok := b.keys[name]
	if !ok {
		key = b.unknown
	}
	return len(`"":,`) + key + n
}

// object is the size of an object of type typ, its members aside.
func (b *budget) object(typ string) int {
	n := len(`{}`) - len(`,`) // the members count a comma each; an object has one fewer
	if b.typename > 0 {
		n += len(`"":"",`) + b.typename + len(typ)
	}
	return n
}

// scalar charges the member name whose value takes n bytes of JSON.
func (b *budget) scalar(name string, n int) bool {
	return b == nil || b.charge(b.member(name, n))
}

// The charges of the scalar fields. graphql-go runs a field that takes no context and returns no
// error on the goroutine of its object, and starts one for any other: so they return no error.
// Once the budget has run out they return zero values, which no one reads: Execute, and the
// stream of a subscription, answer RESPONSE_TOO_LARGE instead of the result.

// str charges the member name with the string s and returns it. Once the budget has run out
// it measures nothing: an event refused ahead would otherwise scan its body once per alias.
func (b *budget) str(name, s string) string {
	if b.exceeded() || !b.scalar(name, jsonStringLen(s)) {
		return ""
	}
	return s
}

// id is str of an ID.
func (b *budget) id(name, s string) ID { return ID(b.str(name, s)) }

// optStr is str of a nullable string.
func (b *budget) optStr(name string, s *string) *string {
	if s == nil {
		b.scalar(name, len(`null`))
		return nil
	}
	if b.exceeded() || !b.scalar(name, jsonStringLen(*s)) {
		return nil
	}
	return s
}

// int charges the member name with the Int n and returns it.
func (b *budget) int(name string, n int64) int32 {
	if !b.scalar(name, len(strconv.FormatInt(n, 10))) {
		return 0
	}
	return int32(n)
}

// time charges the member name with t as Time writes it.
func (b *budget) time(name string, t time.Time) Time {
	if !b.scalar(name, len(`""`)+TimeSize(t)) {
		return Time{}
	}
	return Time{t}
}

// objectMember charges the member name with an object of type typ, or null when absent.
func (b *budget) objectMember(name, typ string, present bool) bool {
	if b == nil {
		return true
	}
	if !present {
		return b.scalar(name, len(`null`))
	}
	return b.charge(b.member(name, b.object(typ)))
}

// list charges the member name with a list of n objects of type typ.
func (b *budget) list(name, typ string, n int) bool {
	if b == nil {
		return true
	}
	return b.charge(b.member(name, len(`[]`)+max(n-1, 0)*len(`,`)+n*b.object(typ)))
}

// jsonStringLen is JSONStringSize as graphql-go writes strings.
func jsonStringLen(s string) int { return JSONStringSize(s, true) }

// writeFreeBytes is what a response to an event may take before it draws on its write's
// budget: an ordinary subscription's responses never do.
const writeFreeBytes = 64 << 10

// writesKept is how many writes' budgets writes keeps: far more than the events a feed may have
// queued (caddymodule.EventQueue), so that the feeds still resolving a write find its budget.
const writesKept = 4096

// writes are the budgets of the latest writes, by the position of their event: each is what
// every subscription's responses to that write may take together past their first
// writeFreeBytes, 8 × max_response_size, so that one write costs the server a bounded
// amount however many distinct subscriptions answer it (max_distinct_subscriptions ×
// max_response_size without it). Live feeds and replays draw on the same one: a write is
// bounded however its responses come. The first response to a write makes its budget; the
// oldest made is forgotten past writesKept, and a replay that reaches a write forgotten by then
// makes it anew.
//
// The writes' budgets bound what each write costs, not what several cost at once: the feeds
// answer writes each at its own pace, so the large responses of six writes can be resolved
// together. building bounds those (budget.hold): what the responses being resolved draw on
// their writes is held of it until they are built.
type writes struct {
	mu         sync.Mutex
	limit      int64
	byPosition map[int64]*atomic.Int64
	order      [writesKept]int64 // the positions of byPosition, as a ring in the order made
	next       int               // where in order the next position goes

	// building is what the responses being resolved may still hold (max_response_size),
	// below 0 when those under way took more than they waited for; freed is closed, and
	// replaced, whenever some is given back. Guarded by buildingMu.
	buildingMu sync.Mutex
	building   int64
	freed      chan struct{}
}

// newWrites is writes for max_response_size limit.
func newWrites(limit int64) *writes {
	limit = max(limit, 0)
	return &writes{limit: 8 * limit, building: limit, freed: make(chan struct{})}
}

// acquire waits until building has n bytes, and takes them; false if ctx ends first.
func (w *writes) acquire(ctx context.Context, n int64) bool {
	for {
		w.buildingMu.Lock()
		if w.building >= n {
			w.building -= n
			w.buildingMu.Unlock()
			return true
		}
		freed := w.freed
		w.buildingMu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
	}
}

// take takes n bytes of building, room or not.
func (w *writes) take(n int64) {
	w.buildingMu.Lock()
	w.building -= n
	w.buildingMu.Unlock()
}

// release gives n bytes back to building, and wakes those that wait for room.
func (w *writes) release(n int64) {
	w.buildingMu.Lock()
	defer w.buildingMu.Unlock()
	w.building += n
	close(w.freed)
	w.freed = make(chan struct{})
}

// of is the budget of the write whose event is at position; nil for an event with none.
func (w *writes) of(position int64) *atomic.Int64 {
	if position <= 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if left := w.byPosition[position]; left != nil {
		return left
	}
	if w.byPosition == nil {
		w.byPosition = map[int64]*atomic.Int64{}
	}
	delete(w.byPosition, w.order[w.next])
	w.order[w.next], w.next = position, (w.next+1)%writesKept
	left := new(atomic.Int64)
	left.Store(w.limit)
	w.byPosition[position] = left
	return left
}

// tooLarge is the response of an operation stopped by its budget. Execution had begun, so, as
// the GraphQL specification has it (7.1.2, Data), data is present and null; the transports
// answer it as an executed operation (200, or a next message).
func tooLarge(limit int64) *graphql.Response {
	metrics.LimitRefused("max_response_size")
	return &graphql.Response{
		Data: json.RawMessage(`null`),
		Errors: []*gqlerrors.QueryError{{
			Message:    fmt.Sprintf("the response would be larger than %d bytes (max_response_size): ask for fewer fields or aliases, or smaller limit or first arguments", limit),
			Extensions: map[string]any{"code": errcode.ResponseTooLarge.GraphQL},
		}},
	}
}

// tooLargeForWrite is the response to an event whose budget stopped because its write's ran
// out (budget.overWrite): counted, as the write's budget is derived, under max_response_size.
func tooLargeForWrite(limit int64) *graphql.Response {
	metrics.LimitRefused("max_response_size")
	return &graphql.Response{
		Data: json.RawMessage(`null`),
		Errors: []*gqlerrors.QueryError{{
			Message: fmt.Sprintf("the responses to one write across subscriptions are bounded (%d bytes together, 8 × max_response_size, past the first %d bytes of each), "+
				"and the others took it: ask for fewer fields or aliases", 8*limit, writeFreeBytes),
			Extensions: map[string]any{"code": errcode.ResponseTooLarge.GraphQL},
		}},
	}
}
