package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// downStore is a store that is up or down at the test's word: down, a call fails with
// store.ErrUnavailable, and a ping waits out its context first, as a MongoDB driver waiting for a
// server does. It counts the calls that reach it, and the most pings at once.
type downStore struct {
	store.Store            // the methods the tests do not call
	store.IdempotencyStore // likewise
	down                   atomic.Bool
	calls                  atomic.Int64
	pings                  atomic.Int64
	pinging                atomic.Int64
	mostPinging            atomic.Int64
}

var errDown = fmt.Errorf("%w: no server", store.ErrUnavailable)

func (s *downStore) GetPost(ctx context.Context, id string) (store.Post, error) {
	s.calls.Add(1)
	switch {
	case s.down.Load():
		return store.Post{}, errDown
	case ctx.Err() != nil:
		return store.Post{}, fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
	case id == "missing":
		return store.Post{}, store.ErrNotFound
	case id == "bad":
		return store.Post{}, errors.New("a fault of the store")
	case id == "stalls": // a server gone, which the driver waits for until the deadline
		<-ctx.Done()
		return store.Post{}, fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
	}
	return store.Post{ID: id}, nil
}

func (s *downStore) ReserveKey(ctx context.Context, r store.IdempotencyRecord, now time.Time) (store.IdempotencyRecord, bool, error) {
	s.calls.Add(1)
	if s.down.Load() {
		return store.IdempotencyRecord{}, false, errDown
	}
	return r, true, nil
}

func (s *downStore) Ping(ctx context.Context) error {
	s.pings.Add(1)
	n := s.pinging.Add(1)
	defer s.pinging.Add(-1)
	for most := s.mostPinging.Load(); n > most && !s.mostPinging.CompareAndSwap(most, n); most = s.mostPinging.Load() {
	}
	if s.down.Load() {
		<-ctx.Done()
		return errDown
	}
	return nil
}

// newBreaker is a breaker on s, stopped when the test ends, with short probes; its changes are
// sent on the channel it returns.
func newBreaker(t *testing.T, s *downStore) (*store.Breaker, <-chan bool) {
	changes := make(chan bool, 100)
	b := store.NewBreaker(s, store.BreakerConfig{ProbeEvery: 10 * time.Millisecond, ProbeTimeout: 30 * time.Millisecond, Changed: func(open bool) { changes <- open }})
	t.Cleanup(b.Stop)
	return b, changes
}

// fail makes n calls through st that fail with the store down.
func fail(t *testing.T, st store.Store, ctx context.Context, n int) {
	t.Helper()
	for range n {
		if _, err := st.GetPost(ctx, "p"); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("a call to a store down: %v", err)
		}
	}
}

func TestBreakerOpensAfterFailuresInARow(t *testing.T) {
	for _, tt := range []struct {
		name     string
		between  string // the id of a call made between two runs of four failures
		wantOpen bool
	}{
		{"eight failures in a row open it", "", true},
		{"a post found between them starts the count again", "p", false},
		{"a post not found is an answer too", "missing", false},
		{"so is another error of the store", "bad", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &downStore{}
			b, _ := newBreaker(t, s)
			st := b.Guard(s)
			s.down.Store(true)
			fail(t, st, t.Context(), 4)
			if tt.between != "" {
				s.down.Store(false)
				st.GetPost(t.Context(), tt.between)
				s.down.Store(true)
			}
			fail(t, st, t.Context(), 4)
			if b.Open() != tt.wantOpen {
				t.Errorf("open = %v, want %v", b.Open(), tt.wantOpen)
			}
		})
	}
}

func TestAnOpenBreakerFailsAtOnce(t *testing.T) {
	s := &downStore{}
	b, changes := newBreaker(t, s)
	st, keys := b.Guard(s), b.GuardIdempotency(s)
	s.down.Store(true)
	fail(t, st, t.Context(), store.DefaultBreakerThreshold)
	if !b.Open() || !<-changes {
		t.Fatal("not open after the threshold's failures")
	}
	reached := s.calls.Load()
	for name, call := range map[string]func() error{
		"a read": func() error { _, err := st.GetPost(t.Context(), "p"); return err },
		"a ping": func() error { return st.Ping(t.Context()) },
		"a call of the key store": func() error {
			_, _, err := keys.ReserveKey(t.Context(), store.IdempotencyRecord{}, time.Now())
			return err
		},
	} {
		t.Run(name+" is refused with ErrBreakerOpen, which is ErrUnavailable", func(t *testing.T) {
			err := call()
			if !errors.Is(err, store.ErrBreakerOpen) || !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("err = %v", err)
			}
		})
	}
	if s.calls.Load() != reached {
		t.Errorf("%d calls reached the store through the open breaker", s.calls.Load()-reached)
	}
}

func TestTheCallersCancellationDoesNotCount(t *testing.T) {
	s := &downStore{}
	b, _ := newBreaker(t, s)
	st := b.Guard(s)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	fail(t, st, cancelled, 3*store.DefaultBreakerThreshold)
	if b.Open() {
		t.Fatal("calls whose caller went away opened the breaker")
	}
	t.Run("but a deadline does", func(t *testing.T) {
		expired, cancel := context.WithTimeout(t.Context(), -time.Second)
		defer cancel()
		fail(t, st, expired, store.DefaultBreakerThreshold)
		if !b.Open() {
			t.Error("calls past their deadline did not open the breaker")
		}
	})
}

