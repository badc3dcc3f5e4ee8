package schema

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/postsedge/caddy-posts/posts"
)

// One order per connection. Each feed resolves its events on its own goroutines, so the
// responses of two subscriptions of one connection (postCreated and postUpdated, say) would
// reach it in whichever order their feeds finished, a post's update before its creation. A
// Sequence restores the order of the event log across the subscriptions of one connection: a
// response waits until no subscription of the connection still has an earlier event to resolve.
//
// It can tell, because a feed knows the events it has to resolve before any of them is resolved:
// the broker matches each event against each subscription in the order of the log, under its
// lock, and the feed notes the event's position then (reserve), and drops it once it has handed
// its response to its listeners (resolved). A response at position p is released once every
// feed of the connection has nothing noted before p: what it would answer before p is answered
// already, or will never be.

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
// events they answer. Its methods are safe for concurrent use.
type Sequence struct {
	limit    int                             // of the responses held back
	overflow func()                          // called, once, when more would be held
	room     func(ctx context.Context) error // waits until the connection can take more (NewSequence)

	mu        sync.Mutex
	listeners map[*Listener]struct{}
	held      []held // by position
	overflown bool
}

// held is a response that waits for an earlier one.
type held struct {
	l        *Listener
	position int64
	payload  json.RawMessage
	replayed bool // from the log, by a replay (replay.go)
}

// NewSequence returns the sequence of one connection, which holds back limit responses at most:
// past them, overflow is called (the connection should end, as one whose client reads too
// slowly) and nothing is delivered any more. overflow is called with locks held: it must not
// block, nor close a listener. room, if not nil, waits until the connection can take more
// responses (its send queue is not too full), or fails when ctx ends: a replay, which has
// every event at hand, goes at the client's pace rather than overflow it. Its listeners may be
// of several schemas (a connection that outlives a reload subscribes through the new config's).
func NewSequence(limit int, overflow func(), room func(ctx context.Context) error) *Sequence {
	return &Sequence{limit: max(limit, 1), overflow: overflow, room: room}
}

// pace waits until l may be given another replayed response: while a quarter of the responses
// held are l's replayed ones (they wait for an earlier event of another subscription of the
// connection), and until the connection has room. The replay furthest behind never has one
// held, so some replay always goes on.
func (q *Sequence) pace(ctx context.Context, l *Listener) error {
	for {
		q.mu.Lock()
		mine := 0
		for _, h := range q.held {
			if h.l == l && h.replayed {
				mine++
			}
		}
		q.mu.Unlock()
		if mine < max(q.limit/4, 1) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(paceWait):
		}
	}
	if q.room == nil {
		return nil
	}
	return q.room(ctx)
}

// paceWait is how often a replay held back looks again.
const paceWait = 5 * time.Millisecond

// recheck hands what may go since a listener's replay read further; feeds.mu is held.
func (q *Sequence) recheck() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.release()
}

// ListenIn is Listen, with deliver called in the order of the events of every listener of q.
func (s *Schema) ListenIn(q *Sequence, client string, op *Operation, caller posts.Caller, deliver func(json.RawMessage), ended func(error)) (*Listener, error) {
	return s.listen(client, op, caller, deliver, ended, q)
}

// join adds l; feeds.mu is held.
func (q *Sequence) join(l *Listener) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.listeners == nil {
		q.listeners = map[*Listener]struct{}{}
	}
	q.listeners[l] = struct{}{}
}

// leave removes l and what it holds, and hands what waited for it; feeds.mu is held.
func (q *Sequence) leave(l *Listener) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.listeners, l)
	q.held = slices.DeleteFunc(q.held, func(h held) bool { return h.l == l })
	q.release()
}

// arrive takes the response of l to the event at position, and hands what may go; feeds.mu is
// held.
func (q *Sequence) arrive(l *Listener, position int64, payload json.RawMessage) {
	q.take(held{l, position, payload, false})
}

// arriveReplayed is arrive, for a response of l's replay.
func (q *Sequence) arriveReplayed(l *Listener, position int64, payload json.RawMessage) {
	q.take(held{l, position, payload, true})
}

// take is arrive's.
func (q *Sequence) take(h held) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.overflown {
		return
	}
	if len(q.held) >= q.limit {
		q.overflown, q.held = true, nil
		q.overflow()
		return
	}
	i := len(q.held) // after those of the same position: most come in order
	for i > 0 && q.held[i-1].position > h.position {
		i--
	}
	q.held = slices.Insert(q.held, i, h)
	q.release()
}

// release hands the held responses that no listener's feed has an earlier event for; q.mu is
// held.
func (q *Sequence) release() {
	n := 0
	for ; n < len(q.held); n++ {
		if q.waits(q.held[n].position) {
			break
		}
		q.held[n].l.deliver(q.held[n].payload)
	}
	clear(q.held[:n])
	q.held = q.held[n:]
}

// waits says whether a feed of a listener has an event before position to answer.
func (q *Sequence) waits(position int64) bool {
	for l := range q.listeners {
		if l.f.pending.before(position) || l.replay != nil && l.replay.before(position) {
			return true
		}
	}
	return false
}
