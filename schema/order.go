package schema

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/postsedge/caddy-posts/posts"
)

// One order per connection. Each feed resolves its events on its own goroutines, so the
// responses of two subscriptions of one connection (postCreated and postUpdated, say) would
// reach it in whichever order their feeds finished, a post's update before its creation. A
// Sequence restores the order of the event log across the subscriptions of one connection: a
// response waits until no subscription of the connection still has an earlier event to resolve.
//
// It can tell, because a feed knows the events it has to resolve before any of them is resolved:
// events.Broker.Publish matches each event against each subscription in the order of the log, under
// its lock, and the feed notes the event's position then (reserve), and drops it once it has handed
// its response to its listeners (resolved). A response at position p is released once every feed of
// the connection has nothing noted before p: what it would answer before p is answered already, or
// will never be. A feed drops a position only once its response is with every listener's Sequence
// (Schema.run), and a replay under its Sequence's mu (arriveReplayed): a Sequence never sees a
// position neither noted nor held, which it would release a later response past.
//
// The responses a Sequence holds are bounded (its limit, a quarter of the connection's send
// queue: a release of all it holds, on top of the half of the queue that replays may fill
// (room), leaves the queue room for the live responses of a client that reads steadily), but a
// listener is not ended for what it holds: a replay goes at the client's pace, and holds back
// every other subscription of the connection meanwhile, however steadily the client reads.
// Past the limit, the listener that holds the most responses of its feed drops them and turns
// into a replay itself, from the last event it was handed (reread): the log keeps every event,
// and the replay meets the feed at a seam as a resume does (replay.go). Replays whose replayed
// responses are held wait (pace) while the responses held are half the limit or more, and the
// one furthest behind always goes on: five subscriptions resumed at once all catch up. A client
// that stops reading is ended by its connection (its send queue, or a write that times out),
// never by the Sequence.

// pending are the positions of the events a feed has matched and not answered yet, oldest first.
// A replay (replay.go) reads the log as it goes, so it also notes how far it has read: it may
// still match an event from position open on (0: a feed, whose events the broker matches as it
// publishes them, never has one it has not noted).
type pending struct {
	mu        sync.Mutex
	positions []int64
	open      int64
}

// reserve notes the event at position p, matched by the feed's subscription.
func (q *pending) reserve(p int64) {
	q.mu.Lock()
	q.positions = append(q.positions, p)
	q.mu.Unlock()
}

// resolved drops the oldest position and returns it: its response is handed over now. 0 when
// none is noted (a response that answers no event).
func (q *pending) resolved() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.positions) == 0 {
		return 0
	}
	p := q.positions[0]
	q.positions = q.positions[1:]
	return p
}

// oldest is the position of the oldest event noted, the one the next response answers: 0 when
// none is noted.
func (q *pending) oldest() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.positions) == 0 {
		return 0
	}
	return q.positions[0]
}

// readTo notes that a replay has read the log up to position p: what it matches from now on is
// after p.
func (q *pending) readTo(p int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.open = p + 1
}

// before says whether an event before position p is still to be answered, or may still be
// matched by a replay.
func (q *pending) before(p int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.positions) > 0 && q.positions[0] < p || q.open != 0 && q.open < p
}

// Sequence hands the responses of the subscriptions of one connection in the order of the
// events they answer. Its methods are safe for concurrent use. Its listeners may be of several
// schemas (a connection that outlives a reload subscribes through the new config's), each with
// its own feeds.mu: what a Sequence reads of its listeners (their after, replay and stopReplay)
// is guarded by its mu alone.
type Sequence struct {
	limit int                             // of the responses held back
	room  func(ctx context.Context) error // waits until the connection can take more (NewSequence)
	hold  func(n int)                     // told of the bytes held for the connection (NewSequence)

	mu        sync.Mutex
	listeners map[*Listener]struct{}
	held      []held        // by position
	fewer     chan struct{} // closed once fewer are held, for the replays that pace holds back
	// bytes are those of the payloads held, reported of them what hold was last told of
	// (settle): a response handed as it arrives is never told of.
	bytes, reported int
}

// held is a response that waits for an earlier one.
type held struct {
	l        *Listener
	position int64
	payload  json.RawMessage
	replayed bool // from the log, by a replay (replay.go)
}

