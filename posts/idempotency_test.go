package posts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/store"
)

// keyedStore is a store that keeps idempotency keys.
type keyedStore interface {
	store.Store
	store.IdempotencyStore
}

// backend is a store the idempotency tests run on.
type backend struct {
	name string
	open func(t *testing.T) keyedStore
}

// backends are the stores the idempotency tests run on: the embedded store, where a REST create
// and its answer are one transaction, and, without the race detector, MongoDB
// (idempotency_mongo_test.go).
var backends = []backend{
	{"sqlite", func(t *testing.T) keyedStore { return newStore(t).(keyedStore) }},
}

// keyed is a service over st that publishes to a subscription the test reads with its events.
type keyed struct {
	svc *Service
	st  keyedStore
	sub *events.Subscription[*Event]
}

func newKeyed(t *testing.T, st keyedStore, keys store.IdempotencyStore) *keyed {
	t.Helper()
	broker, follower := publishing(t, st)
	svc := NewService(Config{Store: st, Keys: keys, Timeout: 5 * time.Second, MaxLimit: 100, Logger: zap.NewNop(), Events: broker, Follower: follower})
	return &keyed{svc: svc, st: st, sub: broker.Subscribe(nil)}
}

// events returns the ids of the posts created since it was last called.
func (k *keyed) events() []string {
	var ids []string
	for {
		select {
		case e := <-k.sub.C():
			if e.Kind == Created {
				ids = append(ids, e.Post.ID)
			}
		default:
			return ids
		}
	}
}

// render is the answer of a REST create, as the handlers write it.
func render(p Post) Answer {
	return Answer{Status: 201, Header: map[string][]string{"Location": {"/posts/" + p.ID}},
		Body: fmt.Appendf(nil, `{"id":%q,"title":%q,"createdAt":%q}`, p.ID, p.Title, p.CreatedAt.Format(TimeFormat))}
}

// graphQL is a run of RunOnce as a GraphQL createPost makes it: a Create, then the answer read
// back from the store, as a selection of the post's fields would.
func graphQL(svc *Service, title string) func(context.Context) (Answer, error) {
	return func(ctx context.Context) (Answer, error) {
		p, err := svc.Create(ctx, CallerFrom(ctx), NewPost{Title: title})
		if err != nil {
			return Answer{Status: 200, Body: []byte(`{"errors":[{"message":"` + err.Error() + `"}],"data":null}`)}, nil
		}
		back, err := svc.Get(ctx, p.ID)
		if err != nil {
			return Answer{}, err
		}
		return Answer{Status: 200, Body: fmt.Appendf(nil, `{"data":{"createPost":{"id":%q,"title":%q}}}`, back.ID, back.Title)}, nil
	}
}

