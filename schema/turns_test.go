package schema_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/graph-gophers/graphql-go"

	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store"
)

// gatedUsers is a store whose reads of a user wait until open is closed, and count themselves
// on waiting as they begin.
type gatedUsers struct {
	store.Store
	waiting chan struct{}
	open    chan struct{}
}

// newGatedUsers is st with its reads of a user shut until gate.open is closed.
func newGatedUsers(st store.Store) gatedUsers {
	return gatedUsers{Store: st, waiting: make(chan struct{}, 64), open: make(chan struct{})}
}

func (g gatedUsers) Unwrap() store.Store { return g.Store }

func (g gatedUsers) GetUser(ctx context.Context, id string) (store.User, error) {
	g.waiting <- struct{}{}
	select {
	case <-g.open:
	case <-ctx.Done():
		return store.User{}, ctx.Err()
	}
	return g.Store.GetUser(ctx, id)
}

// TestAnEventThatWaitsForTheStoreHoldsBackNoOtherSubscription checks feedTurn.leave: as many
// subscriptions as there are turns to resolve, each waiting in the store for the author of an
// event, leave their turns to the others, and every turn is given back once the streams end,
// those stopped in the store among them.
func TestAnEventThatWaitsForTheStoreHoldsBackNoOtherSubscription(t *testing.T) {
	gate := newGatedUsers(newStore(t))
	s, svc, broker := subscribedOver(t, gate, 16, 10, schema.DefaultLimits)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	n := schema.ResolveTurns()
	var slow []<-chan *graphql.Response
	for range n {
		slow = append(slow, subscribe(t, ctx, s, `subscription { postCreated { author { id } } }`))
	}
	fast := subscribe(t, ctx, s, `subscription { postCreated { title } }`)
	started(t, broker, n+1)

	if _, err := svc.Create(ctx, alice, posts.NewPost{Title: "first"}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		select {
		case <-gate.waiting:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of the %d subscriptions that select the author read it in 5s", i, n)
		}
	}
	if got := receive(t, fast); got != `{"postCreated":{"title":"first"}}` {
		t.Fatalf("the first post: %s", got)
	}
	if _, err := svc.Create(ctx, alice, posts.NewPost{Title: "second"}); err != nil {
		t.Fatal(err)
	}
	// Well within the store's deadline (5s), which would free the turns.
	select {
	case res := <-fast:
		if got := string(res.Data); got != `{"postCreated":{"title":"second"}}` || len(res.Errors) > 0 {
			t.Errorf("the second post: %s %v", got, res.Errors)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("the second post did not come in 2s, while %d events waited for the store", n)
	}
	for _, c := range slow {
		quiet(t, c)
	}

	cancel() // with every author still read
	close(gate.open)
	for deadline := time.Now().Add(5 * time.Second); schema.ResolveTurnsTaken() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d turns to resolve are still taken 5s after every stream ended", schema.ResolveTurnsTaken())
		}
	}
}

// noResponse checks that c has nothing for d: an event that waits for a turn.
func noResponse(t *testing.T, c <-chan *graphql.Response, d time.Duration, why string) {
	t.Helper()
	select {
	case res := <-c:
		t.Fatalf("a response while %s: %s %v", why, res.Data, res.Errors)
	case <-time.After(d):
	}
}

// TestEventsAreResolvedInTurns checks turnsToResolve: while every turn is taken, no event is
// resolved, one that waited in the store for its author does not go on to build its response,
// and both go on once the turns are given back.
func TestEventsAreResolvedInTurns(t *testing.T) {
	gate := newGatedUsers(newStore(t))
	s, svc, broker := subscribedOver(t, gate, 16, 10, schema.DefaultLimits)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	titles := subscribe(t, ctx, s, `subscription { postCreated { title } }`)
	authors := subscribe(t, ctx, s, `subscription { postCreated { author { id } } }`)
	started(t, broker, 2)

	if _, err := svc.Create(ctx, alice, posts.NewPost{Title: "first"}); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, titles); got != `{"postCreated":{"title":"first"}}` {
		t.Fatalf("the first post: %s", got)
	}
	select {
	case <-gate.waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("the author of the first post was not read in 5s")
	}
	// The author's read left its turn. The turns are given back if the test fails, not to stall
	// the package's other tests.
	giveBack := sync.OnceFunc(schema.TakeResolveTurns())
	t.Cleanup(giveBack)
	close(gate.open)
	if _, err := svc.Create(ctx, alice, posts.NewPost{Title: "second"}); err != nil {
		t.Fatal(err)
	}
	noResponse(t, titles, 300*time.Millisecond, "every turn is taken")
	noResponse(t, authors, 100*time.Millisecond, "every turn is taken, once its author was read")
	giveBack()
	if got := receive(t, authors); got != `{"postCreated":{"author":{"id":"alice"}}}` {
		t.Errorf("the first post's author: %s", got)
	}
	if got := receive(t, titles); got != `{"postCreated":{"title":"second"}}` {
		t.Errorf("the second post: %s", got)
	}
}
