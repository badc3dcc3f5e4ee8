package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// memLog is an EventLog in memory, for this package's tests; failing makes every call fail.
type memLog struct {
	mu      sync.Mutex
	events  []store.Event
	failing bool
	queries int
}

var errDown = errors.New("the log is down")

func (l *memLog) RecordEvent(_ context.Context, e store.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failing {
		return errDown
	}
	l.events = append(l.events, e)
	return nil
}

func (l *memLog) EventsSince(_ context.Context, since time.Time, limit int) ([]store.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queries++
	if l.failing {
		return nil, errDown
	}
	var out []store.Event
	for _, e := range l.events {
		if !e.At.Before(since) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b store.Event) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID)) })
	return out[:min(len(out), limit)], nil
}

func (l *memLog) ExpireEvents(_ context.Context, before time.Time) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.events)
	l.events = slices.DeleteFunc(l.events, func(e store.Event) bool { return e.At.Before(before) })
	return n - len(l.events), nil
}

func (l *memLog) setFailing(f bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failing = f
}

// handed collects what a relay hands over.
type handed struct {
	mu     sync.Mutex
	events []store.Event
}

func (h *handed) hand(e store.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

func (h *handed) ids() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []string{}
	for _, e := range h.events {
		out = append(out, fmt.Sprintf("%s:%s:%d", e.Post.ID, e.Kind, e.Post.Version))
	}
	return out
}

