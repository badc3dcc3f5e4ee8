package schema_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store"
)

// A connection subscribed to postCreated, postUpdated and postDeleted, each resolved by a feed of
// its own, gets each post's events in the post's order: created, then its updates, then deleted.
// Without a sequence, the feeds' goroutines would hand them in whatever order they finish: the
// slower postCreated after the update that follows it.
func TestASequenceKeepsEachPostsOrderAcrossSubscriptions(t *testing.T) {
	s, svc, broker := subscribedOver(t, slowLists{newStore(t)}, 1000, 10, schema.DefaultLimits)
	var (
		mu  sync.Mutex
		got []string // "<kind> <id> <version>", in the order delivered
	)
	overflowed := make(chan struct{})
	seq := schema.NewSequence(10_000, func() { close(overflowed) }, nil)
	for _, query := range []string{
		// The slowest to resolve: a list of the store per event.
		`subscription { postCreated { id version author { posts { id } } } }`,
		`subscription { postUpdated { id version } }`,
		`subscription { postDeleted }`,
	} {
		l, err := s.ListenIn(seq, "user alice", prepare(t, s, query, nil), alice, func(p json.RawMessage) {
			var r struct {
				Data struct {
					PostCreated, PostUpdated *struct {
						ID      string
						Version int64
					}
					PostDeleted *string
				}
			}
			if err := json.Unmarshal(p, &r); err != nil {
				t.Errorf("%s: %v", p, err)
			}
			mu.Lock()
			defer mu.Unlock()
			switch d := r.Data; {
			case d.PostCreated != nil:
				got = append(got, fmt.Sprintf("created %s %d", d.PostCreated.ID, d.PostCreated.Version))
			case d.PostUpdated != nil:
				got = append(got, fmt.Sprintf("updated %s %d", d.PostUpdated.ID, d.PostUpdated.Version))
			case d.PostDeleted != nil:
				got = append(got, "deleted "+*d.PostDeleted)
			}
		}, func(err error) { t.Errorf("a feed ended: %v", err) })
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
	}
	started(t, broker, 3)

	const writers, each = 4, 25
	title := "changed"
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				p, err := svc.Create(t.Context(), alice, posts.NewPost{Title: "new"})
				if err != nil {
					t.Error(err)
					return
				}
				for range 2 {
					if _, err := svc.Update(t.Context(), alice, p.ID, posts.Changes{Title: posts.Change{Set: true, Value: &title}}, posts.Expect{}); err != nil {
						t.Error(err)
					}
				}
				if err := svc.Delete(t.Context(), alice, p.ID, posts.Expect{}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	const want = writers * each * 4
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			break
		}
	}
	select {
	case <-overflowed:
		t.Fatal("the sequence overflowed")
	default:
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != want {
		t.Errorf("delivered %d events; want %d", len(got), want)
	}
	// Each post's events, as delivered, must be exactly its own, in order.
	seen := map[string][]string{}
	for _, e := range got {
		var kind, id string
		fmt.Sscan(e, &kind, &id)
		seen[id] = append(seen[id], e)
	}
	for id, events := range seen {
		want := fmt.Sprint([]string{"created " + id + " 1", "updated " + id + " 2", "updated " + id + " 3", "deleted " + id})
		if fmt.Sprint(events) != want {
			t.Errorf("post %s: delivered %v; want %v", id, events, want)
		}
	}
}

// slowLists is a store whose lists take a millisecond.
type slowLists struct{ store.Store }

func (s slowLists) Unwrap() store.Store { return s.Store }

func (s slowLists) ListPosts(ctx context.Context, f store.Filter) ([]store.Post, error) {
	time.Sleep(time.Millisecond)
	return s.Store.ListPosts(ctx, f)
}
