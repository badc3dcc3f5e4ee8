//go:build long

// A database stopped and started again, once fast and once slow (slow_test.go's proxy): tens of
// seconds of writes before, during and after the outage, built with the tag long only.

package mongo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/internal/race"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// A write after the database comes back, through the store's breaker, succeeds within a second
// of its restart, on a loaded machine.
func TestWritesSucceedWithinASecondOfADatabaseRestart(t *testing.T) {
	t.Parallel() // on a server of its own, and sets none of the package's waits (SetWaits)
	dir, _, socket, server := restartableFerretDB(t, "ferretdb-restart-")
	s, err := mongo.Open(server.URI, fmt.Sprintf("restart_%d", databases.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b := store.NewBreaker(s, store.BreakerConfig{Down: s.Down})
	t.Cleanup(b.Stop)
	st := b.Guard(s)
	n := 0
	write := func(timeout time.Duration) error {
		n++
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		_, err := st.InsertPost(ctx, post(n))
		return err
	}
	if err := write(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	server.Close()
	// The writes meanwhile fail, and open the breaker: each at its deadline, as the driver waits
	// for a server to select, so one of 1 s (a timeout a config may set) opens it in 5 s rather
	// than 25 s; the writes after the restart have 5 s.
	for deadline := time.Now().Add(30 * time.Second); !b.Open(); {
		if err := write(time.Second); err == nil {
			t.Fatal("a write succeeded with the database stopped")
		}
		if time.Now().After(deadline) {
			t.Fatal("the breaker did not open")
		}
	}
	time.Sleep(2 * time.Second) // down a while
	if server, err = mongotest.StartOn(dir, socket); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Close)
	back := time.Now()
	for write(5*time.Second) != nil {
		if time.Since(back) > 30*time.Second {
			t.Fatal("no write succeeded 30 s after the restart")
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(back)
	t.Logf("the first write succeeded %v after the restart", took.Round(time.Millisecond))
	if !race.Enabled && took > time.Second {
		t.Errorf("the first write succeeded %v after the restart; want within 1 s", took.Round(time.Millisecond))
	}
}

// A database restarted while it answers every command 0.3–3 s late: two instances' writes
// succeed until it stops, none refused or unavailable, fail while it is down, and succeed again
// once it is back, within a second of its answers reaching the instance (measured: each
// breaker closed 1.4-2.5 s after the restart, the driver's hello and the probe's ping through
// the proxy); and every write acknowledged is stored with its event.
func TestASlowDatabaseRestartedLosesNoWriteAndRefusesNoneOnceBack(t *testing.T) {
	// Beside the slow database's other test: both wait out the proxy's delays, and its bound,
	// 10 s, is on what those delays take, not on the machine's load.
	t.Parallel()
	dir, sockDir, socket, server := restartableFerretDB(t, "ferretdb-slow-restart-")
	// Through the proxy that lets one write at a time into FerretDB, which dials it anew for
	// each connection (and so reaches the restarted one), and one that holds each command back.
	addr, slowDown := slowProxy(t, socket, filepath.Join(sockDir, "one-write.sock"))
	name := fmt.Sprintf("slow_restart_%d_%d", time.Now().UnixNano()%1e9, databases.Add(1))
	type outcome struct {
		instance   int
		begun, end time.Time
		post       string // post/version
		err        error
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		closedAt = make([]time.Time, 2) // when each breaker last closed
	)
	stores := make([]store.Store, 2)
	for i := range stores {
		s, err := mongo.Open("mongodb://"+addr+"/", name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		firstUse(t, s)
		// Its probe's pings bounded by the operations' timeout, as caddymodule's are.
		b := store.NewBreaker(s, store.BreakerConfig{Down: s.Down, ProbeTimeout: slowTimeout, Changed: func(open bool) {
			if !open {
				mu.Lock()
				closedAt[i] = time.Now()
				mu.Unlock()
			}
		}})
		t.Cleanup(b.Stop)
		stores[i] = b.Guard(s)
	}
	slowDown()
	writing := make(chan struct{})
	var wg sync.WaitGroup
	for i, st := range stores {
		for range 8 { // more than the breaker's threshold of calls waiting at once
			wg.Go(func() {
				for {
					select {
					case <-writing:
						return
					default:
					}
					p := post(0)
					p.ID = store.NewID(time.Now())
					for v := int64(1); v <= 2; v++ {
						call, cancel := context.WithTimeout(t.Context(), slowTimeout)
						begun := time.Now()
						var err error
						if v == 1 {
							_, err = st.InsertPost(call, p)
						} else {
							_, err = st.UpdatePost(call, p.ID, p.UserID, 1, update("v2"))
						}
						cancel()
						mu.Lock()
						outcomes = append(outcomes, outcome{i, begun, time.Now(), fmt.Sprintf("%s/%d", p.ID, v), err})
						mu.Unlock()
						if err != nil {
							time.Sleep(10 * time.Millisecond)
							break
						}
					}
				}
			})
		}
	}
	time.Sleep(8 * time.Second)
	stopping := time.Now()
	server.Close()
	time.Sleep(2 * time.Second) // down a while
	server, err := mongotest.StartOn(dir, socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Close)
	back := time.Now()
	time.Sleep(20 * time.Second)
	close(writing)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	acknowledged := map[string]bool{}
	lastFailed := make([]time.Time, 2) // the latest a failed write began, after the restart
	firstOK := make([]time.Time, 2)    // the earliest a write that succeeded began, after it
	for _, o := range outcomes {
		switch {
		case o.err == nil:
			acknowledged[o.post] = true
			if o.begun.After(back) && (firstOK[o.instance].IsZero() || o.begun.Before(firstOK[o.instance])) {
				firstOK[o.instance] = o.begun
			}
		case o.end.Before(stopping):
			t.Errorf("instance %d: a write failed before the database stopped: %v", o.instance, o.err)
		case o.begun.After(back) && o.begun.After(lastFailed[o.instance]):
			lastFailed[o.instance] = o.begun
		}
	}
	t.Logf("%d writes acknowledged of %d", len(acknowledged), len(outcomes))
	since := func(at time.Time) string {
		if at.IsZero() {
			return "never"
		}
		return at.Sub(back).Round(time.Millisecond).String()
	}
	for i := range stores {
		t.Logf("instance %d, after the restart: its breaker closed %s, the last write that failed began %s, the first that succeeded %s",
			i, since(closedAt[i]), since(lastFailed[i]), since(firstOK[i]))
		if firstOK[i].IsZero() {
			t.Errorf("instance %d: no write succeeded after the restart", i)
		}
		// The database answers again once the proxy has let through the driver's hello, a new
		// connection's and a command, each held up to 3 s: a write begun a second after that
		// is not refused.
		if bound := 3*3*time.Second + time.Second; !race.Enabled && lastFailed[i].Sub(back) > bound {
			t.Errorf("instance %d: a write that began %s after the restart failed; want none after %v",
				i, since(lastFailed[i]), bound)
		}
	}
	// Every write acknowledged has its event in the log.
	log, err := mongo.Open(server.URI, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	logged := map[string]bool{}
	var after int64
	for deadline := time.Now().Add(slowTimeout); ; {
		events, upto, err := log.ReadEvents(t.Context(), after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			logged[fmt.Sprintf("%s/%d", e.Post.ID, e.Post.Version)] = true
		}
		after = upto
		missing := 0
		for w := range acknowledged {
			if !logged[w] {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d writes acknowledged have no event in the log", missing)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// restartableFerretDB starts FerretDB on dir, a new temporary directory, serving a socket in
// sockDir (short, for the socket's path limit), where a test can start it again after it stops
// it (mongotest.StartOn).
func restartableFerretDB(t *testing.T, prefix string) (dir, sockDir, socket string, server *mongotest.Server) {
	t.Helper()
	dir = t.TempDir()
	sockDir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	socket = filepath.Join(sockDir, "mongodb.sock")
	if server, err = mongotest.StartOn(dir, socket); err != nil {
		t.Fatal(err)
	}
	return dir, sockDir, socket, server
}
