//go:build long && !race

// A bound on time over ten thousand events, so outside the race detector, and with the tag long
// (make test's non-race step sets it; the one-minute gate, go test ./..., leaves it out).

package events_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/events/eventstest"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// The follower's reads cost what they read, not what the log keeps: on a store that reads its
// log through an index (the embedded store's primary key; MongoDB's _id index), events written
// by another instance reach this one's subscribers within one interval and a read, with 10,000
// events in the log as with none. FerretDB v1, which scans the collection at each read, does not
// keep this bound (see docs/scaling.md).
func TestTheRelayLagStaysWithinThreeIntervalsAtTenThousandEvents(t *testing.T) {
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	at := time.Now().UTC().Truncate(time.Millisecond)
	write := func(n int) {
		t.Helper()
		for range n {
			if _, err := st.InsertPost(t.Context(), store.Post{ID: store.NewID(time.Now()), UserID: "alice", Title: "t", CreatedAt: at, UpdatedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(10_000)

	const interval = 100 * time.Millisecond
	var (
		mu     sync.Mutex
		handed = map[int64]time.Time{}
	)
	f := events.NewFollower(events.FollowerConfig{Log: st, Relay: true, Interval: interval, Hand: func(e store.Event) {
		mu.Lock()
		handed[e.Position] = time.Now()
		mu.Unlock()
	}})
	eventstest.Follow(t, f)
	<-f.Started()

	// Written as another instance's writes are: never offered, read from the log alone.
	written := map[int64]time.Time{}
	for range 60 {
		e, err := st.InsertPost(t.Context(), store.Post{ID: store.NewID(time.Now()), UserID: "alice", Title: "t", CreatedAt: at, UpdatedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		written[e.Position] = time.Now()
		time.Sleep(interval / 3)
	}
	time.Sleep(3 * interval)
	mu.Lock()
	defer mu.Unlock()
	var lags []time.Duration
	for p, w := range written {
		h, ok := handed[p]
		if !ok {
			t.Fatalf("the event at %d was never handed", p)
		}
		lags = append(lags, h.Sub(w))
	}
	slices.Sort(lags)
	p50, p99 := lags[len(lags)/2], lags[len(lags)*99/100]
	t.Logf("lag of %d events at 10,000 in the log: p50 %v, p99 %v", len(lags), p50, p99)
	if p99 > 3*interval {
		t.Errorf("p99 %v; want within 3 intervals, %v", p99, 3*interval)
	}
}
