package schema

import (
	"context"
	"runtime"
	"sync"
)

// turnsToResolve are the turns the live subscriptions of the process take to resolve their
// events: half the machine's cores between them all. A write that a thousand subscriptions
// resolve at once would otherwise make as many goroutines runnable, and every other request
// would wait in the scheduler's queues behind them: beside such a write, a normal client's
// request took 150 ms, the whole write's resolution. The feeds that wait for a turn are parked,
// and a request waits for a few resolutions at most. A replay takes one for each event too,
// once it has one of turnsToReplay.
var turnsToResolve = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// inTurn runs f in one of turnsToResolve, once it has one, and says whether it did: not when
// ctx ends first. A feed starts in one (Schema.subscribe): graphql-go validates the document
// again, and a client's hundred subscribes at once would be as many goroutines doing so.
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
// stream, take waits until the event before has its response, then for a turn: a turn is held
// for one resolution, never by an event that waits for the one before. The response gives both
// back (done); the resolution gives the turn back when it calls the store (leave), so that a
// slow database holds back no other subscription, and goes on without one.
type feedTurn struct {
	idle chan struct{} // holds a token while none of the stream's events is being resolved

	// Guarded by mu: resolving says an event took the idle token, turn that it holds one of
	// turnsToResolve, and closed that the stream has ended: nothing is taken then.
	mu                      sync.Mutex
	resolving, turn, closed bool
}

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

// take waits until no event of the stream is being resolved, then for a turn, and says whether
// it has both: not when ctx ends, or dropped is closed, first.
func (t *feedTurn) take(ctx context.Context, dropped <-chan struct{}) bool {
	if t == nil {
		return true
	}
	select {
	case <-t.idle:
	case <-ctx.Done():
		return false
	case <-dropped:
		return false
	}
	select {
	case turnsToResolve <- struct{}{}:
	case <-ctx.Done():
		t.idle <- struct{}{}
		return false
	case <-dropped:
		t.idle <- struct{}{}
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		<-turnsToResolve
		return false
	}
	t.resolving, t.turn = true, true
	return true
}

// leave gives back the turn of the event being resolved, if it holds one, before it calls the
// store.
func (t *feedTurn) leave() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.turn {
		<-turnsToResolve
		t.turn = false
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
	t.closed = t.closed || closed
}