// waitFor waits until h holds n events, or fails the test after 5s.
func (h *handed) waitFor(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if ids := h.ids(); len(ids) >= n {
			time.Sleep(30 * time.Millisecond) // and nothing more comes
			return h.ids()
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("handed %v; want %d events", h.ids(), n)
	return nil
}

// startRelay runs a relay on log, polling every 5ms with a look-back of 50ms and pages of page.
func startRelay(t *testing.T, log *memLog, page int) (*Relay, *handed) {
	t.Helper()
	h := &handed{}
	r := NewRelay(RelayConfig{Log: log, Hand: h.hand, Interval: 5 * time.Millisecond,
		Source: &Poll{Log: log, Interval: 5 * time.Millisecond, Lookback: 50 * time.Millisecond, Page: page}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	time.Sleep(10 * time.Millisecond) // its start is before what the test records
	return r, h
}

// perPost is ids ("post:kind:version") grouped by post, each post's in the order handed.
func perPost(ids []string) []string {
	out := slices.Clone(ids)
	slices.SortStableFunc(out, func(a, b string) int {
		pa, _, _ := strings.Cut(a, ":")
		pb, _, _ := strings.Cut(b, ":")
		return strings.Compare(pa, pb)
	})
	return out
}

// other records, as another instance would, kind of post at version at at.
func other(log *memLog, at time.Time, kind, post string, version int64) {
	_ = log.RecordEvent(context.Background(), store.Event{ID: store.NewID(at), At: at.UTC().Truncate(time.Millisecond),
		Origin: "other", Kind: kind, Post: store.Post{ID: post, UserID: "alice", Version: version}})
}

func TestARelayHandsOverEveryEventOnce(t *testing.T) {
	t.Run("its own events once, from its record, and another's once, though read again and again", func(t *testing.T) {
		log := &memLog{}
		r, h := startRelay(t, log, DefaultPage)
		if err := r.Record(context.Background(), store.EventCreated, store.Post{ID: "p1", Version: 1}); err != nil {
			t.Fatal(err)
		}
		other(log, time.Now(), store.EventCreated, "p2", 1)
		got := h.waitFor(t, 2)
		time.Sleep(100 * time.Millisecond) // two look-back windows of polls
		// In either order: two posts' events of one millisecond have none between them.
		if got = h.ids(); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"p1:created:1", "p2:created:1"}) {
			t.Errorf("handed %v; want p1's create and p2's, once each", got)
		}
	})
	t.Run("nothing recorded before it started", func(t *testing.T) {
		log := &memLog{}
		other(log, time.Now().Add(-20*time.Millisecond), store.EventCreated, "old", 1)
		_, h := startRelay(t, log, DefaultPage)
		other(log, time.Now(), store.EventCreated, "new", 1)
		if got := h.waitFor(t, 1); !slices.Equal(got, []string{"new:created:1"}) {
			t.Errorf("handed %v; want only the event after the start", got)
		}
	})
	t.Run("more events than a page, all of them once", func(t *testing.T) {
		log := &memLog{}
		_, h := startRelay(t, log, 10)
		at := time.Now()
		for i := range 35 {
			other(log, at.Add(time.Duration(i%4)*time.Millisecond), store.EventCreated, fmt.Sprint("p", i), 1)
		}
		if got := h.waitFor(t, 35); len(got) != 35 {
			t.Errorf("handed %d events; want 35", len(got))
		}
	})
	t.Run("what was recorded while the log failed, once it answers again", func(t *testing.T) {
		log := &memLog{}
		r, h := startRelay(t, log, 10)
		other(log, time.Now(), store.EventCreated, "before", 1)
		h.waitFor(t, 1)
		log.setFailing(true)
		time.Sleep(100 * time.Millisecond) // longer than the look-back
		_ = r.Record(context.Background(), store.EventCreated, store.Post{ID: "local", Version: 1})
		if got := h.waitFor(t, 2); got[1] != "local:created:1" {
			t.Errorf("while the log fails, handed %v; want the local write too", got)
		}
		log.mu.Lock()
		log.failing = false
		for i := range 25 { // written by another instance meanwhile: the log answers again with them
			at := time.Now().Add(-90 * time.Millisecond)
			log.events = append(log.events, store.Event{ID: store.NewID(at), At: at.UTC().Truncate(time.Millisecond), Origin: "other", Kind: store.EventCreated, Post: store.Post{ID: fmt.Sprint("meanwhile", i), Version: 1}})
		}
		log.mu.Unlock()
		if got := h.waitFor(t, 27); len(got) != 27 {
			t.Errorf("handed %d events; want the 2 before and the 25 written meanwhile", len(got))
		}
	})
}

func TestARelayKeepsEachPostsVersionOrder(t *testing.T) {
	t.Run("a create and its update in one batch, the update's clock behind", func(t *testing.T) {
		log := &memLog{}
		_, h := startRelay(t, log, DefaultPage)
		now := time.Now()
		recorded := &memLog{}
		other(recorded, now.Add(-3*time.Millisecond), store.EventUpdated, "p", 2)
		other(recorded, now, store.EventCreated, "p", 1)
		other(recorded, now.Add(-5*time.Millisecond), store.EventDeleted, "p", 0)
		log.mu.Lock() // all three visible to one poll
		log.events = recorded.events
		log.mu.Unlock()
		if got := h.waitFor(t, 3); !slices.Equal(got, []string{"p:created:1", "p:updated:2", "p:deleted:0"}) {
			t.Errorf("handed %v; want the create, the update, the delete", got)
		}
	})
	t.Run("an older version read after a newer one is dropped", func(t *testing.T) {
		log := &memLog{}
		r, h := startRelay(t, log, DefaultPage)
		_ = r.Record(context.Background(), store.EventUpdated, store.Post{ID: "p", Version: 3})
		h.waitFor(t, 1)
		other(log, time.Now().Add(-10*time.Millisecond), store.EventUpdated, "p", 2) // committed late
		other(log, time.Now(), store.EventUpdated, "p", 4)
		if got := h.waitFor(t, 2); !slices.Equal(got, []string{"p:updated:3", "p:updated:4"}) {
			t.Errorf("handed %v; want versions 3 and 4 only", got)
		}
	})
	t.Run("a local update goes before its post's next version that a full page of another instance holds", func(t *testing.T) {
		h := &handed{}
		r := NewRelay(RelayConfig{Log: &memLog{}, Hand: h.hand})
		_ = r.Record(context.Background(), store.EventUpdated, store.Post{ID: "p", Version: 2})
		page := &memLog{}
		at := time.Now().Add(5 * time.Millisecond)
		other(page, at, store.EventUpdated, "p", 3)
		other(page, at.Add(time.Millisecond), store.EventCreated, "q", 1)
		last := page.events[1].At
		r.deliver(Batch{Events: page.events, Floor: last}) // a full page: more to read
		r.deliver(Batch{Floor: last, Upto: time.Now()})
		if got := h.ids(); !slices.Equal(got, []string{"p:updated:2", "p:updated:3", "q:created:1"}) {
			t.Errorf("handed %v; want p's versions 2 and 3, then q", got)
		}
	})
	t.Run("while reads fail, a local update waits for the version before it, written through another instance", func(t *testing.T) {
		h := &handed{}
		r := NewRelay(RelayConfig{Log: &memLog{}, Hand: h.hand})
		_ = r.Record(context.Background(), store.EventCreated, store.Post{ID: "p", Version: 1})
		r.deliver(Batch{Upto: time.Now()})
		earlier := &memLog{}
		other(earlier, time.Now(), store.EventUpdated, "p", 2) // not read before the store went down
		_ = r.Record(context.Background(), store.EventUpdated, store.Post{ID: "p", Version: 3})
		_ = r.Record(context.Background(), store.EventDeleted, store.Post{ID: "p"})
		_ = r.Record(context.Background(), store.EventCreated, store.Post{ID: "q", Version: 1})
		r.deliver(Batch{Err: errDown})
		if got := h.ids(); !slices.Equal(got, []string{"p:created:1", "q:created:1"}) {
			t.Errorf("while reads fail, handed %v; want p's create, then q's (p's update and delete wait)", got)
		}
		fresh := time.Now().UTC()
		_ = r.Record(context.Background(), store.EventUpdated, store.Post{ID: "r", Version: 2, CreatedAt: fresh}) // created elsewhere, unread
		r.deliver(Batch{Err: errDown})
		if got := h.ids(); len(got) != 2 {
			t.Errorf("while reads fail, handed %v; want r's update to wait for its create", got)
		}
		other(earlier, fresh, store.EventCreated, "r", 1)
		r.deliver(Batch{Events: earlier.events, Upto: time.Now()})
		// Each post's in order; two posts' events of one millisecond have no order between them.
		if got := h.ids(); !slices.Equal(perPost(got), perPost([]string{"p:created:1", "q:created:1", "p:updated:2", "p:updated:3", "p:deleted:0", "r:created:1", "r:updated:2"})) {
			t.Errorf("once a read succeeds, handed %v; want p's versions 2 and 3 and its deletion after, then r's create and update", got)
		}
	})
	t.Run("while reads fail, a local deletion waits: an update written elsewhere before it may be unread", func(t *testing.T) {
		h := &handed{}
		r := NewRelay(RelayConfig{Log: &memLog{}, Hand: h.hand})
		_ = r.Record(context.Background(), store.EventCreated, store.Post{ID: "p", Version: 1})
		_ = r.Record(context.Background(), store.EventUpdated, store.Post{ID: "p", Version: 2})
		r.deliver(Batch{Upto: time.Now()})
		earlier := &memLog{}
		other(earlier, time.Now(), store.EventUpdated, "p", 3) // not read before the store went down
		_ = r.Record(context.Background(), store.EventDeleted, store.Post{ID: "p"})
		r.deliver(Batch{Err: errDown})
		if got := h.ids(); !slices.Equal(got, []string{"p:created:1", "p:updated:2"}) {
			t.Errorf("while reads fail, handed %v; want the deletion to wait", got)
		}
		r.deliver(Batch{Events: earlier.events, Upto: time.Now()})
		if got := h.ids(); !slices.Equal(got, []string{"p:created:1", "p:updated:2", "p:updated:3", "p:deleted:0"}) {
			t.Errorf("once a read succeeds, handed %v; want version 3, then the deletion", got)
		}
	})
	t.Run("nothing of a post after its deletion", func(t *testing.T) {
		log := &memLog{}
		r, h := startRelay(t, log, DefaultPage)
		_ = r.Record(context.Background(), store.EventDeleted, store.Post{ID: "p"})
		h.waitFor(t, 1)
		other(log, time.Now().Add(-10*time.Millisecond), store.EventUpdated, "p", 7)
		time.Sleep(60 * time.Millisecond)
		if got := h.ids(); !slices.Equal(got, []string{"p:deleted:0"}) {
			t.Errorf("handed %v; want the deletion only", got)
		}
	})
}

func TestARelayRemembersOnlyItsWindow(t *testing.T) {
	log := &memLog{}
	r, h := startRelay(t, log, DefaultPage)
	for i := range 50 {
		other(log, time.Now(), store.EventCreated, fmt.Sprint("p", i), 1)
	}
	h.waitFor(t, 50)
	time.Sleep(150 * time.Millisecond) // three look-backs
	r.mu.Lock()
	seen, posts := len(r.seen), len(r.posts)
	r.mu.Unlock()
	if seen != 0 || posts != 0 {
		t.Errorf("after the window passed, it remembers %d ids and %d posts; want none", seen, posts)
	}
}

func TestARelayIsStalledOnlyAfterItsBound(t *testing.T) {
	log := &memLog{}
	r := NewRelay(RelayConfig{Log: log, Hand: func(store.Event) {}, Interval: time.Second})
	if stalled, _ := r.Stalled(); stalled {
		t.Error("a new relay is stalled")
	}
	r.last.Store(time.Now().Add(-9 * time.Second).UnixNano())
	if stalled, _ := r.Stalled(); stalled {
		t.Error("stalled after 9s at an interval of 1s; the bound is 10s")
	}
	r.last.Store(time.Now().Add(-11 * time.Second).UnixNano())
	if stalled, ago := r.Stalled(); !stalled || ago < 11*time.Second {
		t.Errorf("after 11s: stalled %v, %s ago; want stalled", stalled, ago)
	}
}
