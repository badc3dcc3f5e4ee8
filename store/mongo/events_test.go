package mongo_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// faulty is a database that one store reaches through a proxy that cuts its commands, and another
// directly, as a second instance would.
type faulty struct {
	through, direct *mongo.Store
	proxy           *mongotest.FaultProxy
	uri, name       string
}

func newFaulty(t *testing.T) *faulty {
	t.Helper()
	mongo.SetWaits(t, 50*time.Millisecond, 50*time.Millisecond)
	server := mongotest.FerretDB(t)
	proxy := mongotest.NewFaultProxy(t, server.Socket)
	name := fmt.Sprintf("faults_%d_%d", time.Now().UnixNano()%1e9, databases.Add(1))
	open := func(uri string) *mongo.Store {
		s, err := mongo.Open(uri, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		firstUse(t, s)
		return s
	}
	return &faulty{through: open(proxy.URI), direct: open(server.URI), proxy: proxy, uri: server.URI, name: name}
}

// firstUse makes the collections of s and their indexes, as its first use does: seconds on a
// loaded machine under the race detector, past the deadline of the calls the tests cut, and no
// part of what they time.
func firstUse(t *testing.T, s *mongo.Store) {
	t.Helper()
	if _, err := s.ListPosts(t.Context(), store.Filter{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ReadEvents(t.Context(), 0, 1); err != nil {
		t.Fatal(err)
	}
}

// call runs a call of the store under a deadline, as the service does.
func call[T any](t *testing.T, do func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	return do(ctx)
}

// logged is the log as one line per event: kind, version, title; read up to the last position
// given out, which a hole holds back until the reader has seen it for holeWait.
func (f *faulty) logged(t *testing.T) []string {
	t.Helper()
	last, err := f.direct.LastPosition(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	after := int64(0)
	for deadline := time.Now().Add(10 * time.Second); after < last; {
		events, upto, err := f.direct.ReadEvents(t.Context(), after, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			out = append(out, fmt.Sprintf("%s v%d %s", e.Kind, e.Post.Version, e.Post.Title))
		}
		if upto == after {
			if time.Now().After(deadline) {
				t.Fatalf("the log is decided up to %d of %d", after, last)
			}
			time.Sleep(20 * time.Millisecond)
		}
		after = upto
	}
	return out
}

// pendingEvents is how many posts hold an event not logged yet.
func (f *faulty) pendingEvents(t *testing.T) int {
	t.Helper()
	client, err := mongo.Connect(f.uri)
	if err != nil {
		t.Fatal(err)
	}
	defer mongo.Disconnect(client)
	n, err := client.Database(f.name).Collection(mongo.PostsCollection).CountDocuments(t.Context(), bson.D{{Key: "ev", Value: bson.D{{Key: "$exists", Value: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// recoverAll has the other instance log what is pending, as its follower does every second.
func (f *faulty) recoverAll(t *testing.T) int {
	t.Helper()
	n, err := f.direct.RecoverEvents(t.Context(), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var firstPost = store.Post{ID: "67d446000000000000000001", UserID: "alice", Title: "v1", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), UpdatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}

func update(title string) store.Update {
	return store.Update{Title: &title, UpdatedAt: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)}
}

// A write is cut at each of its steps: the post's write, the position, the event's insert, the
// clear of the pending event. Whatever the writer was told, the write that reached the database
// reaches the log once, in its place among the post's events, and the post takes writes again.
func TestAWriteCutAtEachStepReachesTheLogOnce(t *testing.T) {
	steps := []struct {
		name    string
		fault   mongotest.Fault
		failed  bool // the writer is told the write failed
		written bool // and yet it was written
	}{
		{"the post's write is carried out, its answer lost", mongotest.Fault{Command: "findAndModify", Collection: "posts", Executed: true}, true, true},
		{"the post's write does not reach the server", mongotest.Fault{Command: "findAndModify", Collection: "posts"}, true, false},
		{"the position is taken, its answer lost", mongotest.Fault{Command: "findAndModify", Collection: "counters", Executed: true}, true, true},
		{"the counter stalls past the write's deadline", mongotest.Fault{Command: "findAndModify", Collection: "counters", Delay: 1500 * time.Millisecond}, true, true},
		{"the event's insert does not reach the server", mongotest.Fault{Command: "insert", Collection: "events"}, true, true},
		{"the event is inserted, its answer lost", mongotest.Fault{Command: "insert", Collection: "events", Executed: true}, true, true},
		{"the clear of the pending event does not reach the server", mongotest.Fault{Command: "update", Collection: "posts"}, false, true},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			f := newFaulty(t)
			if _, err := call(t, func(ctx context.Context) (store.Event, error) { return f.through.InsertPost(ctx, firstPost) }); err != nil {
				t.Fatal(err)
			}
			f.proxy.Arm(step.fault)
			_, err := call(t, func(ctx context.Context) (store.Event, error) {
				return f.through.UpdatePost(ctx, firstPost.ID, "alice", store.AnyVersion, update("v2"))
			})
			if (err != nil) != step.failed {
				t.Fatalf("UpdatePost: %v; want failed %v", err, step.failed)
			}
			if f.proxy.Hits(step.fault) != 1 {
				t.Fatal("the fault was not met")
			}
			want := []string{"created v1 v1"}
			if step.written {
				want = append(want, "updated v2 v2")
			}
			if step.failed && step.written {
				if got, _ := f.direct.GetPost(t.Context(), firstPost.ID); got.Version != 2 {
					t.Fatalf("the post is at version %d; the step cut was after its write", got.Version)
				}
			}
			t.Run("another instance's recovery logs it once", func(t *testing.T) {
				f.recoverAll(t)
				if got := f.logged(t); !slices.Equal(got, want) {
					t.Errorf("the log holds %v; want %v", got, want)
				}
				if n := f.pendingEvents(t); n != 0 {
					t.Errorf("%d events still pending", n)
				}
				if n := f.recoverAll(t); n != 0 {
					t.Errorf("a second recovery logged %d", n)
				}
			})
			t.Run("the post's next write follows it", func(t *testing.T) {
				e, err := call(t, func(ctx context.Context) (store.Event, error) {
					return f.through.UpdatePost(ctx, firstPost.ID, "alice", store.AnyVersion, update("next"))
				})
				if err != nil {
					t.Fatal(err)
				}
				want := append(want, fmt.Sprintf("updated v%d next", e.Post.Version))
				if got := f.logged(t); !slices.Equal(got, want) {
					t.Errorf("the log holds %v; want %v", got, want)
				}
			})
		})
	}
}

// The next write of a post whose last writer stopped before its event logs that event first
// (an update waits for it until helpAfter; here, it is past).
func TestTheNextWriteLogsAPendingEventFirst(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault mongotest.Fault
		write func(ctx context.Context, s *mongo.Store) (store.Event, error)
		want  []string
	}{
		{"an update cut after its write, then an update", mongotest.Fault{Command: "findAndModify", Collection: "counters", Executed: true},
			func(ctx context.Context, s *mongo.Store) (store.Event, error) {
				return s.UpdatePost(ctx, firstPost.ID, "alice", store.AnyVersion, update("v2"))
			}, []string{"created v1 v1", "updated v2 v2", "updated v3 v3"}},
		{"a delete cut after its write: the post is gone, and the update finds none", mongotest.Fault{Command: "insert", Collection: "events"},
			func(ctx context.Context, s *mongo.Store) (store.Event, error) {
				return s.DeletePost(ctx, firstPost.ID, "alice", store.AnyVersion)
			}, []string{"created v1 v1", "deleted v1 "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFaulty(t)
			if _, err := call(t, func(ctx context.Context) (store.Event, error) { return f.through.InsertPost(ctx, firstPost) }); err != nil {
				t.Fatal(err)
			}
			f.proxy.Arm(tc.fault)
			if _, err := call(t, func(ctx context.Context) (store.Event, error) { return tc.write(ctx, f.through) }); err == nil {
				t.Fatal("the cut write succeeded")
			}
			time.Sleep(60 * time.Millisecond) // past helpAfter: its writer is taken to have stopped
			_, err := call(t, func(ctx context.Context) (store.Event, error) {
				return f.direct.UpdatePost(ctx, firstPost.ID, "alice", store.AnyVersion, update("v3"))
			})
			if deleted := strings.HasPrefix(tc.want[len(tc.want)-1], "deleted"); deleted != (err != nil) {
				t.Fatalf("the next update: %v", err)
			}
			if got := f.logged(t); !slices.Equal(got, tc.want) {
				t.Errorf("the log holds %v; want %v", got, tc.want)
			}
			if _, err := f.direct.GetPost(t.Context(), firstPost.ID); (err != nil) != strings.HasPrefix(tc.want[1], "deleted") {
				t.Errorf("GetPost: %v", err)
			}
		})
	}
}

// A deleted post whose event is not logged yet is gone for every read, and for the copy.
func TestATombstoneIsGoneForReads(t *testing.T) {
	f := newFaulty(t)
	if _, err := call(t, func(ctx context.Context) (store.Event, error) { return f.through.InsertPost(ctx, firstPost) }); err != nil {
		t.Fatal(err)
	}
	f.proxy.Arm(mongotest.Fault{Command: "insert", Collection: "events"})
	if _, err := call(t, func(ctx context.Context) (store.Event, error) {
		return f.through.DeletePost(ctx, firstPost.ID, "alice", store.AnyVersion)
	}); err == nil {
		t.Fatal("the cut delete succeeded")
	}
	if f.pendingEvents(t) != 1 {
		t.Fatal("no tombstone pending")
	}
	if _, err := f.direct.GetPost(t.Context(), firstPost.ID); err == nil {
		t.Error("GetPost found the deleted post")
	}
	if got, err := f.direct.ListPosts(t.Context(), store.Filter{Limit: 10}); err != nil || len(got) != 0 {
		t.Errorf("ListPosts = %v, %v; want none", got, err)
	}
	for p, err := range f.direct.AllPosts(t.Context(), 10) {
		t.Errorf("the copy reads %v, %v", p, err)
	}
	if _, err := call(t, func(ctx context.Context) (store.Event, error) {
		return f.direct.DeletePost(ctx, firstPost.ID, "alice", store.AnyVersion)
	}); err == nil {
		t.Error("a second delete succeeded")
	}
}

// Two instances that find one pending event at once log it once.
func TestRecoveriesRacingLogOnce(t *testing.T) {
	f := newFaulty(t)
	if _, err := call(t, func(ctx context.Context) (store.Event, error) { return f.through.InsertPost(ctx, firstPost) }); err != nil {
		t.Fatal(err)
	}
	f.proxy.Arm(mongotest.Fault{Command: "findAndModify", Collection: "counters", Executed: true})
	if _, err := call(t, func(ctx context.Context) (store.Event, error) {
		return f.through.UpdatePost(ctx, firstPost.ID, "alice", store.AnyVersion, update("v2"))
	}); err == nil {
		t.Fatal("the cut write succeeded")
	}
	var wg sync.WaitGroup
	for _, s := range []*mongo.Store{f.through, f.direct, f.through, f.direct} {
		wg.Go(func() {
			if _, err := s.RecoverEvents(t.Context(), time.Now().Add(time.Hour)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, want := f.logged(t), []string{"created v1 v1", "updated v2 v2"}; !slices.Equal(got, want) {
		t.Errorf("the log holds %v; want %v", got, want)
	}
}

// A position given out and never filled holds readers back until the event after it is older
// than holeWait; then a marker fills it, once for every reader.
func TestAHoleIsFilledOnce(t *testing.T) {
	mongo.SetWaits(t, 300*time.Millisecond, 300*time.Millisecond)
	s := opener(mongotest.FerretDB(t).URI)(t).(*mongo.Store)
	first, err := s.InsertPost(t.Context(), firstPost)
	if err != nil {
		t.Fatal(err)
	}
	hole := s.TakePosition(t)
	second := firstPost
	second.ID = "67d446000000000000000002"
	after, err := s.InsertPost(t.Context(), second)
	if err != nil {
		t.Fatal(err)
	}
	events, upto, err := s.ReadEvents(t.Context(), first.Position, 10)
	if err != nil || len(events) != 0 || upto != first.Position {
		t.Fatalf("while the hole is young: %d events up to %d, %v; want none, up to %d", len(events), upto, err, first.Position)
	}
	time.Sleep(350 * time.Millisecond)
	events, upto, err = s.ReadEvents(t.Context(), first.Position, 10)
	if err != nil || len(events) != 1 || events[0].Position != after.Position || upto != after.Position || hole >= after.Position {
		t.Fatalf("once it is old: %v up to %d, %v; want the second post's event alone, up to %d", events, upto, err, after.Position)
	}
	again, upto, err := s.ReadEvents(t.Context(), first.Position, 10)
	if err != nil || len(again) != 1 || upto != after.Position {
		t.Errorf("read again: %d events up to %d, %v", len(again), upto, err)
	}
}

// The log is read through indexes: MongoDB serves a range of _id sorted by _id from the _id
// index, the search for pending events from the sparse index on ev.at, and the counter by its
// _id. FerretDB v1 scans instead (it pushes down only a filter that is _id alone, and no range),
// so what this checks is the shape of each query, as the driver sends it, and that the indexes
// it needs exist.
func TestTheLogIsReadThroughItsIndexes(t *testing.T) {
	server := mongotest.FerretDB(t)
	var (
		mu   sync.Mutex
		sent = map[string]bson.Raw{} // the last command of each name on each collection
	)
	monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		var coll string
		if v, err := e.Command.LookupErr(e.CommandName); err == nil {
			coll, _ = v.StringValueOK()
		}
		mu.Lock()
		sent[e.CommandName+" "+coll] = slices.Clone(e.Command)
		mu.Unlock()
	}}
	name := fmt.Sprintf("shapes_%d", databases.Add(1))
	s, err := mongo.Open(server.URI, name, options.Client().SetMonitor(monitor))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	first, err := s.InsertPost(t.Context(), firstPost)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ReadEvents(t.Context(), first.Position-1, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecoverEvents(t.Context(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LastPosition(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	shape := func(command, coll, field string) string {
		v, err := sent[command+" "+coll].LookupErr(field)
		if err != nil {
			return "none"
		}
		return v.String()
	}
	for _, c := range []struct{ command, coll, field, want string }{
		{"find", mongo.EventsCollection, "filter", fmt.Sprintf(`{"_id": {"$gt": {"$numberLong":"%d"}}}`, first.Position-1)},
		{"find", mongo.EventsCollection, "sort", `{"_id": {"$numberInt":"1"}}`},
		{"find", mongo.PostsCollection, "filter", `{"ev.at": {"$lt": `},
		{"find", mongo.CountersCollection, "filter", `{"_id": "events"}`},
		{"findAndModify", mongo.CountersCollection, "query", `{"_id": "events"}`},
	} {
		if got := shape(c.command, c.coll, c.field); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s on %s: %s %s; want %s…", c.command, c.coll, c.field, got, c.want)
		}
	}
	client, err := mongo.Connect(server.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer mongo.Disconnect(client)
	for coll, want := range map[string][]string{
		mongo.PostsCollection:  {`{"ev.at": 1} sparse`},
		mongo.EventsCollection: {`{"at": 1}`, `{"key": 1} unique`},
	} {
		specs, err := client.Database(name).Collection(coll).Indexes().ListSpecifications(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, spec := range specs {
			d := spec.KeysDocument.String()
			d = strings.NewReplacer(`{"$numberInt":"1"}`, "1", `{"$numberInt":"-1"}`, "-1").Replace(d)
			if spec.Unique != nil && *spec.Unique {
				d += " unique"
			}
			if spec.Sparse != nil && *spec.Sparse {
				d += " sparse"
			}
			got = append(got, d)
		}
		for _, w := range want {
			// FerretDB v1 keeps no sparse flag: the index is there, unflagged.
			if !slices.Contains(got, w) && !slices.Contains(got, strings.TrimSuffix(w, " sparse")) {
				t.Errorf("the indexes of %s are %v; want %s", coll, got, w)
			}
		}
	}
}

// Expiry cuts past a gap only once it has seen it empty for twice the operations' timeout,
// however short settleWait is: a write under a timeout of an hour may still fill it.
func TestExpiryStopsShortOfAHoleItSawForLessThanTwiceTheTimeout(t *testing.T) {
	mongo.SetExpiry(t, time.Nanosecond, 2)
	s := opener(mongotest.FerretDB(t).URI)(t).(*mongo.Store)
	s.SetWaits(mongo.Waits{Timeout: time.Hour})
	insert := func(n int) {
		if _, err := s.InsertPost(t.Context(), post(n)); err != nil {
			t.Fatal(err)
		}
	}
	insert(1)
	hole := s.TakePosition(t)
	insert(2)
	insert(3)
	// The first sight of the hole, which expires the event before it, and one after it.
	for _, want := range []int{1, 0} {
		if n, err := s.ExpireEvents(t.Context(), time.Time{}, 1); err != nil || n != want {
			t.Fatalf("ExpireEvents with a hole at %d seen just now = %d, %v; want %d", hole, n, err, want)
		}
		if kept, err := s.Kept(t.Context(), hole+1); err != nil || !kept {
			t.Errorf("Kept(%d), after the hole = %v, %v; want true", hole+1, kept, err)
		}
	}
}

// Expiry cuts past a gap only once the event after it is older than settleWait: until then the
// gap's position may still take its writer's event, which would land below the cut.
func TestExpiryStopsShortOfAYoungHole(t *testing.T) {
	// The hole is young for as long as the first expiry needs (an hour), then settled at once:
	// no bound on how long the writes between take.
	mongo.SetExpiry(t, time.Hour, 2)
	s := opener(mongotest.FerretDB(t).URI)(t).(*mongo.Store)
	post := func(n int) store.Post {
		p := firstPost
		p.ID = fmt.Sprintf("67d4460000000000000000%02d", n)
		return p
	}
	insert := func(n int) store.Event {
		e, err := s.InsertPost(t.Context(), post(n))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	kept := func(want map[int64]bool) {
		t.Helper()
		for p, w := range want {
			if got, err := s.Kept(t.Context(), p); err != nil || got != w {
				t.Errorf("Kept(%d) = %v, %v; want %v", p, got, err, w)
			}
		}
	}
	first := insert(1)
	hole := s.TakePosition(t)
	for n := 2; n <= 4; n++ {
		insert(n)
	}
	if first.Position != 1 || hole != 2 {
		t.Fatalf("the first event is at %d and the hole at %d; want 1 and 2", first.Position, hole)
	}
	if n, err := s.ExpireEvents(t.Context(), time.Time{}, 1); err != nil || n != 1 {
		t.Fatalf("ExpireEvents with a young hole at 2 = %d, %v; want 1, the event before it", n, err)
	}
	kept(map[int64]bool{1: false, 3: true, 4: true, 5: true})
	mongo.SetExpiry(t, time.Nanosecond, 2)
	if n, err := s.ExpireEvents(t.Context(), time.Time{}, 1); err != nil || n != 2 {
		t.Fatalf("ExpireEvents once the hole is settled = %d, %v; want 2, all but the last", n, err)
	}
	kept(map[int64]bool{2: false, 3: false, 4: false, 5: true})
	for n := 5; n <= 8; n++ {
		insert(n)
	}
	if n, err := s.ExpireEvents(t.Context(), time.Now().Add(time.Second), 0); err != nil || n != 5 {
		t.Fatalf("ExpireEvents of the rest, in batches of 2 = %d, %v; want 5", n, err)
	}
	if st, err := s.Stats(t.Context()); err != nil || st != (store.LogStats{Last: 9}) {
		t.Errorf("Stats = %+v, %v; want an empty log that gave 9 positions", st, err)
	}
}

// A reader behind the cut of expiry skips the positions that expired, and fills no marker in
// them: a marker below the cut would be a position kept in front of positions gone.
func TestAReaderBehindTheCutSkipsWhatExpired(t *testing.T) {
	f := newFaulty(t)
	var events []store.Event
	for n := range 5 {
		p := firstPost
		p.ID = fmt.Sprintf("67d4460000000000000000%02d", n+1)
		e, err := f.direct.InsertPost(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	if n, err := f.direct.ExpireEvents(t.Context(), time.Time{}, 2); err != nil || n != 3 {
		t.Fatalf("ExpireEvents = %d, %v; want 3", n, err)
	}
	time.Sleep(60 * time.Millisecond) // past holeWait: the gap in front of the events kept is old
	marker := mongotest.Fault{Command: "insert", Collection: mongo.EventsCollection, Delay: time.Millisecond}
	f.proxy.Arm(marker) // to count the inserts of markers: none
	defer f.proxy.Disarm()
	got, upto, err := f.through.ReadEvents(t.Context(), 0, 10)
	if err != nil || len(got) != 2 || got[0].Position != events[3].Position || upto != events[4].Position {
		t.Fatalf("the other instance reads %d events up to %d, %v; want the two kept, up to %d", len(got), upto, err, events[4].Position)
	}
	if f.proxy.Hits(marker) != 0 {
		t.Error("the reader put markers in the expired positions")
	}
	if st, err := f.direct.Stats(t.Context()); err != nil || st.Events != 2 {
		t.Errorf("the log holds %d documents, %v; want the two events, and no marker", st.Events, err)
	}
	for _, e := range events[:3] {
		if kept, err := f.direct.Kept(t.Context(), e.Position); err != nil || kept {
			t.Errorf("Kept(%d) = %v, %v; want false", e.Position, kept, err)
		}
	}
}

// A reader that fills a hole while an expiry cuts past it (it read the cut before the expiry
// moved it) deletes its marker again: no position below the cut stays kept.
func TestAMarkerPutBelowANewCutGoesAgain(t *testing.T) {
	f := newFaulty(t)
	mongo.SetExpiry(t, 100*time.Millisecond, 1000)
	insert := func(n int) {
		p := firstPost
		p.ID = fmt.Sprintf("67d4460000000000000000%02d", n)
		if _, err := f.direct.InsertPost(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	insert(1)
	hole := f.direct.TakePosition(t)
	insert(2)
	insert(3)
	// Both instances see the hole, then wait past holeWait and settleWait from their sight.
	for _, s := range []*mongo.Store{f.through, f.direct} {
		if _, _, err := s.ReadEvents(t.Context(), hole-1, 10); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(150 * time.Millisecond)
	held := mongotest.Fault{Command: "insert", Collection: mongo.EventsCollection, Delay: 2 * time.Second}
	f.proxy.Arm(held)
	read := make(chan error, 1)
	go func() {
		_, _, err := f.through.ReadEvents(t.Context(), hole-1, 10)
		read <- err
	}()
	untilHit(t, f.proxy, held, 0) // the reader has read the cut, and its marker is on its way
	if n, err := f.direct.ExpireEvents(t.Context(), time.Time{}, 1); err != nil || n != 2 {
		t.Fatalf("ExpireEvents past the hole = %d, %v; want 2, the events at %d and %d", n, err, hole-1, hole+1)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if kept, err := f.direct.Kept(t.Context(), hole); err != nil || kept {
		t.Errorf("Kept(%d), the hole's, = %v, %v; want false: it is below the cut", hole, kept, err)
	}
	if st, err := f.direct.Stats(t.Context()); err != nil || st.Events != 1 || st.Oldest != hole+2 {
		t.Errorf("Stats = %+v, %v; want the last event alone, at %d", st, err, hole+2)
	}
}

// Instances that ask for the log's key at once agree on one, on a new log and on one whose
// counter an earlier release made, without a key.
func TestInstancesRacingForTheKeyAgree(t *testing.T) {
	uri := mongotest.FerretDB(t).URI
	for _, tc := range []struct {
		name    string
		written bool
	}{
		{"a new log", false},
		{"the log of an earlier release", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := opener(uri)(t).(*mongo.Store)
			if tc.written {
				if _, err := first.InsertPost(t.Context(), firstPost); err != nil {
					t.Fatal(err)
				}
			}
			stores := []*mongo.Store{first}
			for range 5 {
				stores = append(stores, reopener(uri)(t, first).(*mongo.Store))
			}
			keys := make([][]byte, len(stores))
			var wg sync.WaitGroup
			for i, s := range stores {
				wg.Go(func() {
					var err error
					if keys[i], err = s.Key(t.Context()); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			for i, k := range keys {
				if len(k) != 16 || !slices.Equal(k, keys[0]) {
					t.Errorf("instance %d has the key %x; instance 0 %x", i, k, keys[0])
				}
			}
		})
	}
}

// The TTL index on at that earlier releases made is dropped: MongoDB's TTL monitor deletes by
// time, not the oldest positions first. FerretDB v1 has no TTL indexes: a real MongoDB only.
func TestATTLIndexOfAnEarlierReleaseIsDropped(t *testing.T) {
	uri := mongotest.MongoDBURI()
	if uri == "" {
		t.Skip("needs a real mongod: set MONGODB_URI (for instance mongodb://localhost:27017)")
	}
	s := opener(uri)(t).(*mongo.Store)
	client, err := mongo.Connect(uri)
	if err != nil {
		t.Fatal(err)
	}
	defer mongo.Disconnect(client)
	coll := client.Database(s.Database()).Collection(mongo.EventsCollection)
	if _, err := coll.Indexes().CreateOne(t.Context(), driver.IndexModel{Keys: bson.D{{Key: "at", Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(3600)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ReadEvents(t.Context(), 0, 1); err != nil {
		t.Fatal(err)
	}
	specs, err := coll.Indexes().ListSpecifications(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var at bool
	for _, spec := range specs {
		if spec.KeysDocument.Lookup("at").IsZero() {
			continue
		}
		at = true
		if spec.ExpireAfterSeconds != nil {
			t.Errorf("the index on at %s still expires after %d s", spec.Name, *spec.ExpireAfterSeconds)
		}
	}
	if !at {
		t.Error("no index on at")
	}
}