// NewSequence returns the sequence of one connection whose send queue takes queue responses,
// which holds back a quarter of them at most: past them, a listener's held responses are read
// again from the log (reread): a Sequence ends no connection. room, if not nil, waits until the
// send queue is less than half full, or fails when ctx ends: a replay, which has every event at
// hand, goes at the client's pace rather than overflow it. hold, if not nil, is told of every
// byte the Sequence holds for the connection, n more (less than 0: fewer), as it takes and
// drops them: the responses it holds back, and its replays' pages of the log (replay.go); it
// is called with the Sequence's lock held, or by a replay's goroutine, and must not block.
func NewSequence(queue int, room func(ctx context.Context) error, hold func(n int)) *Sequence {
	if hold == nil {
		hold = func(int) {}
	}
	return &Sequence{limit: max(queue/4, 1), room: room, hold: hold}
}

// pace waits until l's replay may hand another response: while l has a replayed response held
// (it waits for an earlier event of another subscription of the connection) and the responses
// held are half the limit or more, and until the connection has room. The replay furthest
// behind never has a replayed response held, so some replay always goes on, and the replays
// leave the other half of the limit to the live subscriptions. l's own feed's responses past
// its seam do not count: they wait for the events the replay has still to answer, and would
// hold it back for a drop that only it can make.
func (q *Sequence) pace(ctx context.Context, l *Listener) error {
	for {
		fewer := q.crowded(l)
		if fewer == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-fewer:
		}
	}
	if q.room == nil {
		return nil
	}
	return q.room(ctx)
}

// crowded says whether l's replay waits (pace): if so, it returns a channel closed once fewer
// responses are held.
func (q *Sequence) crowded(l *Listener) <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.held) < q.limit/2 || !slices.ContainsFunc(q.held, func(h held) bool { return h.l == l && h.replayed }) {
		return nil
	}
	if q.fewer == nil {
		q.fewer = make(chan struct{})
	}
	return q.fewer
}

// shrank wakes the replays that pace holds back, once fewer responses are held; q.mu is held.
func (q *Sequence) shrank() {
	if q.fewer != nil {
		close(q.fewer)
		q.fewer = nil
	}
}

// recheck hands what may go since a feed dropped a position or a replay read further.
func (q *Sequence) recheck() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.release()
}

// ListenIn is Listen, with deliver called in the order of the events of every listener of q.
func (s *Schema) ListenIn(q *Sequence, client string, op *Operation, caller posts.Caller, deliver func(json.RawMessage), ended func(error)) (*Listener, error) {
	return s.listen(client, op, caller, deliver, ended, q)
}

// join adds l, and starts its replay if it resumes from a cursor; feeds.mu of l's schema is
// held, so that its feed hands it nothing before.
func (q *Sequence) join(l *Listener, resumes bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.listeners == nil {
		q.listeners = map[*Listener]struct{}{}
	}
	q.listeners[l] = struct{}{}
	l.resuming = resumes
	if resumes {
		q.replayFrom(l, 0, true)
	}
}

// leave removes l, stops its replay, drops what it holds, and hands what waited for it.
func (q *Sequence) leave(l *Listener) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.listeners, l)
	if l.stopReplay != nil {
		l.stopReplay()
	}
	l.replay, l.stopReplay = nil, nil
	q.held = slices.DeleteFunc(q.held, func(h held) bool {
		if h.l != l {
			return false
		}
		q.bytes -= len(h.payload)
		return true
	})
	q.shrank()
	q.release()
}

// arrive takes the response of l's feed to the event at position (0: none), unless l has left
// or its replay answers that event (after), and hands what may go. The feed drops position
// only once it has arrived at every listener (Schema.run).
func (q *Sequence) arrive(l *Listener, position int64, payload json.RawMessage) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, in := q.listeners[l]; !in || position != 0 && position <= l.after {
		return
	}
	q.take(held{l, position, payload, false})
}

// arriveReplayed takes the response of r, l's replay, to the oldest event r has noted, and
// hands what may go: it drops the event from r under q.mu, so that no release sees it neither
// noted nor held. It says whether the response was taken: not when l has left, or r is no
// longer l's replay (reread started another).
func (q *Sequence) arriveReplayed(l *Listener, r *pending, payload json.RawMessage) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	position := r.resolved()
	if _, in := q.listeners[l]; !in || l.replay != r {
		return false
	}
	q.take(held{l, position, payload, true})
	return true
}