func TestARetryWithTheSameKeyGetsTheFirstAnswer(t *testing.T) {
	for _, b := range backends {
		t.Run("on "+b.name, func(t *testing.T) {
			st := b.open(t)
			k := newKeyed(t, st, nil)
			ctx := WithCaller(t.Context(), alice)
			key := Keyed{Key: "k1", Fingerprint: "POST /posts first"}
			first, replayed, err := k.svc.CreateOnce(ctx, alice, NewPost{Title: "first"}, key, render)
			if err != nil || replayed || first.Status != 201 {
				t.Fatalf("the first request: %+v, replayed %v, %v", first, replayed, err)
			}
			created := k.events()
			t.Run("a retry gets the same answer, byte for byte, and says it is replayed", func(t *testing.T) {
				again, replayed, err := k.svc.CreateOnce(ctx, alice, NewPost{Title: "first"}, key, render)
				if err != nil || !replayed || again.Status != first.Status || !bytes.Equal(again.Body, first.Body) ||
					fmt.Sprint(again.Header) != fmt.Sprint(first.Header) {
					t.Errorf("the retry: %d %v %s, replayed %v, %v; want %d %v %s", again.Status, again.Header, again.Body, replayed, err,
						first.Status, first.Header, first.Body)
				}
			})
			t.Run("one post is stored and one event published", func(t *testing.T) {
				if posts := stored(t, st); len(posts) != 1 || len(created) != 1 || created[0] != posts[0].ID {
					t.Errorf("stored %d posts, events %v", len(posts), created)
				}
				if more := k.events(); len(more) != 0 {
					t.Errorf("the retry published %v", more)
				}
			})
			t.Run("the same key with another request is refused and stores nothing", func(t *testing.T) {
				_, _, err := k.svc.CreateOnce(ctx, alice, NewPost{Title: "other"}, Keyed{Key: "k1", Fingerprint: "POST /posts other"}, render)
				if !errors.Is(err, ErrKeyReused) {
					t.Errorf("error = %v; want ErrKeyReused", err)
				}
				if n := len(stored(t, st)); n != 1 {
					t.Errorf("%d posts stored; want 1", n)
				}
			})
			t.Run("another user's same key is a key of their own", func(t *testing.T) {
				a, replayed, err := k.svc.CreateOnce(WithCaller(t.Context(), bob), bob, NewPost{Title: "first"}, key, render)
				if err != nil || replayed || bytes.Equal(a.Body, first.Body) {
					t.Errorf("bob's: %s, replayed %v, %v", a.Body, replayed, err)
				}
			})
			t.Run("a GraphQL run under a key is answered once, and its retry gets that answer", func(t *testing.T) {
				gk := Keyed{Key: "g1", Fingerprint: "graphql createPost"}
				a, replayed, err := k.svc.RunOnce(ctx, alice, gk, graphQL(k.svc, "by graphql"))
				if err != nil || replayed {
					t.Fatalf("%s, replayed %v, %v", a.Body, replayed, err)
				}
				again, replayed, err := k.svc.RunOnce(ctx, alice, gk, graphQL(k.svc, "by graphql"))
				if err != nil || !replayed || !bytes.Equal(again.Body, a.Body) {
					t.Errorf("the retry: %s, replayed %v, %v; want %s replayed", again.Body, replayed, err, a.Body)
				}
				if n := len(k.events()); n != 2 { // bob's, and this one
					t.Errorf("%d posts published; want 2", n)
				}
			})
		})
	}
}

func TestARefusedRequestLeavesItsKeyFree(t *testing.T) {
	st := newStore(t).(keyedStore)
	k := newKeyed(t, st, nil)
	ctx := WithCaller(t.Context(), alice)
	tests := []struct {
		name string
		do   func(key Keyed) error
	}{
		{"a REST create of a blank title", func(key Keyed) error {
			_, _, err := k.svc.CreateOnce(ctx, alice, NewPost{Title: " "}, key, render)
			return err
		}},
		{"a GraphQL run whose create is refused", func(key Keyed) error {
			a, _, err := k.svc.RunOnce(ctx, alice, key, graphQL(k.svc, " "))
			if err == nil && !bytes.Contains(a.Body, []byte("errors")) {
				return errors.New("it succeeded")
			}
			return err
		}},
		{"a GraphQL run that creates nothing", func(key Keyed) error {
			_, _, err := k.svc.RunOnce(ctx, alice, key, func(context.Context) (Answer, error) { return Answer{Status: 400}, nil })
			return err
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name+" may be sent again corrected with the same key", func(t *testing.T) {
			key := fmt.Sprint("refused", i)
			_ = tc.do(Keyed{Key: key, Fingerprint: "bad"})
			if _, _, err := k.svc.CreateOnce(ctx, alice, NewPost{Title: "corrected"}, Keyed{Key: key, Fingerprint: "good"}, render); err != nil {
				t.Errorf("the corrected request: %v", err)
			}
		})
	}
	t.Run("an anonymous caller is refused before any key is kept", func(t *testing.T) {
		if _, _, err := k.svc.CreateOnce(t.Context(), anonymous, NewPost{Title: "x"}, Keyed{Key: "anon", Fingerprint: "f"}, render); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("error = %v", err)
		}
	})
	if n := len(stored(t, st)); n != len(tests) {
		t.Errorf("%d posts stored; want %d, the corrected ones", n, len(tests))
	}
}

