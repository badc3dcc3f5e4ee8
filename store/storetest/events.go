package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// eventTests are the behaviours of the event log (store.EventLog) that every backend shares.
func eventTests(opts Options) []struct {
	name string
	test func(*testing.T, Open)
} {
	return []struct {
		name string
		test func(*testing.T, Open)
	}{
		{"every write logs its event, with the post as the write left it", testWritesLogTheirEvents},
		{"a write that fails logs nothing", testFailedWritesLogNothing},
		{"the log reads back in pages, from any position", testReadEventsInPages},
		{"expiry deletes old events and keeps the last position", testExpireEvents},
		{"expiry deletes the oldest events, up to the later of its two cuts", testExpiryCuts},
		{"expiry beside writers deletes only the oldest events", testExpireWhileWriting},
		{"the stats count what the log holds, before and after writes and expiry", testLogStats},
		{"the log's key is 16 bytes, its own, and outlives the store", func(t *testing.T, open Open) { testLogKey(t, open, opts.Reopen) }},
		{"concurrent writers' events are each logged once, a post's in version order", testConcurrentEvents},
		{"the log of a closed store is unavailable", testEventsUnavailable},
	}
}

// eventLog is s's event log; every backend's store is one.
func eventLog(t *testing.T, s store.Store) store.EventLog {
	t.Helper()
	log, ok := s.(store.EventLog)
	if !ok {
		t.Fatalf("%T keeps no event log", s)
	}
	return log
}

// readAll reads the whole log after position after, a page of 3 at a time.
func readAll(t *testing.T, log store.EventLog, after int64) []store.Event {
	t.Helper()
	var all []store.Event
	for {
		page, upto, err := log.ReadEvents(t.Context(), after, 3)
		if err != nil {
			t.Fatalf("ReadEvents(%d): %v", after, err)
		}
		if upto < after {
			t.Fatalf("ReadEvents(%d) read up to %d, before where it started", after, upto)
		}
		all = append(all, page...)
		if upto == after {
			return all
		}
		after = upto
	}
}

// describe is e in a line, without its time and origin.
func describe(e store.Event) string {
	p := e.Post
	if e.Kind == store.EventDeleted {
		return fmt.Sprintf("%s %s of %s v%d", e.Kind, p.ID, p.UserID, p.Version)
	}
	return fmt.Sprintf("%s %s of %s v%d %q %s %s %s", e.Kind, p.ID, p.UserID, p.Version, p.Title, show(p.Body),
		p.CreatedAt.Format(time.RFC3339Nano), p.UpdatedAt.Format(time.RFC3339Nano))
}

func describeAll(events []store.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = describe(e)
	}
	return out
}

