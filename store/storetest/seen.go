package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/words"
)

// The behaviours of store.Seen: each read notes the position of the event log it reflects.

// seenTests are the behaviours of the positions of reads; aheadOK says a read may reflect
// events after its position too (Options.ReadsMayRunAhead).
func seenTests(aheadOK bool) []struct {
	name string
	test func(*testing.T, Open)
} {
	return []struct {
		name string
		test func(*testing.T, Open)
	}{
		{"each read notes the position of the log it reflects", testReadsNoteTheirPosition},
		{"a resume after a position misses nothing while every later event is kept", testKeepsAfter},
		{"beside writers, a read reflects every event up to its position" + map[bool]string{false: ", and none after"}[aheadOK],
			func(t *testing.T, open Open) { testReadsBesideWriters(t, open, aheadOK) }},
	}
}

// seenBy reads with read in a context of store.WithSeen and returns the position noted.
func seenBy(t *testing.T, name string, read func(context.Context) error) int64 {
	t.Helper()
	ctx, seen := store.WithSeen(t.Context())
	if err := read(ctx); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	position, noted := seen.Position()
	if !noted {
		t.Fatalf("%s noted no position", name)
	}
	return position
}

func testReadsNoteTheirPosition(t *testing.T, open Open) {
	s := open(t)
	list := func(f store.Filter) func(context.Context) error {
		return func(ctx context.Context) error { _, err := s.ListPosts(ctx, f); return err }
	}
	get := func(n int) func(context.Context) error {
		return func(ctx context.Context) error { _, err := s.GetPost(ctx, id(n)); return err }
	}
	reads := map[string]func(context.Context) error{
		"a list":                   list(store.Filter{Limit: 10}),
		"a list of one user's":     list(store.Filter{UserID: "alice", Limit: 10}),
		"a list oldest first":      list(store.Filter{Oldest: true, Limit: 10}),
		"a page that is empty":     list(store.Filter{Since: base.Add(time.Hour), Limit: 10}),
		"a search":                 list(store.Filter{Search: words.Parse("post"), Limit: 10}),
		"a search oldest first":    list(store.Filter{Search: words.Parse("post"), Oldest: true, Limit: 10}),
		"a search that finds none": list(store.Filter{Search: words.Parse("quokka "), Limit: 10}),
	}
	check := func(want int64, also map[string]func(context.Context) error) {
		t.Helper()
		for name, read := range maps.All(reads) {
			if got := seenBy(t, name, read); got != want {
				t.Errorf("%s noted position %d; want %d, the last event's", name, got, want)
			}
		}
		for name, read := range also {
			if got := seenBy(t, name, read); got != want {
				t.Errorf("%s noted position %d; want %d, the last event's", name, got, want)
			}
		}
	}
	check(0, nil) // a log that never held an event

	var last int64
	for n := 1; n <= 3; n++ {
		e, err := s.InsertPost(t.Context(), newPost(n, "alice", base.Add(time.Duration(n)*time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		last = e.Position
	}
	check(last, map[string]func(context.Context) error{"a get": get(2)})

	e, err := s.UpdatePost(t.Context(), id(2), "alice", store.AnyVersion, store.Update{Title: ptr("post two"), UpdatedAt: base})
	if err != nil {
		t.Fatal(err)
	}
	check(e.Position, map[string]func(context.Context) error{"a get": get(2)})

	// A get of no post shows it absent at its position: a subscription from there gets its
	// creation. A caller that asked for no position gets none noted.
	ctx, seen := store.WithSeen(t.Context())
	if _, err := s.GetPost(ctx, id(99)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a get of no post: %v", err)
	}
	if got, noted := seen.Position(); !noted || got != e.Position {
		t.Errorf("a get that found no post noted position %d (%v); want %d, the last event's", got, noted, e.Position)
	}
	if store.SeenIn(t.Context()) != nil {
		t.Error("a context without WithSeen has a Seen")
	}
}

// testReadsBesideWriters reads every post, by list and by search, while writers create, update
// and delete posts, and checks each read against the log: the posts as the events up to the
// read's position leave them. A read may not miss any of those events (a post created or updated
// at or before the position, at an older version or absent, or one deleted then, present); with
// aheadOK it may show later ones, which the log holds after the position.
func testReadsBesideWriters(t *testing.T, open Open, aheadOK bool) {
	s := open(t)
	log := eventLog(t, s)
	const writers, posts = 4, 40
	type seenRead struct {
		name     string
		position int64
		got      map[string]int64 // id → version
	}
	var (
		writing, reading sync.WaitGroup
		mu               sync.Mutex
		reads            []seenRead
	)
	for w := range writers {
		writing.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range posts {
				n := w*posts + i
				if _, err := s.InsertPost(t.Context(), newPost(n, "alice", base.Add(time.Duration(n)*time.Millisecond))); err != nil {
					t.Error(err)
					return
				}
				old := w*posts + r.IntN(i+1)
				if r.IntN(3) == 0 {
					_, _ = s.DeletePost(t.Context(), id(old), "alice", store.AnyVersion) // may be gone
				} else {
					_, _ = s.UpdatePost(t.Context(), id(old), "alice", store.AnyVersion, store.Update{Title: ptr(fmt.Sprintf("post %d again", old)), UpdatedAt: base})
				}
			}
		})
	}
	stop := make(chan struct{})
	for reader, f := range []store.Filter{{Limit: writers * posts}, {Search: words.Parse("post"), Limit: writers * posts}} {
		reading.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, seen := store.WithSeen(t.Context())
				found, err := s.ListPosts(ctx, f)
				if err != nil {
					t.Error(err)
					return
				}
				position, _ := seen.Position()
				got := map[string]int64{}
				for _, p := range found {
					got[p.ID] = p.Version
				}
				mu.Lock()
				reads = append(reads, seenRead{[]string{"a list", "a search"}[reader], position, got})
				mu.Unlock()
			}
		})
	}
	writing.Wait()
	close(stop)
	reading.Wait()

	events := readAll(t, log, 0)
	for _, r := range reads {
		want := map[string]int64{} // the posts as the events up to r.position leave them
		for _, e := range events {
			if e.Position > r.position {
				break
			}
			if e.Kind == store.EventDeleted {
				delete(want, e.Post.ID)
			} else {
				want[e.Post.ID] = e.Post.Version
			}
		}
		later := map[string]bool{} // the posts an event after r.position wrote
		for _, e := range events {
			if e.Position > r.position {
				later[e.Post.ID] = true
			}
		}
		for id, v := range want {
			if got, ok := r.got[id]; (!ok || got < v) && !(aheadOK && later[id]) {
				t.Errorf("%s at position %d shows post %s at version %d (shown: %v); the log has version %d by then", r.name, r.position, id, got, ok, v)
			}
		}
		for id, v := range r.got {
			if w, ok := want[id]; (!ok || v != w) && !(aheadOK && later[id]) {
				t.Errorf("%s at position %d shows post %s at version %d; the log has it at version %d (stored: %v) at that position", r.name, r.position, id, v, w, ok)
			}
		}
	}
	if len(reads) < 10 {
		t.Errorf("%d reads beside the writers; want at least 10, to show anything", len(reads))
	}
	t.Logf("%d reads beside %d writers checked against the log", len(reads), writers)
}