// take holds h in order, hands what may go, and rereads past the limit; q.mu is held.
func (q *Sequence) take(h held) {
	i := len(q.held) // after those of the same position: most come in order
	for i > 0 && q.held[i-1].position > h.position {
		i--
	}
	q.held = slices.Insert(q.held, i, h)
	q.bytes += len(h.payload)
	q.release()
	for len(q.held) > q.limit {
		l := q.crowding()
		if l == nil {
			break
		}
		q.reread(l)
	}
	q.settle()
}

// crowding is the listener that holds the most responses of its feed, or, when none holds one,
// of its replay (pace keeps those few); nil when none holds any. q.mu is held.
func (q *Sequence) crowding() *Listener {
	live, replayed := map[*Listener]int{}, map[*Listener]int{}
	for _, h := range q.held {
		if h.replayed {
			replayed[h.l]++
		} else {
			live[h.l]++
		}
	}
	most := func(counts map[*Listener]int) (top *Listener) {
		for l, n := range counts {
			if top == nil || n > counts[top] {
				top = l
			}
		}
		return top
	}
	if l := most(live); l != nil {
		return l
	}
	return most(replayed)
}

// reread drops the responses l holds, and replays l from the log after the last event it was
// handed (Listener.delivered), or, when it was handed none and had no replay, before the oldest
// it holds: every response its feed gave it is then held. q.mu is held.
//
// It starts from what l was handed, never from what it holds or its replay has noted: a replay
// notes an event read (readTo) only once it has answered the one before, so the one it has just
// answered may be handed already, and so may the feed's first response past its seam, before
// the replay ends. release hands in the order of the log, and only once no subscription of the
// connection has an earlier event to answer: l has every event up to delivered that it matches,
// and none after it.
func (q *Sequence) reread(l *Listener) {
	oldest := int64(0)
	q.held = slices.DeleteFunc(q.held, func(h held) bool {
		if h.l != l {
			return false
		}
		q.bytes -= len(h.payload)
		if h.position != 0 && (oldest == 0 || h.position < oldest) {
			oldest = h.position
		}
		return true
	})
	q.shrank()
	from := l.delivered
	switch {
	case from != 0:
	case oldest != 0:
		from = oldest - 1
	default:
		from = l.joined // handed nothing and holding nothing (rejoin)
	}
	q.replayFrom(l, from, false)
}

// rejoin takes l, whose feed fell behind, to f, its feed started again (Schema.fellBehind), and
// replays it from the log: from where it was, as reread does; or, a resume whose replay has not
// started to read yet, from its cursor again. feeds.mu is held.
func (q *Sequence) rejoin(l *Listener, f *feed) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l.f = f
	if l.resuming && l.delivered == 0 {
		q.replayFrom(l, 0, true)
	} else {
		q.reread(l)
	}
	q.release() // what waited for the positions its old feed had noted
}

// release hands the held responses that no listener's feed has an earlier event for; q.mu is
// held.
func (q *Sequence) release() {
	n := 0
	for ; n < len(q.held) && !q.waits(q.held[n].position); n++ {
		q.bytes -= len(q.held[n].payload)
	}
	q.settle() // before deliver queues them, so that they never count twice
	for _, h := range q.held[:n] {
		if h.replayed {
			h.l.op.traced.fromReplay(h.position) // for the span of its delivery
		}
		h.l.deliver(h.payload)
		if h.position != 0 {
			h.l.delivered = h.position
		}
	}
	if n > 0 {
		clear(q.held[:n])
		q.held = q.held[n:]
		q.shrank()
	}
}

// settle tells hold what the payloads held came to since it was last told; q.mu is held.
func (q *Sequence) settle() {
	if q.bytes != q.reported {
		q.hold(q.bytes - q.reported)
		q.reported = q.bytes
	}
}

// waits says whether a feed or a replay of a listener has an event before position to answer;
// q.mu is held.
func (q *Sequence) waits(position int64) bool {
	for l := range q.listeners {
		if l.f.pending.before(position) || l.replay != nil && l.replay.before(position) {
			return true
		}
	}
	return false
}
