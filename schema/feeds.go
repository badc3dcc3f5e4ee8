package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"sync"

	"github.com/graph-gophers/graphql-go"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/posts"
)

// Why a Listener ended or could not start.
var (
	// ErrFeedFellBehind: the listener's feed could not resolve events as fast as they came,
	// and the listener cannot read what it missed from the event log (Schema.fellBehind): it
	// is of no Sequence, or the log no longer keeps where its reread starts (Sequence.reread).
	ErrFeedFellBehind = errors.New("the server fell behind the events of this subscription")
	// ErrTooManyFeeds: as many distinct subscriptions run as Limits.MaxFeeds allows.
	ErrTooManyFeeds = &errcode.Error{Code: errcode.ServerFull, Message: "the server runs as many distinct subscriptions as it may; try again later"}
	// ErrTooManyFeedsPerClient: the client takes part in as many distinct subscriptions as
	// Limits.MaxFeedsPerClient allows, and completes one of its own before it starts another.
	ErrTooManyFeedsPerClient = &errcode.Error{Code: errcode.TooManySubscriptions, Message: "this client takes part in as many distinct subscriptions as max_distinct_subscriptions_per_client allows; complete one first"}
)

// RefusedError ends a Listener whose operation could not run; Errors say why.
type RefusedError struct{ Errors []*gqlerrors.QueryError }

// Error says that the subscription was refused; Errors say why.
func (e *RefusedError) Error() string { return "the subscription was refused" }

// feeds are the running subscription operations, by key, and the share of them each client
// takes part in.
type feeds struct {
	mu  sync.Mutex
	all map[string]*feed
	// clients are, by client, the feeds the client's listeners are in, each with how many of
	// them: a client with a feed counts once however many times it listens to it. A client
	// with none has no entry.
	clients map[string]map[*feed]int
}

// feed is one execution of a subscription operation, shared by its listeners: each event is
// resolved and encoded once, whatever the number of subscribers.
type feed struct {
	key       string
	op        *Operation
	base      context.Context // what it resolves in: anonymous, or its caller's (Schema.listen)
	cancel    context.CancelFunc
	listeners map[*Listener]struct{}
	pending   pending       // the events matched and not answered yet (order.go)
	ready     chan struct{} // closed once the feed's subscription to the events is made
}

// Listener is one subscriber of a feed.
type Listener struct {
	s       *Schema
	f       *feed
	client  string
	seq     *Sequence // of its connection, if it orders its responses with others (order.go)
	deliver func(json.RawMessage)
	ended   func(error)
	op      *Operation
	// resolveIn is what its replays resolve in: its feed's base, anonymous or the caller's.
	resolveIn context.Context
	done      bool // guarded by feeds.mu of s

	// Guarded by seq.mu, which the listeners of every schema on the connection share (order.go):
	//
	// after is the position up to which the listener has its events from elsewhere (a replay
	// from the log, replay.go): the feed's responses to events up to it are not delivered.
	after int64
	// delivered is the position of the last event the listener was handed, or that its replay
	// started after (Sequence.start); 0 when neither: what a reread starts after (order.go).
	delivered int64
	// joined is the last position handed when the listener joined its feed: what a reread of
	// a listener that was handed nothing and holds nothing starts after (Schema.fellBehind).
	joined int64
	// resuming says that the listener resumed from a cursor and its replays have not reached a
	// seam yet: the resume is counted ok once one does (Sequence.replayed).
	resuming bool
	// replay is what the listener's replay has still to answer, nil when it has none;
	// stopReplay stops it.
	replay     *pending
	stopReplay context.CancelFunc
}

// Subscribed is closed once the listener's feed is subscribed to the events: an event handed
// to the events.Broker from then on reaches the listener. It stays open for a feed whose operation
// could not run, whose end the listener is told of.
func (l *Listener) Subscribed() <-chan struct{} {
	l.s.feeds.mu.Lock()
	defer l.s.feeds.mu.Unlock()
	return l.f.ready // a feed that fell behind gives its listeners another (fellBehind)
}

