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
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// readsCounted is an embedded store whose reads of its event log are counted.
type readsCounted struct {
	*sqlite.Store
	reads atomic.Int64
}

func (s *readsCounted) Kept(ctx context.Context, position int64) (bool, error) {
	s.reads.Add(1)
	return s.Store.Kept(ctx, position)
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
	t.Run("a cursor whose event expired is ErrCursorExpired", func(t *testing.T) {
		// The newest alone is kept.
		if _, err := st.ExpireEvents(t.Context(), time.Now().Add(-time.Hour), 1); err != nil {
			t.Fatal(err)
		}
		for _, c := range cursors[:2] {
			if _, err := svc.ResumeAfter(t.Context(), c); !errors.Is(err, ErrCursorExpired) {
				t.Errorf("ResumeAfter of an expired cursor: %v; want ErrCursorExpired", err)
			}
		}
		if p, err := svc.ResumeAfter(t.Context(), cursors[2]); err != nil || p != 3 {
			t.Errorf("ResumeAfter of the cursor kept = %d, %v", p, err)
		}
	})
}