func testWritesLogTheirEvents(t *testing.T, open Open) {
	s := open(t)
	log := eventLog(t, s)
	if last, err := log.LastPosition(t.Context()); err != nil || last != 0 {
		t.Fatalf("LastPosition of a new store = %d, %v; want 0", last, err)
	}
	before := time.Now().Add(-time.Second)
	post := store.Post{ID: id(1), UserID: "alice", Title: "first", Body: ptr("body"), CreatedAt: base, UpdatedAt: base}
	created, err := s.InsertPost(t.Context(), post)
	if err != nil {
		t.Fatal(err)
	}
	updated, err := s.UpdatePost(t.Context(), id(1), "alice", store.AnyVersion, store.Update{Title: ptr("second"), UnsetBody: true, UpdatedAt: base.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := s.DeletePost(t.Context(), id(1), "alice", 2)
	if err != nil {
		t.Fatal(err)
	}
	returned := []store.Event{created, updated, deleted}
	want := []string{
		describe(store.Event{Kind: store.EventCreated, Post: store.Post{ID: id(1), UserID: "alice", Title: "first", Body: ptr("body"), CreatedAt: base, UpdatedAt: base, Version: 1}}),
		describe(store.Event{Kind: store.EventUpdated, Post: store.Post{ID: id(1), UserID: "alice", Title: "second", CreatedAt: base, UpdatedAt: base.Add(time.Second), Version: 2}}),
		describe(store.Event{Kind: store.EventDeleted, Post: store.Post{ID: id(1), UserID: "alice", Version: 2}}),
	}
	if got := describeAll(returned); !slices.Equal(got, want) {
		t.Errorf("the writes returned the events\n%s\nwant\n%s", lines(got), lines(want))
	}
	for i, e := range returned {
		if i > 0 && e.Position <= returned[i-1].Position {
			t.Errorf("event %d at position %d, not after %d", i, e.Position, returned[i-1].Position)
		}
		if e.At.Before(before) || e.At.After(time.Now().Add(time.Second)) || e.At.Location() != time.UTC || e.Origin != log.Origin() {
			t.Errorf("event %d logged at %v by %q; want now, in UTC, by %q", i, e.At, e.Origin, log.Origin())
		}
	}
	read := readAll(t, log, 0)
	if got := describeAll(read); !slices.Equal(got, want) {
		t.Errorf("the log holds\n%s\nwant\n%s", lines(got), lines(want))
	}
	for i := range min(len(read), len(returned)) {
		if read[i].Position != returned[i].Position || !read[i].At.Equal(returned[i].At) {
			t.Errorf("event %d read at %d, %v; returned at %d, %v", i, read[i].Position, read[i].At, returned[i].Position, returned[i].At)
		}
	}
	if last, err := log.LastPosition(t.Context()); err != nil || last != deleted.Position {
		t.Errorf("LastPosition = %d, %v; want the delete's, %d", last, err, deleted.Position)
	}
}

func lines(s []string) string {
	out := ""
	for _, l := range s {
		out += "\t" + l + "\n"
	}
	return out
}

func testFailedWritesLogNothing(t *testing.T, open Open) {
	s := open(t)
	log := eventLog(t, s)
	insert(t, s, newPost(1, "alice", base))
	last, err := log.LastPosition(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	failing := []struct {
		name  string
		write func() error
	}{
		{"an insert of an id in use", func() error { _, err := s.InsertPost(t.Context(), newPost(1, "bob", base)); return err }},
		{"an update of someone else's post", func() error {
			_, err := s.UpdatePost(t.Context(), id(1), "bob", store.AnyVersion, store.Update{Title: ptr("x"), UpdatedAt: base})
			return err
		}},
		{"an update at another version", func() error {
			_, err := s.UpdatePost(t.Context(), id(1), "alice", 7, store.Update{Title: ptr("x"), UpdatedAt: base})
			return err
		}},
		{"an update of no post", func() error {
			_, err := s.UpdatePost(t.Context(), id(2), "alice", store.AnyVersion, store.Update{Title: ptr("x"), UpdatedAt: base})
			return err
		}},
		{"a delete of someone else's post", func() error { _, err := s.DeletePost(t.Context(), id(1), "bob", store.AnyVersion); return err }},
		{"a delete at another version", func() error { _, err := s.DeletePost(t.Context(), id(1), "alice", 3); return err }},
	}
	for _, f := range failing {
		if err := f.write(); err == nil {
			t.Errorf("%s succeeded", f.name)
		}
	}
	if got := readAll(t, log, last); len(got) != 0 {
		t.Errorf("failed writes logged\n%s", lines(describeAll(got)))
	}
	if got := get(t, s, id(1)); got.Version != 1 || got.UserID != "alice" {
		t.Errorf("the post is %+v; want alice's, unchanged", got)
	}
}

func testReadEventsInPages(t *testing.T, open Open) {
	s := open(t)
	log := eventLog(t, s)
	var written []store.Event
	for n := range 7 {
		e, err := s.InsertPost(t.Context(), newPost(n, "alice", base))
		if err != nil {
			t.Fatal(err)
		}
		written = append(written, e)
	}
	for _, tc := range []struct {
		name        string
		after       int64
		limit, want int // want: the index of the first event returned
	}{
		{"from the start, a page of limit", 0, 2, 0},
		{"after the third, the next ones", written[2].Position, 3, 3},
		{"after the last, nothing", written[6].Position, 3, 7},
		{"a limit past the end, the rest", written[4].Position, 100, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, upto, err := log.ReadEvents(t.Context(), tc.after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			end := min(tc.want+tc.limit, len(written))
			if want := describeAll(written[tc.want:end]); !slices.Equal(describeAll(got), want) {
				t.Errorf("read\n%s\nwant\n%s", lines(describeAll(got)), lines(want))
			}
			wantUpto := tc.after
			if end > tc.want {
				wantUpto = written[end-1].Position
			}
			if upto != wantUpto {
				t.Errorf("read up to %d; want %d", upto, wantUpto)
			}
		})
	}
}

func testExpireEvents(t *testing.T, open Open) {
	s := open(t)
	log := eventLog(t, s)
	first, err := s.InsertPost(t.Context(), newPost(1, "alice", base))
	if err != nil {
		t.Fatal(err)
	}
	cut := time.Now().Add(time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	e, err := s.InsertPost(t.Context(), newPost(2, "alice", base))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := log.ExpireEvents(t.Context(), cut, 0); err != nil || n != 1 {
		t.Fatalf("ExpireEvents = %d, %v; want 1", n, err)
	}
	// Read from the expired event on, as a follower that had read it would.
	if got := readAll(t, log, first.Position); len(got) != 1 || got[0].Position != e.Position {
		t.Errorf("left\n%s\nwant only the event of the second post", lines(describeAll(got)))
	}
	if n, err := log.ExpireEvents(t.Context(), time.Now().Add(time.Second), 0); err != nil || n != 1 {
		t.Fatalf("ExpireEvents of the rest = %d, %v; want 1", n, err)
	}
	if last, err := log.LastPosition(t.Context()); err != nil || last != e.Position {
		t.Errorf("LastPosition of an emptied log = %d, %v; want %d, the last given", last, err, e.Position)
	}
	next, err := s.InsertPost(t.Context(), newPost(3, "alice", base))
	if err != nil || next.Position <= e.Position {
		t.Errorf("the next write is at %d, %v; want after %d: a position is never given twice", next.Position, err, e.Position)
	}
}

// writeEvents inserts n posts from post number from on, and returns their events.
func writeEvents(t *testing.T, s store.Store, from, n int) []store.Event {
	t.Helper()
	events := make([]store.Event, n)
	for i := range events {
		e, err := s.InsertPost(t.Context(), newPost(from+i, "alice", base))
		if err != nil {
			t.Fatal(err)
		}
		events[i] = e
	}
	return events
}

// positions lists the positions of events, in order.
func positions(events []store.Event) []int64 {
	out := make([]int64, len(events))
	for i, e := range events {
		out[i] = e.Position
	}
	return out
}

// checkKept checks that of the positions from first to last, the log holds those from kept on
// and none before: what expiry leaves is always every position after one.
func checkKept(t *testing.T, log store.EventLog, first, kept, last int64) {
	t.Helper()
	for p := first; p <= last; p++ {
		got, err := log.Kept(t.Context(), p)
		if err != nil {
			t.Fatalf("Kept(%d): %v", p, err)
		}
		if want := p >= kept; got != want {
			t.Errorf("Kept(%d) = %v; want %v: the log keeps every position from %d to %d", p, got, want, kept, last)
		}
	}
}

func testExpiryCuts(t *testing.T, open Open) {
	for _, tc := range []struct {
		name     string
		old, new int   // the events logged before the time given, and after it
		keep     int64 // the cap
		wantKept int   // how many of the newest are kept
	}{
		{"the time alone deletes the events logged before it", 2, 3, 0, 3},
		{"the cap alone keeps the newest keep", 0, 5, 2, 2},
		{"a cap that cuts further than the time wins", 2, 4, 1, 1},
		{"a time that cuts further than the cap wins", 4, 2, 3, 2},
		{"a cap larger than the log keeps it all", 0, 3, 10, 3},
		{"a cap of exactly the log keeps it all", 0, 3, 3, 3},
		{"a time before every event and no cap keep it all", 0, 3, 0, 3},
		{"a time after every event deletes them all, whatever the cap", 3, 0, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			log := eventLog(t, s)
			events := writeEvents(t, s, 1, tc.old)
			before := time.Now().Add(time.Millisecond)
			time.Sleep(5 * time.Millisecond) // the next events are logged after before, to the millisecond
			events = append(events, writeEvents(t, s, 1+tc.old, tc.new)...)
			first, last := events[0].Position, events[len(events)-1].Position
			want := events[len(events)-tc.wantKept:]
			n, err := log.ExpireEvents(t.Context(), before, tc.keep)
			if err != nil || n != len(events)-tc.wantKept {
				t.Fatalf("ExpireEvents(%d old, %d new, keep %d) = %d, %v; want %d", tc.old, tc.new, tc.keep, n, err, len(events)-tc.wantKept)
			}
			if got := readAll(t, log, 0); !slices.Equal(positions(got), positions(want)) {
				t.Errorf("the log holds the events at %v; want those at %v", positions(got), positions(want))
			}
			checkKept(t, log, first, last+1-int64(tc.wantKept), last)
			if kept, err := log.Kept(t.Context(), last+1); err != nil || kept {
				t.Errorf("Kept of a position not given yet = %v, %v; want false", kept, err)
			}
			if n, err := log.ExpireEvents(t.Context(), before, tc.keep); err != nil || n != 0 {
				t.Errorf("the same expiry again deleted %d, %v; want none", n, err)
			}
			if got, err := log.LastPosition(t.Context()); err != nil || got != last {
				t.Errorf("LastPosition after expiry = %d, %v; want %d, unchanged", got, err, last)
			}
			next := writeEvents(t, s, 100, 1)[0]
			if next.Position != last+1 {
				t.Errorf("the write after expiry is at %d; want %d, the next position", next.Position, last+1)
			}
			if got := readAll(t, log, last); !slices.Equal(positions(got), []int64{next.Position}) {
				t.Errorf("after the last position the log holds %v; want the new event's", positions(got))
			}
		})
	}
}

func testExpireWhileWriting(t *testing.T, open Open) {
	s := open(t)
	log := eventLog(t, s)
	const writers, each, keep = 4, 8, 5
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := s.InsertPost(t.Context(), newPost(1+w*each+i, "alice", base)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	expired := make(chan int)
	go func() {
		total := 0
		defer func() { expired <- total }()
		for {
			n, err := log.ExpireEvents(t.Context(), time.Time{}, keep)
			if err != nil {
				t.Error(err)
			}
			total += n
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond): // the writers have the store most of the time
			}
		}
	}()
	wg.Wait()
	close(done)
	total := <-expired
	last, err := log.LastPosition(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// While writers write, expiry may stop short of a position still to be filled; once they
	// are done, nothing holds it back.
	n, err := log.ExpireEvents(t.Context(), time.Time{}, keep)
	if err != nil {
		t.Fatal(err)
	}
	if total+n != writers*each-keep {
		t.Errorf("expiry deleted %d, then %d; want %d in all, all but the newest %d", total, n, writers*each-keep, keep)
	}
	checkKept(t, log, 1, last-keep+1, last)
	if got := readAll(t, log, 0); len(got) != keep || got[0].Position != last-keep+1 {
		t.Errorf("the log holds the events at %v; want the newest %d, up to %d", positions(got), keep, last)
	}
}

func testLogStats(t *testing.T, open Open) {
	s := open(t)
	log := eventLog(t, s)
	stats := func(when string, want store.LogStats) {
		t.Helper()
		if got, err := log.Stats(t.Context()); err != nil || got != want {
			t.Errorf("Stats %s = %+v, %v; want %+v", when, got, err, want)
		}
	}
	stats("of a new log", store.LogStats{})
	events := writeEvents(t, s, 1, 4)
	first, last := events[0].Position, events[3].Position
	stats("after four writes", store.LogStats{Events: 4, Oldest: first, Last: last})
	if _, err := log.ExpireEvents(t.Context(), time.Time{}, 3); err != nil {
		t.Fatal(err)
	}
	stats("after the oldest expired", store.LogStats{Events: 3, Oldest: events[1].Position, Last: last})
	if _, err := log.ExpireEvents(t.Context(), time.Now().Add(time.Second), 0); err != nil {
		t.Fatal(err)
	}
	stats("after every event expired", store.LogStats{Events: 0, Oldest: 0, Last: last})
	next := writeEvents(t, s, 10, 1)[0]
	stats("after a write to an emptied log", store.LogStats{Events: 1, Oldest: next.Position, Last: next.Position})
}

func testLogKey(t *testing.T, open Open, reopen func(*testing.T, store.Store) store.Store) {
	s := open(t)
	log := eventLog(t, s)
	key, err := log.Key(t.Context())
	if err != nil || len(key) != 16 {
		t.Fatalf("Key of a new log = %x, %v; want 16 bytes", key, err)
	}
	kept := slices.Clone(key)
	key[0] ^= 0xff // the caller's copy
	writeEvents(t, s, 1, 2)
	if again, err := log.Key(t.Context()); err != nil || !slices.Equal(again, kept) {
		t.Errorf("Key after writes = %x, %v; want %x, as before", again, err, kept)
	}
	// A log that has events before its key is first asked for, as one of an earlier release.
	other := open(t)
	writeEvents(t, other, 1, 1)
	otherKey, err := eventLog(t, other).Key(t.Context())
	if err != nil || len(otherKey) != 16 || slices.Equal(otherKey, kept) {
		t.Errorf("Key of another log = %x, %v; want 16 bytes of its own, not %x", otherKey, err, kept)
	}
	if reopen == nil {
		t.Log("the backend cannot reopen a store: the key's surviving it is not checked")
		return
	}
	again, err := eventLog(t, reopen(t, s)).Key(t.Context())
	if err != nil || !slices.Equal(again, kept) {
		t.Errorf("Key of the store reopened = %x, %v; want %x, the same", again, err, kept)
	}
}

func testConcurrentEvents(t *testing.T, open Open) {
	s := open(t)
	log := eventLog(t, s)
	const writers, each = 8, 6
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		returned = map[int64]string{}
	)
	insert(t, s, store.Post{ID: id(0), UserID: "alice", Title: "shared", CreatedAt: base, UpdatedAt: base})
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				var (
					e   store.Event
					err error
				)
				if i%2 == 0 { // a post of one's own
					e, err = s.InsertPost(t.Context(), newPost(1+w*each+i, "alice", base))
				} else { // the post every writer updates
					e, err = s.UpdatePost(t.Context(), id(0), "alice", store.AnyVersion, store.Update{Title: ptr(fmt.Sprint(w, i)), UpdatedAt: base})
				}
				if err != nil {
					t.Error(err)
					continue
				}
				mu.Lock()
				if _, twice := returned[e.Position]; twice {
					t.Errorf("position %d returned twice", e.Position)
				}
				returned[e.Position] = describe(e)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	read := readAll(t, log, 1)
	if len(read) != len(returned) {
		t.Errorf("the log holds %d events; the writes returned %d", len(read), len(returned))
	}
	version := int64(1)
	for _, e := range read {
		if returned[e.Position] != describe(e) {
			t.Errorf("at %d the log holds %s; the write returned %s", e.Position, describe(e), returned[e.Position])
		}
		if e.Post.ID == id(0) {
			if e.Post.Version != version+1 {
				t.Errorf("the shared post's version %d follows %d in the log", e.Post.Version, version)
			}
			version = e.Post.Version
		}
	}
}

func testEventsUnavailable(t *testing.T, open Open) {
	s := open(t)
	log := eventLog(t, s)
	insert(t, s, newPost(1, "alice", base))
	s.Close()
	if _, _, err := log.ReadEvents(t.Context(), 0, 10); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("ReadEvents after Close: %v; want ErrUnavailable", err)
	}
	if _, err := log.LastPosition(t.Context()); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("LastPosition after Close: %v; want ErrUnavailable", err)
	}
	if _, err := log.ExpireEvents(t.Context(), time.Now(), 1); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("ExpireEvents after Close: %v; want ErrUnavailable", err)
	}
	if _, err := log.Kept(t.Context(), 1); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Kept after Close: %v; want ErrUnavailable", err)
	}
	if _, err := log.Stats(t.Context()); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Stats after Close: %v; want ErrUnavailable", err)
	}
	if _, err := log.Key(t.Context()); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Key after Close, never read before: %v; want ErrUnavailable", err)
	}
}
