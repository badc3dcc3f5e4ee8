package schema

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// turnsToResolve are the turns the subscriptions of the process take to resolve their events,
// live and replayed, and to start: half the machine's cores between them all. A write that a
// thousand distinct subscriptions resolve at once would otherwise make as many goroutines
// runnable, and every other request would wait in the scheduler's queues behind them: beside
// such a write, a normal client's request took 150 ms, the whole write's resolution. The feeds
// that wait for a turn are parked, and a request waits for a few resolutions at most.
var turnsToResolve = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// inTurn runs f in one of turnsToResolve, once it has one, and says whether it did: not when
// ctx ends first. A feed starts in one (Schema.subscribe): graphql-go validates its document
// again, and a thousand distinct subscriptions started at once would be as many goroutines
// doing so.
func inTurn(ctx context.Context, f func()) bool {
	select {
	case turnsToResolve <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-turnsToResolve }()
	f()
	return true
}

// feedTurn is a subscription's part in turnsToResolve. Before graphql-go takes an event of the
// stream, and once the event has its room to be built (budget.hold), take waits until the event
// before has its response, then for a turn: a turn is never held by an event that waits for the
// one before, nor for room, so its holders wait for nothing and a resolution may wait for one.
// The response gives both back (done). A resolution gives its turn back while it waits for the
// store (leave), so that a slow database holds back no other subscription, and takes one again
// for what it builds after.
type feedTurn struct {
	idle chan struct{} // holds a token while none of the stream's events is being resolved

	// Guarded by mu: resolving says an event took the idle token, turn that it holds one of
	// turnsToResolve, away how many of its fields wait for the store (leave), retaking that one
	// of them waits for a turn again (one at most: a second would wait for the one the first
	// took, held until the event's response), and closed that the stream has ended: nothing
	// is taken then.
	mu                                sync.Mutex
	resolving, turn, retaking, closed bool
	away                              int
}

// newFeedTurn is the feedTurn of a stream none of whose events is being resolved.
func newFeedTurn() *feedTurn {
	t := &feedTurn{idle: make(chan struct{}, 1)}
	t.idle <- struct{}{}
	return t
}

type feedTurnKey struct{}

// withFeedTurn returns a context whose subscription takes turns through t.
func withFeedTurn(ctx context.Context, t *feedTurn) context.Context {
	return context.WithValue(ctx, feedTurnKey{}, t)
}

// feedTurnOf is the feedTurn of the subscription of ctx; nil, which takes nothing, for a query.
func feedTurnOf(ctx context.Context) *feedTurn {
	t, _ := ctx.Value(feedTurnKey{}).(*feedTurn)
	return t
}

// take waits until no event of the stream is being resolved, then for a turn, and says how long
// it waited for the turn and whether it has both: not when ctx ends, dropped is closed, or the
// stream has ended, first.
func (t *feedTurn) take(ctx context.Context, dropped <-chan struct{}) (time.Duration, bool) {
	if t == nil {
		return 0, true
	}
	select {
	case <-t.idle:
	case <-ctx.Done():
		return 0, false
	case <-dropped:
		return 0, false
	}
	began := time.Now()
	select {
	case turnsToResolve <- struct{}{}:
	case <-ctx.Done():
		t.idle <- struct{}{}
		return 0, false
	case <-dropped:
		t.idle <- struct{}{}
		return 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		<-turnsToResolve
		return 0, false
	}
	t.resolving, t.turn = true, true
	return time.Since(began), true
}

// leave gives back the turn of the event being resolved, if it holds one, before one of its
// fields calls the store, and returns what takes one again once the call has returned (or ctx
// has ended): once no field of it waits for the store, so that none holds a turn meanwhile.
func (t *feedTurn) leave(ctx context.Context) (back func()) {
	if t == nil {
		return func() {}
	}
	t.mu.Lock()
	t.away++
	if t.turn {
		<-turnsToResolve
		t.turn = false
	}
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		t.away--
		again := t.away == 0 && t.resolving && !t.turn && !t.retaking && !t.closed
		t.retaking = t.retaking || again
		t.mu.Unlock()
		if !again {
			return
		}
		took := false
		select {
		case turnsToResolve <- struct{}{}:
			took = true
		case <-ctx.Done():
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		t.retaking = false
		switch {
		case !took:
		case t.away > 0 || !t.resolving || t.turn || t.closed: // changed while it waited
			<-turnsToResolve
		default:
			t.turn = true
		}
	}
}

// done gives back what the event being resolved holds: its response has come, or, closed, the
// stream has ended and no other will be taken.
func (t *feedTurn) done(closed bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.turn {
		<-turnsToResolve
		t.turn = false
	}
	if t.resolving {
		t.resolving = false
		t.idle <- struct{}{}
	}
	t.away = 0 // every field has returned: one whose store call panicked did not say so
	t.closed = t.closed || closed
}