// Close leaves the feed; the last listener to leave stops it. ended is not called.
func (l *Listener) Close() {
	l.s.feeds.mu.Lock()
	defer l.s.feeds.mu.Unlock()
	l.s.leave(l)
}

// Listen joins the feed of op, a subscription, for caller, a listener of client (the key a
// transport counts its client by: the user, or an anonymous client's address): subscribers of
// the same document, operation name and variables share one, unless op selects the caller's
// own email, which gives each caller a feed of their own. A client may take part in
// Limits.MaxFeedsPerClient feeds at once (ErrTooManyFeedsPerClient), and the server run
// Limits.MaxFeeds (ErrTooManyFeeds); a listener counts against both until it leaves.
//
// deliver gets each response, encoded once for all the feed's listeners. It is called by the
// feed's goroutine, one listener after the other (or, for a listener of a Sequence, by the
// goroutine of whichever feed released it), and must not block: a transport queues the
// response, and drops a subscriber that lets its queue fill. ended is called once if the feed
// ends before the listener is closed, with no lock held: with nil when the subscription
// completed, ErrFeedFellBehind, or a *RefusedError when the operation could not run.
//
// An operation with extensions.resumeFrom first gets every event after that cursor from the
// event log, then its feed's (replay.go); its refusal (a cursor the log did not make, or no
// longer keeps, or too far behind) ends it with a *RefusedError.
//
// Delivering through a callback rather than a channel leaves an idle subscription with no
// goroutine and no queue of its own.
func (s *Schema) Listen(client string, op *Operation, caller posts.Caller, deliver func(json.RawMessage), ended func(error)) (*Listener, error) {
	return s.listen(client, op, caller, deliver, ended, nil)
}

// listen is Listen, for a listener of seq if not nil.
func (s *Schema) listen(client string, op *Operation, caller posts.Caller, deliver func(json.RawMessage), ended func(error), seq *Sequence) (*Listener, error) {
	vars, _ := json.Marshal(op.request.Variables) // its keys sorted: equal variables, equal bytes
	key := op.request.OperationName + "\x00" + string(vars) + "\x00" + op.document
	// The answer is everyone's, so it resolves for no one in particular: a context without a
	// caller is anonymous. A personal one resolves for its caller.
	base := context.Background()
	if op.personal {
		key, base = caller.UserID+"\x00"+key, posts.WithCaller(base, caller)
	}
	if seq == nil && op.resumeFrom != "" { // of no connection: nothing else to keep in order
		seq = NewSequence(math.MaxInt, nil, nil)
	}
	l := &Listener{s: s, client: client, seq: seq, deliver: deliver, ended: ended, op: op, resolveIn: base}
	s.feeds.mu.Lock()
	defer s.feeds.mu.Unlock()
	f := s.feeds.all[key]
	mine := s.feeds.clients[client]
	if f == nil && len(s.feeds.all) >= s.limits.MaxFeeds {
		metrics.LimitRefused("max_distinct_subscriptions")
		return nil, ErrTooManyFeeds
	}
	if _, in := mine[f]; !in && len(mine) >= s.limits.MaxFeedsPerClient {
		metrics.LimitRefused("max_distinct_subscriptions_per_client")
		return nil, ErrTooManyFeedsPerClient
	}
	if f == nil {
		f = s.startFeed(key, base, op)
	}
	if mine == nil {
		if s.feeds.clients == nil {
			s.feeds.clients = map[string]map[*feed]int{}
		}
		mine = map[*feed]int{}
		s.feeds.clients[client] = mine
	}
	mine[f]++
	l.f = f
	if handed, ok := s.svc.Handed(); ok {
		l.joined = handed
	}
	f.listeners[l] = struct{}{}
	if seq != nil {
		seq.join(l, op.resumeFrom != "")
	}
	metrics.SubscriberJoined()
	return l, nil
}

