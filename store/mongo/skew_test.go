package mongo_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// skewed is one database and three instances on it whose clocks differ by ±90 s: slow reaches
// it through a proxy that can hold its commands back, behind and ahead directly.
type skewed struct {
	slow, behind, ahead *mongo.Store
	proxy               *mongotest.FaultProxy
}

func newSkewed(t *testing.T) *skewed {
	t.Helper()
	server := mongotest.FerretDB(t)
	proxy := mongotest.NewFaultProxy(t, server.Socket)
	behind := opener(server.URI)(t).(*mongo.Store)
	ahead := reopener(server.URI)(t, behind).(*mongo.Store)
	slow := reopener(proxy.URI)(t, behind).(*mongo.Store)
	behind.SetClock(-90 * time.Second)
	ahead.SetClock(90 * time.Second)
	for _, s := range []*mongo.Store{behind, ahead, slow} {
		firstUse(t, s)
	}
	return &skewed{slow: slow, behind: behind, ahead: ahead, proxy: proxy}
}

// post is the n-th post of the test.
func post(n int) store.Post {
	p := firstPost
	p.ID = fmt.Sprintf("67d4460000000000000000%02d", n)
	return p
}

// untilHit waits for the proxy to apply f once more than before.
func untilHit(t *testing.T, proxy *mongotest.FaultProxy, f mongotest.Fault, before int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); proxy.Hits(f) <= before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the proxy did not meet the command")
		}
	}
}

// Instances whose clocks are 90 s apart time each wait of the event log from when they first
// saw what they wait on: a writer slower than the others' clocks say, but faster than the
// waits, keeps its position, and expiry does not cut past a position it may still fill.
func TestClocksApartDecideNothingEarly(t *testing.T) {
	t.Parallel() // on servers of its own, and sets none of the package's waits (SetWaits)
	t.Run("a slow writer's position is not filled by readers whose clocks say the events after it are old", func(t *testing.T) {
		k := newSkewed(t)
		// Each position the writer takes is held back 500 ms before its event's insert: well
		// within holeWait (2 s).
		held := mongotest.Fault{Command: "insert", Collection: mongo.EventsCollection, Delay: 500 * time.Millisecond}
		for range 3 {
			k.proxy.Arm(held)
		}
		defer k.proxy.Disarm()
		type result struct {
			e   store.Event
			err error
		}
		done := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			e, err := k.slow.InsertPost(ctx, post(1))
			done <- result{e, err}
		}()
		// Meanwhile the instance behind writes, and the one ahead reads, on and on.
		var (
			wg      sync.WaitGroup
			written int
			stop    = make(chan struct{})
		)
		wg.Go(func() {
			after := int64(0)
			for n := 2; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := k.behind.InsertPost(t.Context(), post(n)); err != nil {
					t.Error(err)
					return
				}
				written++
				for _, s := range []*mongo.Store{k.ahead, k.behind} {
					if _, upto, err := s.ReadEvents(t.Context(), after, 100); err != nil {
						t.Error(err)
					} else if s == k.behind {
						after = upto
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
		r := <-done
		close(stop)
		wg.Wait()
		if r.err != nil {
			t.Fatalf("the slow write: %v; want it stored", r.err)
		}
		if k.proxy.Hits(held) != 1 {
			t.Errorf("the slow writer inserted its event %d times; want once, at the position it took first", k.proxy.Hits(held))
		}
		st, err := k.ahead.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if st.Events != int64(written+1) {
			t.Errorf("the log holds %d documents for %d events: markers filled positions a writer was filling", st.Events, written+1)
		}
	})
	t.Run("a pending write whose writer's clock is behind is not taken over while its writer is at work", func(t *testing.T) {
		k := newSkewed(t)
		k.slow.SetClock(-90 * time.Second)
		if _, err := k.slow.InsertPost(t.Context(), firstPost); err != nil {
			t.Fatal(err)
		}
		// The writer's position is held back 500 ms after its write: within helpAfter (1 s).
		held := mongotest.Fault{Command: "findAndModify", Collection: mongo.CountersCollection, Delay: 500 * time.Millisecond}
		k.proxy.Arm(held)
		defer k.proxy.Disarm()
		done := make(chan store.Event, 1)
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			e, err := k.slow.UpdatePost(ctx, firstPost.ID, "alice", store.AnyVersion, update("v2"))
			if err != nil {
				t.Error(err)
			}
			done <- e
		}()
		untilHit(t, k.proxy, held, 0)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if _, err := k.ahead.UpdatePost(ctx, firstPost.ID, "alice", store.AnyVersion, update("v3")); err != nil {
			t.Fatal(err)
		}
		if e := <-done; e.Origin != k.slow.Origin() {
			t.Errorf("the slow writer's event was logged by %q; want by its writer %q", e.Origin, k.slow.Origin())
		}
		time.Sleep(2100 * time.Millisecond) // past holeWait: any hole is decided by now
		events, _, err := k.ahead.ReadEvents(t.Context(), 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		st, err := k.ahead.Stats(t.Context())
		if err != nil || len(events) != 3 || st.Events != 3 {
			t.Errorf("the log holds %d events in %d documents, %v; want 3 in 3, no marker", len(events), st.Events, err)
		}
	})
	t.Run("expiry does not cut past a hole whose next event's writer has a clock behind", func(t *testing.T) {
		k := newSkewed(t)
		if _, err := k.behind.InsertPost(t.Context(), post(1)); err != nil {
			t.Fatal(err)
		}
		hole := k.slow.TakePosition(t) // a writer at work
		var after store.Event
		for n := 2; n <= 4; n++ {
			var err error
			if after, err = k.behind.InsertPost(t.Context(), post(n)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := k.ahead.ExpireEvents(t.Context(), time.Time{}, 1); err != nil {
			t.Fatal(err)
		}
		if kept, err := k.ahead.Kept(t.Context(), hole+1); err != nil || !kept {
			t.Errorf("Kept(%d), the event after the hole at %d (the last at %d), = %v, %v: expiry cut past a position a writer may still fill", hole+1, hole, after.Position, kept, err)
		}
	})
}
