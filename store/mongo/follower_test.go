package mongo_test

import (
	"context"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/events/eventstest"
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
	eventstest.Follow(t, f)
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
