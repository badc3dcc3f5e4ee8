package posts

// A crash of the process, or a failure of the store, between a post and its answer.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// crashedCreate is a GraphQL create under key, on b at the clock's start, whose process is
// killed after it stored its post and before it kept its answer; then the process starts again.
// It returns the service, the clock, alice's context, the answer the create would have sent, and
// the one post it stored.
func crashedCreate(t *testing.T, b backend, key Keyed) (*keyed, *time.Time, context.Context, Answer, store.Post) {
	t.Helper()
	st := b.open(t)
	crashing := &crashingKeys{IdempotencyStore: st, crash: true}
	k := newKeyed(t, st, crashing)
	clock := setClock(t, start)
	ctx := WithCaller(t.Context(), alice)
	first, _, err := k.svc.RunOnce(ctx, alice, key, graphQL(k.svc, "written"))
	if err != nil {
		t.Fatal(err)
	}
	crashing.crash = false // the process that starts again
	posts := stored(t, st)
	if len(posts) != 1 {
		t.Fatalf("%d posts stored by the first attempt; want 1", len(posts))
	}
	return k, clock, ctx, first, posts[0]
}

func TestACrashBetweenThePostAndItsAnswer(t *testing.T) {
	for _, b := range backends {
		t.Run("on "+b.name, func(t *testing.T) {
			key := Keyed{Key: "crash", Fingerprint: "f"}
			k, clock, ctx, first, post := crashedCreate(t, b, key)
			st := k.st
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
				if after := stored(t, st); len(after) != 1 || after[0].ID != post.ID {
					t.Errorf("stored %v; want only %s", ids(after), post.ID)
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

// published returns the writes published since the subscription was last read, a line each.
func (k *keyed) published() []string {
	var out []string
	for {
		select {
		case e := <-k.sub.C():
			out = append(out, fmt.Sprintf("%v %s v%d", map[EventKind]string{Created: "created", Updated: "updated", Deleted: "deleted"}[e.Kind], e.Post.ID, e.Post.Version))
		default:
			return out
		}
	}
}

// A create whose attempt stored its post and stopped before it kept its answer, the post deleted
// by its user, then the retry after the lease: the retry is told that the key's post was created
// and deleted since, and brings nothing back.
func TestARetryAfterTheKeysPostWasDeletedCreatesNothing(t *testing.T) {
	for _, b := range backends {
		t.Run("on "+b.name, func(t *testing.T) {
			key := Keyed{Key: "deleted", Fingerprint: "f"}
			k, clock, ctx, _, post := crashedCreate(t, b, key)
			st, id := k.st, post.ID
			if err := k.svc.Delete(ctx, alice, id, Expect{}); err != nil {
				t.Fatalf("deleting the post: %v", err)
			}
			want := []string{"created " + id + " v1", "deleted " + id + " v1"}
			if got := k.published(); !slices.Equal(got, want) {
				t.Fatalf("published %v before the retry; want %v", got, want)
			}
			retries := []struct {
				name string
				run  func() (Answer, bool, error)
			}{
				{"a GraphQL retry", func() (Answer, bool, error) {
					return k.svc.RunOnce(ctx, alice, key, func(ctx context.Context) (Answer, error) {
						p, err := k.svc.Create(ctx, CallerFrom(ctx), NewPost{Title: "written"})
						return render(p), err
					})
				}},
				{"a REST retry", func() (Answer, bool, error) {
					return k.svc.CreateOnce(ctx, alice, NewPost{Title: "written"}, key, render)
				}},
			}
			for i, retry := range retries {
				t.Run(retry.name+" after the lease is told the key's post was deleted, and changes nothing", func(t *testing.T) {
					*clock = start.Add(time.Duration(i+1) * 20 * time.Second)
					a, replayed, err := retry.run()
					var gone *KeyPostDeletedError
					if !errors.As(err, &gone) || gone.PostID != id || replayed {
						t.Errorf("the retry: %d %s, replayed %v, %v; want a KeyPostDeletedError naming %s", a.Status, a.Body, replayed, err, id)
					}
					if after := stored(t, st); len(after) != 0 {
						t.Errorf("stored %v after the retry; want the post still deleted", ids(after))
					}
					if got, err := k.svc.Get(ctx, id); !errors.Is(err, ErrNotFound) {
						t.Errorf("a read of %s after the retry: %+v, %v; want ErrNotFound", id, got, err)
					}
					got := k.published()
					if len(got) != 0 {
						t.Errorf("published %v by the retry; want nothing", got)
					}
					// What subscribers saw last of the post is what the store holds: a post
					// stored again whose create's event was not published is lost to them.
					seen := slices.Concat(want, got)
					if _, err := st.GetPost(t.Context(), id); err == nil && strings.HasPrefix(seen[len(seen)-1], "deleted") {
						t.Errorf("%s is stored again, and subscribers saw %v: its create's event was never published", id, seen)
					}
				})
			}
			t.Run("the log holds the create's and the delete's events, and nothing else", func(t *testing.T) {
				var got []string
				for _, e := range readLog(t, st) {
					got = append(got, fmt.Sprintf("%s %s v%d", e.Kind, e.Post.ID, e.Post.Version))
				}
				if !slices.Equal(got, want) {
					t.Errorf("the log holds %v; want %v", got, want)
				}
			})
		})
	}
}

// readLog reads st's whole event log.
func readLog(t *testing.T, st store.Store) []store.Event {
	t.Helper()
	var all []store.Event
	for after := int64(0); ; {
		page, upto, err := st.(store.EventLog).ReadEvents(t.Context(), after, 100)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if upto == after {
			return all
		}
		after = upto
	}
}
