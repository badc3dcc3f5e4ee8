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

// The behaviours of the event log (store.EventLog) that every backend shares.
var eventTests = []struct {
	name string
	test func(*testing.T, Open)
}{
	{"every write logs its event, with the post as the write left it", testWritesLogTheirEvents},
	{"a write that fails logs nothing", testFailedWritesLogNothing},
	{"the log reads back in pages, from any position", testReadEventsInPages},
	{"expiry deletes old events and keeps the last position", testExpireEvents},
	{"concurrent writers' events are each logged once, a post's in version order", testConcurrentEvents},
	{"the log of a closed store is unavailable", testEventsUnavailable},
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
	if n, err := log.ExpireEvents(t.Context(), cut); err != nil || n != 1 {
		t.Fatalf("ExpireEvents = %d, %v; want 1", n, err)
	}
	// Read from the expired event on: a reader of the log is never behind its expiry by less
	// than the TTL (a minute at least), and MongoDB's log may wait for a position it cannot
	// tell from one still to be filled until the event after it is some seconds old.
	if got := readAll(t, log, first.Position); len(got) != 1 || got[0].Position != e.Position {
		t.Errorf("left\n%s\nwant only the event of the second post", lines(describeAll(got)))
	}
	if n, err := log.ExpireEvents(t.Context(), time.Now().Add(time.Second)); err != nil || n != 1 {
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
}
