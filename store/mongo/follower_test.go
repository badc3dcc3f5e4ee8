package mongo_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/events/eventstest"
	"github.com/postsedge/caddy-posts/internal/race"
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

// An instance killed between its event's position and the event's insert leaves a hole, and the
// event pending in the post. A follower that had no event of that instance reads past the hole's
// marker once a later event shows it, and looks for pending events RecoverAfter later
// (events.Follower): the event is handed within seconds, not at the look of every minute.
func TestAFollowerThatReadsPastAHoleLogsThePendingEventOfItsWriter(t *testing.T) {
	f := newFaulty(t)
	if _, err := call(t, func(ctx context.Context) (store.Event, error) { return f.through.InsertPost(ctx, firstPost) }); err != nil {
		t.Fatal(err)
	}
	handed := make(chan store.Event, 10)
	follower := events.NewFollower(events.FollowerConfig{Log: f.direct, Relay: true, Interval: 20 * time.Millisecond, RecoverAfter: time.Second,
		Hand: func(e store.Event) { handed <- e }})
	eventstest.Follow(t, follower)
	<-follower.Started()
	cut := mongotest.Fault{Command: "insert", Collection: mongo.EventsCollection}
	f.proxy.Arm(cut)
	if _, err := call(t, func(ctx context.Context) (store.Event, error) {
		return f.through.UpdatePost(ctx, firstPost.ID, "alice", store.AnyVersion, update("v2"))
	}); err == nil || f.proxy.Hits(cut) != 1 {
		t.Fatalf("the update was not cut before its event's insert: %v", err)
	}
	killed := time.Now()
	second := firstPost
	second.ID = "67d446000000000000000002"
	e, err := f.direct.InsertPost(t.Context(), second)
	if err != nil {
		t.Fatal(err)
	}
	follower.Offer(e)
	var got []string
	for len(got) < 2 {
		select {
		case e := <-handed:
			got = append(got, fmt.Sprintf("%s %s v%d", e.Kind, e.Post.ID, e.Post.Version))
		case <-time.After(time.Minute):
			t.Fatalf("handed %v in a minute; want the second post's create, then the update", got)
		}
	}
	took := time.Since(killed)
	if want := []string{"created " + second.ID + " v1", "updated " + firstPost.ID + " v2"}; !slices.Equal(got, want) {
		t.Errorf("handed %v; want %v", got, want)
	}
	// Two RecoverAfters at most (one after the start, then the hole's), a recovery's commands
	// and a read: 1.99-2.01 s in 3 runs on a loaded 2-core host. Before, at the look of every
	// minute: 60 s.
	if bound := 15 * time.Second; !race.Enabled && took > bound {
		t.Errorf("the update was handed %v after its writer was killed; want it within %v", took, bound)
	}
	t.Logf("the update was handed %v after its writer was killed", took.Round(time.Millisecond))
}
