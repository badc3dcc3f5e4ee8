package posts

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// readsCounted is an embedded store whose reads of its event log are counted.
type readsCounted struct {
	*sqlite.Store
	reads atomic.Int64
}

func (s *readsCounted) KeepsAfter(ctx context.Context, position int64) (bool, error) {
	s.reads.Add(1)
	return s.Store.KeepsAfter(ctx, position)
}

func (s *readsCounted) ReadEvents(ctx context.Context, after int64, limit int) ([]store.Event, int64, error) {
	s.reads.Add(1)
	return s.Store.ReadEvents(ctx, after, limit)
}

func TestResumeAfter(t *testing.T) {
	st := &readsCounted{Store: newStore(t).(*sqlite.Store)}
	broker, follower := publishing(t, st)
	svc := NewService(Config{Store: st, Timeout: time.Second, MaxLimit: 10, Logger: zap.NewNop(), Events: broker, Follower: follower})
	alice := auth.Identity{UserID: "alice", Method: auth.MethodAPIKey}
	var cursors []string
	for range 3 {
		sub := broker.Subscribe(nil)
		if _, err := svc.Create(t.Context(), alice, NewPost{Title: "t"}); err != nil {
			t.Fatal(err)
		}
		cursors = append(cursors, svc.Cursor((<-sub.C()).Position))
		sub.Close()
	}

	t.Run("a cursor of the log names its event's position", func(t *testing.T) {
		for i, c := range cursors {
			if p, err := svc.ResumeAfter(t.Context(), c); err != nil || p != int64(i+1) {
				t.Errorf("ResumeAfter(%q) = %d, %v; want %d", c, p, err, i+1)
			}
		}
	})
	t.Run("a cursor the log did not make is refused with no read of the log", func(t *testing.T) {
		st.reads.Store(0)
		other := svc.Cursor(1)
		for _, bad := range []string{"", "x", strings.Repeat("A", len(other)), other[:len(other)-1] + "x", other + "A"} {
			_, err := svc.ResumeAfter(t.Context(), bad)
			if invalid, ok := errors.AsType[*InvalidError](err); !ok || invalid.Field != "resumeFrom" {
				t.Errorf("ResumeAfter(%q): %v; want an InvalidError of resumeFrom", bad, err)
			}
		}
		if n := st.reads.Load(); n != 0 {
			t.Errorf("refusing them read the log %d times", n)
		}
	})
	t.Run("a cursor after which an event expired is ErrCursorExpired", func(t *testing.T) {
		// The newest alone is kept.
		if _, err := st.ExpireEvents(t.Context(), time.Now().Add(-time.Hour), 1); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.ResumeAfter(t.Context(), cursors[0]); !errors.Is(err, ErrCursorExpired) {
			t.Errorf("ResumeAfter of the first cursor, whose next event expired: %v; want ErrCursorExpired", err)
		}
		// The second's event expired too, but every event after it is kept: nothing is lost.
		for i, c := range cursors[1:] {
			if p, err := svc.ResumeAfter(t.Context(), c); err != nil || p != int64(i+2) {
				t.Errorf("ResumeAfter of cursor %d, with every later event kept = %d, %v", i+2, p, err)
			}
		}
	})
	t.Run("a read's cursor resumes after every event it reflects, even expired", func(t *testing.T) {
		ctx, seen := svc.WithSeen(t.Context())
		if _, err := svc.List(ctx, ListQuery{}); err != nil {
			t.Fatal(err)
		}
		c := svc.ReadCursor(ctx, seen)
		if p, err := svc.ResumeAfter(t.Context(), c); err != nil || p != 3 {
			t.Fatalf("ResumeAfter of the read's cursor = %d, %v; want 3, the last event's", p, err)
		}
		// A quiet store: every event expires, and the read's cursor still resumes.
		if _, err := st.ExpireEvents(t.Context(), time.Now().Add(time.Hour), 0); err != nil {
			t.Fatal(err)
		}
		if p, err := svc.ResumeAfter(t.Context(), c); err != nil || p != 3 {
			t.Errorf("ResumeAfter of the read's cursor once every event expired = %d, %v; want 3", p, err)
		}
	})
}

func TestReadCursorBeforeTheLogIsRead(t *testing.T) {
	st := newStore(t)
	broker := events.NewBroker[*Event](100)
	t.Cleanup(broker.Close)
	follower := events.NewFollower(events.FollowerConfig{Log: st.(store.EventLog), Hand: func(e store.Event) { Publish(broker, e) }})
	svc := NewService(Config{Store: st, Timeout: 5 * time.Second, MaxLimit: 10, Logger: zap.NewNop(), Events: broker, Follower: follower})
	ctx, seen := svc.WithSeen(t.Context())
	if _, err := svc.List(ctx, ListQuery{}); err != nil {
		t.Fatal(err)
	}
	// A read served before the follower has read the log (a service that has just started)
	// waits for it rather than leave its client without a cursor.
	run, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	time.AfterFunc(50*time.Millisecond, func() {
		defer close(done)
		follower.Run(run)
	})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	c := svc.ReadCursor(ctx, seen)
	if p, err := svc.ResumeAfter(t.Context(), c); err != nil || p != 0 {
		t.Errorf("ResumeAfter(%q), the cursor of a read made before the log was read = %d, %v; want 0", c, p, err)
	}
	// One whose follower does not start within the service's timeout has none.
	idle := NewService(Config{Store: st, Timeout: 10 * time.Millisecond, MaxLimit: 10, Logger: zap.NewNop(), Events: broker,
		Follower: events.NewFollower(events.FollowerConfig{Log: st.(store.EventLog), Hand: func(store.Event) {}})})
	ctx, seen = idle.WithSeen(t.Context())
	if _, err := idle.List(ctx, ListQuery{}); err != nil {
		t.Fatal(err)
	}
	if c := idle.ReadCursor(ctx, seen); c != "" {
		t.Errorf("ReadCursor with a follower that never starts = %q; want none", c)
	}
}

func TestReadCursorOfALogThatNeverHeldAnEvent(t *testing.T) {
	st := newStore(t)
	broker, follower := publishing(t, st)
	svc := NewService(Config{Store: st, Timeout: time.Second, MaxLimit: 10, Logger: zap.NewNop(), Events: broker, Follower: follower})
	ctx, seen := svc.WithSeen(t.Context())
	// A get of no post shows it absent, and a list shows none: both at position 0.
	if _, err := svc.Get(ctx, "67d446000000000000000001"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a get of no post: %v", err)
	}
	if _, err := svc.List(ctx, ListQuery{}); err != nil {
		t.Fatal(err)
	}
	c := svc.ReadCursor(ctx, seen)
	if p, err := svc.ResumeAfter(t.Context(), c); err != nil || p != 0 {
		t.Errorf("ResumeAfter(%q), the cursor of an empty list of an empty log = %d, %v; want 0, before its first event", c, p, err)
	}
	// A cursor past the log's last position (a store restored from an older backup) would miss
	// the events the log gives it next: it is refused.
	if _, err := svc.ResumeAfter(t.Context(), svc.Cursor(5)); !errors.Is(err, ErrCursorExpired) {
		t.Errorf("ResumeAfter of a cursor past the log: %v; want ErrCursorExpired", err)
	}
}
