package mongo_test

import (
	"context"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// A follower that starts while another instance's write has taken its position and not logged
// its event yet hands that event: the write is acknowledged after the start, to subscribers
// there by then. (It started past the position, and never read it: a restarted instance's
// subscribers missed creates acknowledged 2 s after they subscribed.)
func TestAFollowerStartingDuringAWriteHandsItsEvent(t *testing.T) {
	t.Parallel() // on a server of its own, and sets none of the package's waits (SetWaits)
	k := newSkewed(t)
	if _, err := k.slow.InsertPost(t.Context(), post(1)); err != nil {
		t.Fatal(err)
	}
	held := mongotest.Fault{Command: "insert", Collection: mongo.EventsCollection, Delay: time.Second}
	k.proxy.Arm(held)
	written := make(chan store.Event, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		e, err := k.slow.InsertPost(ctx, post(2))
		if err != nil {
			t.Error(err)
		}
		written <- e
	}()
	untilHit(t, k.proxy, held, 0) // its position is taken, its event on its way
	handed := make(chan store.Event, 10)
	f := events.NewFollower(events.FollowerConfig{Log: k.ahead, Relay: true, Hand: func(e store.Event) { handed <- e }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	select {
	case <-f.Started():
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not start")
	}
	e := <-written // acknowledged now, to subscribers that came after the start
	select {
	case got := <-handed:
		if got.Position != e.Position || got.Post.ID != e.Post.ID {
			t.Errorf("the follower handed %d (%s); want the write's event at %d (%s)", got.Position, got.Post.ID, e.Position, e.Post.ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the event at %d, acknowledged after the follower started, was never handed", e.Position)
	}
}

// A follower that starts on a slow database hands nothing written before its start, even when
// the expiry moves its cut while the start reads the log, and its second read of the counter
// outlasts the start's timeout: the start's read failed, and is tried again. (ReadEvents
// answered that the log was decided up to the cut read first, with no error, and the start
// handed from there: up to a page of earlier events at once to its first subscribers, whose
// feeds fell behind; the model's restarted instance on a database 0.3-3 s a command, seed
// 303343087.)
func TestAFollowerStartingOnASlowDatabaseHandsNothingWrittenBefore(t *testing.T) {
	f := newFaulty(t)
	if _, err := f.direct.Key(t.Context()); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 10; n++ {
		if _, err := f.direct.InsertPost(t.Context(), post(n)); err != nil {
			t.Fatal(err)
		}
	}
	// The start's commands, in order: the counter (Key), the oldest event and the counter
	// (Stats), the events after a page back (ReadEvents, held 3 s while the expiry cuts), and the
	// counter once more for the gap that read finds (held past the start's timeout, which leaves
	// the first three commands and the held read 2 s).
	const timeout = 5 * time.Second
	read := mongotest.Fault{Command: "find", Collection: mongo.EventsCollection, Delay: 3 * time.Second}
	for _, fault := range []mongotest.Fault{
		{Command: "find", Collection: mongo.CountersCollection, Delay: time.Millisecond},
		{Command: "find", Collection: mongo.EventsCollection, Delay: time.Millisecond},
		{Command: "find", Collection: mongo.CountersCollection, Delay: time.Millisecond},
		read,
		{Command: "find", Collection: mongo.CountersCollection, Delay: timeout},
	} {
		f.proxy.Arm(fault)
	}
	handed := make(chan store.Event, 10)
	follower := events.NewFollower(events.FollowerConfig{Log: f.through, Relay: true, Interval: 20 * time.Millisecond, Timeout: timeout,
		Hand: func(e store.Event) { handed <- e }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		follower.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	untilHit(t, f.proxy, read, 0)
	if _, err := f.direct.ExpireEvents(t.Context(), time.Time{}, 5); err != nil {
		t.Fatal(err)
	}
	select {
	case <-follower.Started():
	case <-time.After(4 * timeout):
		t.Fatal("the follower did not start")
	}
	if at, _ := follower.Handed(); at != 10 {
		t.Errorf("the follower started at %d; want the log's end, 10", at)
	}
	select {
	case e := <-handed:
		t.Errorf("the follower handed the event at %d, written before it started", e.Position)
	case <-time.After(time.Second):
	}
}