// startFeed starts the feed of op under key, which resolves in base; feeds.mu is held.
func (s *Schema) startFeed(key string, base context.Context, op *Operation) *feed {
	ctx, cancel := context.WithCancel(base)
	f := &feed{key: key, op: op, base: base, cancel: cancel, listeners: map[*Listener]struct{}{}, ready: make(chan struct{})}
	if s.feeds.all == nil {
		s.feeds.all = map[string]*feed{}
	}
	s.feeds.all[key] = f
	metrics.FeedStarted()
	ctx = withOverflow(ctx, func() { s.fellBehind(f) })
	ctx = withPending(ctx, &f.pending)
	ctx = withSubscribed(ctx, sync.OnceFunc(func() { close(f.ready) }))
	go s.run(ctx, f, op)
	return f
}

// fellBehind takes the listeners of f, which the events.Broker dropped for falling behind the
// events (events.ErrTooSlow: a feed resolves at most its turns' share of the cores, and a burst
// of writes on a loaded machine outruns it), to a feed of the same operation started again
// (restart), and ends the others with ErrFeedFellBehind: a listener of no Sequence, which
// nothing replays, and every listener of a service with no event log.
func (s *Schema) fellBehind(f *feed) {
	if _, logged := s.svc.Handed(); logged {
		s.restart(f)
	}
	s.endFeed(f, ErrFeedFellBehind)
}

// restart moves the listeners of f that have a Sequence to a feed of its operation started
// again, and has each replayed from the log after the last event it was handed, as a Sequence
// rereads a listener it held back past its limit (Sequence.rejoin): the log keeps the events, so
// that no subscriber ends for the server's being slow. Nothing, if f has stopped.
func (s *Schema) restart(f *feed) {
	s.feeds.mu.Lock()
	defer s.feeds.mu.Unlock()
	if s.feeds.all[f.key] != f {
		return
	}
	s.stop(f)
	next := s.startFeed(f.key, f.base, f.op)
	for l := range f.listeners {
		if l.seq == nil {
			continue
		}
		delete(f.listeners, l)
		next.listeners[l] = struct{}{}
		mine := s.feeds.clients[l.client]
		if mine[f]--; mine[f] == 0 {
			delete(mine, f)
		}
		mine[next]++
		l.seq.rejoin(l, next)
	}
	if len(next.listeners) == 0 {
		s.stop(next)
	}
}

// ClientFeeds is how many feeds client takes part in, against Limits.MaxFeedsPerClient; the
// handlers' tests read it to see that shares are given back.
func (s *Schema) ClientFeeds(client string) int {
	s.feeds.mu.Lock()
	defer s.feeds.mu.Unlock()
	return len(s.feeds.clients[client])
}

// FeedClients is how many clients take part in any feed; like ClientFeeds, it is for tests
// and monitoring.
func (s *Schema) FeedClients() int {
	s.feeds.mu.Lock()
	defer s.feeds.mu.Unlock()
	return len(s.feeds.clients)
}

// run executes the feed's operation and hands each response to every listener.
func (s *Schema) run(ctx context.Context, f *feed, op *Operation) {
	for res := range s.subscribe(ctx, op) {
		if res.Data == nil {
			s.endFeed(f, &RefusedError{res.Errors})
			return
		}
		payload := s.encode(res, f.pending.oldest())
		s.feeds.mu.Lock()
		// The position is dropped once the response is with every listener's Sequence: one
		// of another schema (its feeds.mu another) would release a later response past it
		// in between (order.go).
		position := f.pending.oldest()
		for l := range f.listeners {
			if l.seq != nil {
				l.seq.arrive(l, position, payload)
			} else {
				l.deliver(payload)
			}
		}
		f.pending.resolved()
		for l := range f.listeners {
			if l.seq != nil {
				l.seq.recheck()
			}
		}
		metrics.EventsDelivered(len(f.listeners))
		s.feeds.mu.Unlock()
	}
	s.endFeed(f, nil) // the stream completed
}

