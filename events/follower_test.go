package events_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/events/eventstest"
	"github.com/postsedge/caddy-posts/internal/race"
	"github.com/postsedge/caddy-posts/store"
)

// memLog is an event log in memory, for the follower's unit tests: events by position, decided
// up to decided; a read can be made to fail or to wait.
type memLog struct {
	mu      sync.Mutex
	events  map[int64]store.Event
	decided int64
	reads   int
	looks   int // calls of RecoverEvents, which look for pending events
	fail    error
	hold    chan struct{} // a read waits for it, when set
}

const mine, theirs = "mine", "theirs"

func newMemLog() *memLog { return &memLog{events: map[int64]store.Event{}} }

// add logs an event of origin at the next position, decided, and returns it.
func (l *memLog) add(origin string) store.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.decided++
	e := store.Event{Position: l.decided, At: time.Now(), Origin: origin, Kind: store.EventCreated, Post: store.Post{ID: fmt.Sprint("p", l.decided)}}
	l.events[e.Position] = e
	return e
}

// skip decides the next position empty, as a hole's marker does.
func (l *memLog) skip() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.decided++
}

func (l *memLog) Origin() string { return mine }

// set changes the log under its lock.
func (l *memLog) set(change func(*memLog)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	change(l)
}

// readsSoFar is how many reads the log answered.
func (l *memLog) readsSoFar() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reads
}

func (l *memLog) LastPosition(context.Context) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.decided, l.fail
}

func (l *memLog) ReadEvents(ctx context.Context, after int64, limit int) ([]store.Event, int64, error) {
	l.mu.Lock()
	hold, fail := l.hold, l.fail
	l.reads++
	l.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, after, ctx.Err()
		}
	}
	if fail != nil {
		return nil, after, fail
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []store.Event
	upto := after
	for p := after + 1; p <= l.decided && len(out) < limit; p++ {
		if e, kept := l.events[p]; kept { // an expired position will never hold an event
			out = append(out, e)
		}
		upto = p
	}
	return out, upto, nil
}

// ExpireEvents deletes the oldest events, a prefix of the log: those logged before before, and
// all but the newest keep when keep > 0.
func (l *memLog) ExpireEvents(_ context.Context, before time.Time, keep int64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return 0, l.fail
	}
	deleted := 0
	for p := l.oldest(); p != 0 && p <= l.decided; p++ {
		e, kept := l.events[p]
		if !kept {
			continue
		}
		if !e.At.Before(before) && (keep <= 0 || int64(len(l.events)) <= keep) {
			break
		}
		delete(l.events, p)
		deleted++
	}
	return deleted, nil
}

func (l *memLog) Kept(_ context.Context, position int64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, kept := l.events[position]
	return kept, l.fail
}

// KeepsAfter says whether position is decided and every event after it is kept.
func (l *memLog) KeepsAfter(_ context.Context, position int64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if position > l.decided {
		return false, l.fail
	}
	for p := position + 1; p <= l.decided; p++ {
		if _, kept := l.events[p]; !kept {
			return false, l.fail
		}
	}
	return true, l.fail
}

// memLogKey is the key of every memLog.
var memLogKey = []byte("memLog's own key") // 16 bytes

func (l *memLog) Key(context.Context) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return nil, l.fail
	}
	return slices.Clone(memLogKey), nil
}

func (l *memLog) Stats(context.Context) (store.LogStats, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return store.LogStats{}, l.fail
	}
	return store.LogStats{Events: int64(len(l.events)), Oldest: l.oldest(), Last: l.decided}, nil
}

// oldest is the position of the oldest event kept, 0 when there is none; l.mu is held.
func (l *memLog) oldest() int64 {
	var oldest int64
	for p := range l.events {
		if oldest == 0 || p < oldest {
			oldest = p
		}
	}
	return oldest
}

func (l *memLog) RecoverEvents(context.Context, time.Time) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.looks++
	return 0, nil
}

// recoveries is how many times RecoverEvents was called.
func (l *memLog) recoveries() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.looks
}

// waitForRecoveries waits until RecoverEvents was called n times at least, 10 s at most.
func (l *memLog) waitForRecoveries(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); l.recoveries() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d recoveries in 10 s; want %d", l.recoveries(), n)
		}
	}
}