func TestOneProbeClosesTheBreakerOnceTheStoreAnswers(t *testing.T) {
	s := &downStore{}
	b, changes := newBreaker(t, s)
	st := b.Guard(s)
	s.down.Store(true)
	// Many callers at once: one breaker opens once and runs one probe.
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				st.GetPost(t.Context(), "p")
			}
		})
	}
	wg.Wait()
	for s.pings.Load() < 5 {
		time.Sleep(time.Millisecond)
	}
	if most := s.mostPinging.Load(); most != 1 {
		t.Errorf("%d pings at once; want one probe", most)
	}
	s.down.Store(false)
	select {
	case open := <-changes:
		if !open {
			t.Fatal("closed before it opened")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("never opened")
	}
	select {
	case open := <-changes:
		if open {
			t.Fatal("opened twice")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the store answers again, and the breaker is still open")
	}
	if p, err := st.GetPost(t.Context(), "p"); err != nil || p.ID != "p" {
		t.Errorf("after it closed: %v %v", p, err)
	}
	if len(changes) != 0 {
		t.Errorf("%d more changes", len(changes))
	}
}

func TestStopEndsTheProbe(t *testing.T) {
	s := &downStore{}
	b, _ := newBreaker(t, s)
	s.down.Store(true)
	fail(t, b.Guard(s), t.Context(), store.DefaultBreakerThreshold)
	for s.pings.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	b.Stop()
	pinged := s.pings.Load()
	time.Sleep(50 * time.Millisecond) // five probe intervals
	if s.pinging.Load() != 0 || s.pings.Load() != pinged {
		t.Errorf("the probe pinged after Stop")
	}
}

// TestTheBreakerUnderConcurrentCalls is for -race: callers, a store going up and down, the probe.
func TestTheBreakerUnderConcurrentCalls(t *testing.T) {
	s := &downStore{}
	b, _ := newBreaker(t, s)
	st := b.Guard(s)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					st.GetPost(t.Context(), "p")
				}
			}
		})
	}
	for i := range 40 {
		s.down.Store(i%2 == 0)
		time.Sleep(5 * time.Millisecond)
	}
	s.down.Store(false)
	close(stop)
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for b.Open() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if b.Open() {
		t.Error("the store is up, and the breaker stays open")
	}
}

func TestCallsWaitingOnAStoreThatAnswersNoneOpenTheBreaker(t *testing.T) {
	s := &downStore{}
	changes := make(chan bool, 100)
	b := store.NewBreaker(s, store.BreakerConfig{StallAfter: 100 * time.Millisecond, ProbeEvery: 10 * time.Millisecond,
		ProbeTimeout: 30 * time.Millisecond, Changed: func(open bool) { changes <- open }, Down: func() bool { return true }})
	t.Cleanup(b.Stop)
	st := b.Guard(s)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // the service's timeout, far off
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wait := func(n int) {
		for range n {
			wg.Go(func() { _, _ = st.GetPost(ctx, "stalls") })
		}
	}
	t.Run("fewer calls than the threshold, waiting, do not open it", func(t *testing.T) {
		wait(store.DefaultBreakerThreshold - 1)
		time.Sleep(300 * time.Millisecond)
		if b.Open() {
			t.Fatal("the breaker opened")
		}
	})
	t.Run("waiting calls do not open it while the store answers others", func(t *testing.T) {
		wait(1)
		for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := st.GetPost(ctx, "p"); err != nil {
				t.Fatal(err)
			}
		}
		if b.Open() {
			t.Fatal("the breaker opened")
		}
	})
	t.Run("as many as the threshold, with no answer, open it without waiting for their time-outs", func(t *testing.T) {
		select {
		case open := <-changes:
			if !open {
				t.Fatal("the breaker closed")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the breaker did not open")
		}
		if _, err := st.GetPost(t.Context(), "p"); !errors.Is(err, store.ErrBreakerOpen) {
			t.Errorf("a call while it is open: %v; want ErrBreakerOpen", err)
		}
	})
}

// Slow is not down: calls that wait, more than the threshold at once and longer than
// StallAfter, on a store whose server is up (or that has no server to lose) do not open the
// breaker; they end with their own time-outs.
func TestCallsWaitingOnAStoreThatIsUpDoNotOpenTheBreaker(t *testing.T) {
	for _, tc := range []struct {
		name string
		down func() bool
	}{
		{"a store whose client says its server is up", func() bool { return false }},
		{"a store with no server to lose", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &downStore{}
			var opened atomic.Int64
			b := store.NewBreaker(s, store.BreakerConfig{StallAfter: 50 * time.Millisecond, ProbeEvery: 10 * time.Millisecond,
				ProbeTimeout: 30 * time.Millisecond, Down: tc.down, Changed: func(open bool) {
					if open {
						opened.Add(1)
					}
				}})
			t.Cleanup(b.Stop)
			st := b.Guard(s)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			var wg sync.WaitGroup
			for range 2 * store.DefaultBreakerThreshold {
				wg.Go(func() { _, _ = st.GetPost(ctx, "stalls") })
			}
			time.Sleep(400 * time.Millisecond)
			cancel()
			wg.Wait()
			if n := opened.Load(); n != 0 {
				t.Errorf("the breaker opened %d times on calls that were waiting on a store that is up", n)
			}
			if _, err := st.GetPost(t.Context(), "p"); err != nil {
				t.Errorf("a call after them: %v", err)
			}
		})
	}
}