// encode is the JSON of res, the response to the event at position (0: none), with the
// event's cursor in its extensions.
func (s *Schema) encode(res *graphql.Response, position int64) json.RawMessage {
	cursor := s.svc.Cursor(position)
	if len(res.Errors) == 0 && res.Extensions == nil && len(res.Data) > 0 {
		// What json.Marshal writes of res, without its check and copy of data, which
		// graphql-go wrote as compact JSON with its strings escaped as json.Marshal escapes
		// them: that pass took a third of a fan-out's CPU.
		payload := make([]byte, 0, len(`{"data":,"extensions":{"cursor":""}}`)+len(res.Data)+len(cursor))
		payload = append(append(payload, `{"data":`...), res.Data...)
		if cursor != "" {
			payload = AppendJSONString(append(payload, `,"extensions":{"cursor":`...), cursor, true)
			payload = append(payload, '}')
		}
		return append(payload, '}')
	}
	if cursor != "" {
		res.Extensions = map[string]any{"cursor": cursor}
	}
	payload, err := json.Marshal(res)
	if err != nil {
		payload = json.RawMessage(`{"errors":[{"message":"` + errcode.InternalMessage + `","extensions":{"code":"` + errcode.Internal.GraphQL + `"}}]}`)
	}
	return payload
}

// cursorMember is how an encoded response holds its event's cursor: last, as encode writes it.
const cursorMember = `"extensions":{"cursor":"`

// CursorOf is the cursor of the event a subscription's response answers, "" for none: for a
// transport that also writes it beside the response (SSE's id). It is the response's own last
// member as encode writes it, never an object of the data that aliases spell the same way.
func CursorOf(payload json.RawMessage) string {
	rest, ok := bytes.CutSuffix(payload, []byte(`"}}`))
	if !ok {
		return ""
	}
	i := bytes.LastIndex(rest, []byte(cursorMember))
	if i < 0 || bytes.IndexByte(rest[i+len(cursorMember):], '"') >= 0 {
		return ""
	}
	return string(rest[i+len(cursorMember):])
}

// endListener ends l alone, telling it why.
func (s *Schema) endListener(l *Listener, why error) {
	s.feeds.mu.Lock()
	left := s.leave(l)
	s.feeds.mu.Unlock()
	if left {
		l.ended(why)
	}
}

// endFeed stops f and tells each of its listeners why it ended.
func (s *Schema) endFeed(f *feed, why error) {
	s.feeds.mu.Lock()
	var ended []*Listener
	for l := range f.listeners {
		if s.leave(l) {
			ended = append(ended, l)
		}
	}
	s.stop(f)
	s.feeds.mu.Unlock()
	for _, l := range ended {
		l.ended(why)
	}
}

// leave removes l from its feed, once, and says whether it was there; the feed stops with its
// last listener. feeds.mu is held.
func (s *Schema) leave(l *Listener) bool {
	if l.done {
		return false
	}
	l.done = true
	delete(l.f.listeners, l)
	if l.seq != nil {
		l.seq.leave(l)
	}
	metrics.SubscriberLeft()
	// The one place a listener leaves: its client's share is given back here, whether it was
	// closed or its feed ended.
	mine := s.feeds.clients[l.client]
	if mine[l.f]--; mine[l.f] == 0 {
		delete(mine, l.f)
		if len(mine) == 0 {
			delete(s.feeds.clients, l.client)
		}
	}
	if len(l.f.listeners) == 0 {
		s.stop(l.f)
	}
	return true
}

// stop cancels f and forgets it, so that the next listener of its key starts a new one.
// feeds.mu is held.
func (s *Schema) stop(f *feed) {
	f.cancel()
	if s.feeds.all[f.key] == f {
		delete(s.feeds.all, f.key)
		metrics.FeedStopped()
	}
}