// testKeepsAfter checks KeepsAfter before and after expiry: true for a position whose later
// events are all kept, its own expired or not, false once one of them expired, or for a position
// past the last given.
func testKeepsAfter(t *testing.T, open Open) {
	s := open(t)
	log := eventLog(t, s)
	check := func(want map[int64]bool) {
		t.Helper()
		for position, w := range want {
			if got, err := log.KeepsAfter(t.Context(), position); err != nil || got != w {
				t.Errorf("KeepsAfter(%d) = %v, %v; want %v", position, got, err, w)
			}
		}
	}
	check(map[int64]bool{0: true, 1: false}) // a log that never held an event
	last := writeEvents(t, s, 1, 5)[4].Position
	check(map[int64]bool{0: true, last - 4: true, last: true, last + 1: false})
	if _, err := log.ExpireEvents(t.Context(), time.Now().Add(-time.Hour), 2); err != nil {
		t.Fatal(err)
	}
	// The newest two are kept: a resume after the third newest misses nothing; after the fourth,
	// the third.
	check(map[int64]bool{0: false, last - 3: false, last - 2: true, last - 1: true, last: true, last + 1: false})
	if _, err := log.ExpireEvents(t.Context(), time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	// Every event expired: the last position still resumes, with nothing after it.
	check(map[int64]bool{last - 1: false, last: true, last + 1: false})
}
