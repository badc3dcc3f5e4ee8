//go:build long

// A database that answers every command 0.3–3 s late, for a minute and more: the tests of a slow
// database (this file's, and restart_test.go's, which restarts it), built only with the tag long,
// which make test sets and the one-minute gate, go test ./..., leaves out.

package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/events/eventstest"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// slowTimeout is the operations' timeout of the slow database's test: a write is five commands
// or so, each held back up to 3 s.
const slowTimeout = 40 * time.Second

// Slow is not down: two instances on a database that answers every command 0.3–3 s late (a
// loaded host, a restart warming up) store every write, slower, none refused or answered as
// unavailable while the database answers within the operation's timeout; and the followers
// of both hand every event, once, in the log's order, each post's in the order of its versions.
func TestADatabaseThatIsSlowLosesNoWriteAndNoEvent(t *testing.T) {
	t.Parallel() // waits out the proxy's delays; it checks no bound on time
	server := mongotest.FerretDB(t)
	dir, err := os.MkdirTemp("", "ferretdb-slow-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// Through the proxy that lets one write at a time into FerretDB (mongotest.FerretDB's URI).
	addr, slowDown := slowProxy(t, server.Socket, filepath.Join(dir, "mongodb.sock"))
	name := fmt.Sprintf("slow_%d_%d", time.Now().UnixNano()%1e9, databases.Add(1))
	type instance struct {
		store   store.Store
		follows *events.Follower
		mu      sync.Mutex
		handed  []store.Event
		opened  atomic.Int64 // times its breaker opened
	}
	ctx, cancel := context.WithCancel(t.Context())
	var running sync.WaitGroup
	t.Cleanup(func() { cancel(); running.Wait() })
	instances := make([]*instance, 2)
	for i := range instances {
		s, err := mongo.Open("mongodb://"+addr+"/", name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		firstUse(t, s)
		in := &instance{}
		b := store.NewBreaker(s, store.BreakerConfig{Down: s.Down, Changed: func(open bool) {
			if open {
				in.opened.Add(1)
			}
		}})
		t.Cleanup(b.Stop)
		in.store = b.Guard(s)
		in.follows = events.NewFollower(events.FollowerConfig{Log: s, Relay: true, Timeout: slowTimeout, Hand: func(e store.Event) {
			in.mu.Lock()
			in.handed = append(in.handed, e)
			in.mu.Unlock()
		}})
		instances[i] = in
	}
	// The database is slow from here on: the followers start on it at once, as two instances'
	// do, each reading the log's end through the proxy.
	slowDown()
	for _, in := range instances {
		running.Go(func() { in.follows.Run(ctx) })
	}
	for _, in := range instances {
		<-in.follows.Started()
	}
	// Each instance has writers that create a post and update it twice, at once.
	const writers, versions = 8, 3
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		written  []string // post/version of each write acknowledged
		failures []error
	)
	started := time.Now()
	// And clients that read, each on its own, five a second at each instance: an open breaker
	// would refuse them.
	reading := make(chan struct{})
	var reads sync.WaitGroup
	for i, in := range instances {
		reads.Go(func() {
			for {
				select {
				case <-reading:
					return
				case <-time.After(200 * time.Millisecond):
				}
				reads.Go(func() {
					call, cancel := context.WithTimeout(t.Context(), slowTimeout)
					defer cancel()
					if _, err := in.store.ListPosts(call, store.Filter{Limit: 1}); err != nil {
						mu.Lock()
						failures = append(failures, fmt.Errorf("instance %d, a read: %w", i, err))
						mu.Unlock()
					}
				})
			}
		})
	}
	for i, in := range instances {
		for w := range writers {
			wg.Go(func() {
				p := post(1 + i*writers + w)
				for v := int64(1); v <= versions; v++ {
					call, cancel := context.WithTimeout(t.Context(), slowTimeout)
					var err error
					if v == 1 {
						_, err = in.store.InsertPost(call, p)
					} else {
						_, err = in.store.UpdatePost(call, p.ID, p.UserID, v-1, update(fmt.Sprint("v", v)))
					}
					cancel()
					mu.Lock()
					if err != nil {
						failures = append(failures, fmt.Errorf("instance %d, %s v%d: %w", i, p.ID, v, err))
					} else {
						written = append(written, fmt.Sprintf("%s/%d", p.ID, v))
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(reading)
	reads.Wait()
	t.Logf("%d writes in %v", len(written), time.Since(started).Round(time.Millisecond))
	for i, in := range instances {
		if n := in.opened.Load(); n != 0 {
			t.Errorf("instance %d's breaker opened %d times on a database that answered every call", i, n)
		}
	}
	for _, err := range failures {
		unavailable := errors.Is(err, store.ErrUnavailable)
		t.Errorf("a call failed (unavailable: %v): %v", unavailable, err)
	}
	for i, in := range instances {
		var got []string
		for deadline := time.Now().Add(2 * slowTimeout); ; time.Sleep(100 * time.Millisecond) {
			in.mu.Lock()
			handed := slices.Clone(in.handed)
			in.mu.Unlock()
			got = got[:0]
			for j, e := range handed {
				if j > 0 && e.Position <= handed[j-1].Position {
					t.Fatalf("instance %d handed %d after %d", i, e.Position, handed[j-1].Position)
				}
				got = append(got, fmt.Sprintf("%s/%d", e.Post.ID, e.Post.Version))
			}
			if len(got) >= len(written) || time.Now().After(deadline) {
				break
			}
		}
		for _, w := range written {
			if !slices.Contains(got, w) {
				t.Errorf("instance %d's follower never handed %s", i, w)
			}
		}
		if len(got) != len(written) {
			t.Errorf("instance %d's follower handed %d events for %d writes: %v", i, len(got), len(written), got)
		}
		// A post's events in the order of its versions: the log's order, by position.
		last := map[string]string{}
		for _, g := range got {
			id := g[:24]
			if prev, ok := last[id]; ok && prev > g {
				t.Errorf("instance %d handed %s after %s", i, g, prev)
			}
			last[id] = g
		}
	}
}

// slowProxy serves, on a TCP address it returns, FerretDB's socket one write at a time (through
// a socket at oneWrite, mongotest.OneWriteAtATimeOn), with each command held 0.3–3 s
// (mongotest.DelayCommands) once slowDown is called: a database that is slow, not down. Before,
// the tests' stores make their collections and indexes (firstUse), a dozen commands each,
// which would take half a minute of the test and are no part of what it checks.
func slowProxy(t *testing.T, socket, oneWrite string) (addr string, slowDown func()) {
	t.Helper()
	stop, err := mongotest.OneWriteAtATimeOn(socket, oneWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	var slow atomic.Bool
	delay := mongotest.DelayCommands(300*time.Millisecond, 3*time.Second)
	addr = mongotest.ServeTCP(oneWrite, func(client net.Conn, msg []byte) bool {
		return !slow.Load() || delay(client, msg)
	})
	return addr, func() { slow.Store(true) }
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
	eventstest.Follow(t, follower)
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