func TestARetryWhileTheFirstRunsIsToldToWait(t *testing.T) {
	st := newStore(t).(keyedStore)
	k := newKeyed(t, st, nil)
	ctx := WithCaller(t.Context(), alice)
	key := Keyed{Key: "slow", Fingerprint: "f"}
	running, finish := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := k.svc.RunOnce(ctx, alice, key, func(ctx context.Context) (Answer, error) {
			close(running)
			<-finish
			return graphQL(k.svc, "slow")(ctx)
		})
		done <- err
	}()
	<-running
	_, _, err := k.svc.RunOnce(ctx, alice, key, graphQL(k.svc, "slow"))
	var inUse *KeyInUseError
	if !errors.As(err, &inUse) || inUse.RetryAfter <= 0 || inUse.RetryAfter > 4*5*time.Second {
		t.Errorf("error = %v; want a KeyInUseError with a RetryAfter up to the lease of 20s", err)
	}
	close(finish)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, replayed, err := k.svc.RunOnce(ctx, alice, key, graphQL(k.svc, "slow")); err != nil || !replayed {
		t.Errorf("once the first is done: replayed %v, %v", replayed, err)
	}
	if n := len(stored(t, st)); n != 1 {
		t.Errorf("%d posts stored; want 1", n)
	}
}

func TestAnExpiredKeyCreatesAgain(t *testing.T) {
	st := newStore(t).(keyedStore)
	svc := NewService(Config{Store: st, Timeout: 5 * time.Second, MaxLimit: 100, Logger: zap.NewNop(), KeyTTL: time.Hour})
	clock := setClock(t, start)
	ctx := WithCaller(t.Context(), alice)
	key := Keyed{Key: "k", Fingerprint: "f"}
	first, _, err := svc.CreateOnce(ctx, alice, NewPost{Title: "t"}, key, render)
	if err != nil {
		t.Fatal(err)
	}
	*clock = start.Add(time.Hour - time.Millisecond)
	if _, replayed, err := svc.CreateOnce(ctx, alice, NewPost{Title: "t"}, key, render); err != nil || !replayed {
		t.Errorf("just before the TTL: replayed %v, %v; want a replay", replayed, err)
	}
	*clock = start.Add(time.Hour)
	again, replayed, err := svc.CreateOnce(ctx, alice, NewPost{Title: "t"}, key, render)
	if err != nil || replayed || bytes.Equal(again.Body, first.Body) {
		t.Errorf("at the TTL: %s, replayed %v, %v; want a new post", again.Body, replayed, err)
	}
	if n := len(stored(t, st)); n != 2 {
		t.Errorf("%d posts stored; want 2", n)
	}
}

func TestManyRetriesAtOnceMakeOnePost(t *testing.T) {
	for _, b := range backends {
		t.Run("on "+b.name, func(t *testing.T) {
			st := b.open(t)
			k := newKeyed(t, st, nil)
			ctx := WithCaller(t.Context(), alice)
			var (
				wg                   sync.WaitGroup
				mu                   sync.Mutex
				fresh, replays, wait int
				others               []error
			)
			for range 8 {
				wg.Go(func() {
					_, replayed, err := k.svc.CreateOnce(ctx, alice, NewPost{Title: "t"}, Keyed{Key: "many", Fingerprint: "f"}, render)
					mu.Lock()
					defer mu.Unlock()
					var inUse *KeyInUseError
					switch {
					case errors.As(err, &inUse):
						wait++
					case err != nil:
						others = append(others, err)
					case replayed:
						replays++
					default:
						fresh++
					}
				})
			}
			wg.Wait()
			if fresh != 1 || len(others) != 0 || fresh+replays+wait != 8 {
				t.Errorf("%d created, %d replayed, %d told to wait, errors %v; want one created", fresh, replays, wait, others)
			}
			if n := len(stored(t, st)); n != 1 {
				t.Errorf("%d posts stored; want 1", n)
			}
			if created := k.events(); len(created) != 1 {
				t.Errorf("published %v; want one event", created)
			}
		})
	}
}

func ids(ps []store.Post) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}