// handed records what a follower hands, in order.
type handed struct {
	mu  sync.Mutex
	got []int64
}

func (h *handed) hand(e store.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, e.Position)
}

func (h *handed) positions() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// waitFor waits until h has handed want, and fails the test if it hands anything else.
func (h *handed) waitFor(t *testing.T, want ...int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := h.positions()
		if slices.Equal(got, want) {
			return
		}
		if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) || time.Now().After(deadline) {
			t.Fatalf("handed %v; want %v", got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// follow starts a follower of log, started when it returns.
func follow(t *testing.T, log *memLog, relay bool) (*events.Follower, *handed) {
	t.Helper()
	h := &handed{}
	f := events.NewFollower(events.FollowerConfig{Log: log, Hand: h.hand, Relay: relay, Interval: 10 * time.Millisecond, Timeout: time.Second})
	eventstest.Follow(t, f)
	<-f.Started()
	return f, h
}

func TestAnOfferThatIsNextIsHandedAtOnce(t *testing.T) {
	log := newMemLog()
	log.add(theirs) // before the start: never handed
	f, h := follow(t, log, false)
	reads := log.readsSoFar()
	for range 3 {
		f.Offer(log.add(mine))
	}
	if got := h.positions(); !slices.Equal(got, []int64{2, 3, 4}) {
		t.Errorf("handed %v; want 2, 3, 4 before Offer returned", got)
	}
	if n := log.readsSoFar() - reads; n != 0 {
		t.Errorf("%d reads; want none", n)
	}
}

func TestAnOfferBehindAnotherInstancesEventWaitsForTheRead(t *testing.T) {
	for _, relay := range []bool{true, false} {
		t.Run(fmt.Sprint("relay ", relay), func(t *testing.T) {
			log := newMemLog()
			f, h := follow(t, log, relay)
			log.add(theirs)
			f.Offer(log.add(mine))
			if relay {
				h.waitFor(t, 1, 2)
			} else { // the other instance's event is read, and not handed
				h.waitFor(t, 2)
			}
		})
	}
}

func TestOffersInEitherOrderAreHandedInTheLogsOrder(t *testing.T) {
	log := newMemLog()
	f, h := follow(t, log, false)
	a, b, c := log.add(mine), log.add(mine), log.add(mine)
	hold := make(chan struct{})
	log.set(func(l *memLog) { l.hold = hold }) // no read helps: the offers alone must do it
	f.Offer(c)
	f.Offer(a)
	f.Offer(b)
	h.waitFor(t, 1, 2, 3)
	close(hold)
}

func TestAnEventReadAlreadyIsNotHandedAgain(t *testing.T) {
	log := newMemLog()
	f, h := follow(t, log, true)
	e := log.add(mine)
	h.waitFor(t, 1) // read before its writer offered it
	f.Offer(e)
	f.Offer(log.add(mine))
	h.waitFor(t, 1, 2)
}

func TestAReadThatHangsHoldsBackOnlyWhatIsBehindIt(t *testing.T) {
	log := newMemLog()
	f, h := follow(t, log, true)
	hold := make(chan struct{})
	log.set(func(l *memLog) { l.hold = hold })
	time.Sleep(30 * time.Millisecond) // a read is under way, and hangs
	f.Offer(log.add(mine))
	h.waitFor(t, 1) // handed while the read hangs
	log.add(theirs)
	f.Offer(log.add(mine)) // behind the other instance's event, which the hanging read has not seen
	time.Sleep(30 * time.Millisecond)
	if got := h.positions(); !slices.Equal(got, []int64{1}) {
		t.Fatalf("handed %v while the read hangs; want 1 alone", got)
	}
	log.set(func(l *memLog) { l.hold = nil })
	close(hold)
	h.waitFor(t, 1, 2, 3)
}

func TestAFailedReadIsTriedAgain(t *testing.T) {
	log := newMemLog()
	f, h := follow(t, log, true)
	log.set(func(l *memLog) { l.fail = errors.New("the database is down") })
	log.add(theirs)
	f.Offer(log.add(mine))
	time.Sleep(50 * time.Millisecond)
	if got := h.positions(); len(got) != 0 {
		t.Fatalf("handed %v while reads fail", got)
	}
	log.set(func(l *memLog) { l.fail = nil })
	h.waitFor(t, 1, 2)
}

func TestOffersBeforeTheStartAreHandedFromTheirPosition(t *testing.T) {
	log := newMemLog()
	log.add(theirs)
	log.fail = errors.New("not yet")
	h := &handed{}
	f := events.NewFollower(events.FollowerConfig{Log: log, Hand: h.hand, Interval: 10 * time.Millisecond})
	e := log.add(mine) // written before the follower could read where the log ends
	f.Offer(e)
	eventstest.Follow(t, f)
	time.Sleep(30 * time.Millisecond)
	log.set(func(l *memLog) { l.fail = nil })
	<-f.Started()
	h.waitFor(t, 2)
}

// followRecovering starts a follower of log that relays, with recoverAfter and recoverEvery,
// started when it returns.
func followRecovering(t *testing.T, log *memLog, recoverAfter, recoverEvery time.Duration) (*events.Follower, *handed) {
	t.Helper()
	h := &handed{}
	f := events.NewFollower(events.FollowerConfig{Log: log, Hand: h.hand, Relay: true, Interval: 10 * time.Millisecond, Timeout: time.Second,
		RecoverAfter: recoverAfter, RecoverEvery: recoverEvery})
	eventstest.Follow(t, f)
	<-f.Started()
	return f, h
}

// A follower looks for pending events at its start and every RecoverEvery, and, once another
// instance it had events of has gone quiet, every RecoverAfter: one killed in a write left no
// trace in the log. At idle, and while the other instance writes on, no more than before.
func TestAFollowerLooksForPendingEventsOnceAnotherInstanceHasGoneQuiet(t *testing.T) {
	const after = 100 * time.Millisecond
	log := newMemLog()
	_, h := followRecovering(t, log, after, time.Hour)
	log.waitForRecoveries(t, 1) // the start's
	time.Sleep(10 * after)
	if n := log.recoveries(); n != 1 {
		t.Errorf("%d recoveries at idle; want the start's alone", n)
	}
	var want []int64
	for range 20 {
		want = append(want, log.add(theirs).Position)
		h.waitFor(t, want...)
		time.Sleep(after / 5)
	}
	if n := log.recoveries(); n != 1 && !race.Enabled {
		t.Errorf("%d recoveries while the other instance wrote every %v; want the start's alone", n, after/5)
	}
	log.waitForRecoveries(t, log.recoveries()+3) // every RecoverAfter, from RecoverAfter after its last event
}

// RecoverEvery after the last event of an instance that went quiet, the follower looks for
// pending events every RecoverEvery again.
func TestAFollowerForgetsAnInstanceQuietForRecoverEvery(t *testing.T) {
	const after, every = 50 * time.Millisecond, 600 * time.Millisecond
	log := newMemLog()
	_, h := followRecovering(t, log, after, every)
	log.waitForRecoveries(t, 1)
	log.add(theirs)
	h.waitFor(t, 1)
	handed := time.Now()
	log.waitForRecoveries(t, log.recoveries()+3)
	time.Sleep(time.Until(handed.Add(every + 3*after)))
	n := log.recoveries()
	time.Sleep(2 * every)
	if n := log.recoveries() - n; n > 3 && !race.Enabled {
		t.Errorf("%d recoveries in two RecoverEvery after the other instance was forgotten; want those of every RecoverEvery alone, 3 at most", n)
	}
}

// A read that passes over a position (a hole's marker: its writer took it and never logged its
// event) has the follower look for pending events RecoverAfter later.
func TestAReadThatPassesOverAPositionLooksForPendingEvents(t *testing.T) {
	log := newMemLog()
	f, h := followRecovering(t, log, 50*time.Millisecond, time.Hour)
	log.waitForRecoveries(t, 1)
	f.Offer(log.add(mine))
	h.waitFor(t, 1)
	log.skip()
	f.Offer(log.add(mine))
	h.waitFor(t, 1, 3)
	log.waitForRecoveries(t, 2)
}
