package posts

// A crash of the process, or a failure of the store, between a post and its answer.

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// crashingKeys is a store whose writes of a key's answer fail as a process killed at that moment
// would leave them: not written. Its InsertPostCompletingKey then fails whole, as the
// transaction of a killed process does.
type crashingKeys struct {
	store.IdempotencyStore
	crash bool
}

var errKilled = errors.New("killed")

func (c *crashingKeys) CompleteKey(ctx context.Context, user, key string, res store.Response) error {
	if c.crash {
		return errKilled
	}
	return c.IdempotencyStore.CompleteKey(ctx, user, key, res)
}

func (c *crashingKeys) InsertPostCompletingKey(ctx context.Context, p store.Post, key string, res store.Response) (store.Event, bool, error) {
	if c.crash {
		return store.Event{}, false, errKilled
	}
	return c.IdempotencyStore.InsertPostCompletingKey(ctx, p, key, res)
}

func TestACrashBetweenThePostAndItsAnswer(t *testing.T) {
	for _, b := range backends {
		t.Run("on "+b.name, func(t *testing.T) {
			st := b.open(t)
			crashing := &crashingKeys{IdempotencyStore: st, crash: true}
			k := newKeyed(t, st, crashing)
			clock := setClock(t, start)
			ctx := WithCaller(t.Context(), alice)
			key := Keyed{Key: "crash", Fingerprint: "f"}
			first, _, err := k.svc.RunOnce(ctx, alice, key, graphQL(k.svc, "written"))
			if err != nil {
				t.Fatal(err)
			}
			crashing.crash = false // the process that starts again
			posts := stored(t, st)
			if len(posts) != 1 {
				t.Fatalf("%d posts stored before the retry; want 1", len(posts))
			}
			t.Run("a retry within the first's lease is told to wait", func(t *testing.T) {
				*clock = start.Add(19 * time.Second)
				var inUse *KeyInUseError
				if _, _, err := k.svc.RunOnce(ctx, alice, key, graphQL(k.svc, "written")); !errors.As(err, &inUse) || inUse.RetryAfter <= 0 || inUse.RetryAfter > time.Second {
					t.Errorf("error = %v; want a KeyInUseError with a RetryAfter of at most 1s", err)
				}
			})
			t.Run("a retry after the lease gets the post the first wrote, replayed", func(t *testing.T) {
				*clock = start.Add(20 * time.Second)
				again, replayed, err := k.svc.RunOnce(ctx, alice, key, graphQL(k.svc, "written"))
				if err != nil || !replayed || !bytes.Equal(again.Body, first.Body) {
					t.Errorf("got %s, replayed %v, %v; want %s", again.Body, replayed, err, first.Body)
				}
			})
			t.Run("the post is stored once and published once", func(t *testing.T) {
				if after := stored(t, st); len(after) != 1 || after[0].ID != posts[0].ID {
					t.Errorf("stored %v; want only %s", ids(after), posts[0].ID)
				}
				if created := k.events(); len(created) != 1 {
					t.Errorf("published %v; want one event", created)
				}
			})
			t.Run("the answer is kept now", func(t *testing.T) {
				*clock = start.Add(time.Hour)
				again, replayed, err := k.svc.RunOnce(ctx, alice, key, graphQL(k.svc, "written"))
				if err != nil || !replayed || !bytes.Equal(again.Body, first.Body) {
					t.Errorf("got %s, replayed %v, %v", again.Body, replayed, err)
				}
			})
		})
	}
}

func TestAFailedWriteReleasesItsKeyAtOnce(t *testing.T) {
	st := newStore(t).(keyedStore)
	crashing := &crashingKeys{IdempotencyStore: st, crash: true}
	k := newKeyed(t, st, crashing)
	ctx := WithCaller(t.Context(), alice)
	key := Keyed{Key: "fails", Fingerprint: "f"}
	if _, _, err := k.svc.CreateOnce(ctx, alice, NewPost{Title: "t"}, key, render); !errors.Is(err, errKilled) {
		t.Fatalf("error = %v; want the store's", err)
	}
	if n := len(stored(t, st)); n != 0 {
		t.Fatalf("%d posts stored by a failed transaction", n)
	}
	crashing.crash = false
	a, replayed, err := k.svc.CreateOnce(ctx, alice, NewPost{Title: "t"}, key, render)
	if err != nil || replayed || a.Status != 201 {
		t.Errorf("the retry: %+v, replayed %v, %v; want a 201 made now", a, replayed, err)
	}
	if posts := stored(t, st); len(posts) != 1 || !bytes.Contains(a.Body, []byte(posts[0].ID)) {
		t.Errorf("stored %v; want the one post of the answer %s", ids(posts), a.Body)
	}
}
