package schema_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/graph-gophers/graphql-go"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// subscribed is a schema with an event broker, the service that writes to it, and the broker.
func subscribed(t testing.TB, queue int, limits ...schema.Limits) (*schema.Schema, *posts.Service, *events.Broker[posts.Event]) {
	t.Helper()
	broker := events.NewBroker[posts.Event](queue)
	svc := posts.NewService(posts.Config{
		Store:    newStore(t),
		Timeout:  5 * time.Second,
		MaxLimit: 10,
		Logger:   zap.NewNop(),
		Events:   broker,
	})
	s, err := schema.New(svc, zap.NewNop(), append(limits, schema.Limits{})[0])
	if err != nil {
		t.Fatal(err)
	}
	return s, svc, broker
}

func subscribe(t *testing.T, ctx context.Context, s *schema.Schema, query string) <-chan *graphql.Response {
	t.Helper()
	op, refusal := s.Prepare(schema.Request{Query: query})
	if refusal != nil {
		t.Fatalf("Prepare: %v", refusal)
	}
	if op.Type != "subscription" {
		t.Fatalf("type %s", op.Type)
	}
	return s.Subscribe(ctx, op)
}

// receive waits for the next response of c and returns its data.
func receive(t *testing.T, c <-chan *graphql.Response) string {
	t.Helper()
	select {
	case res, ok := <-c:
		if !ok {
			t.Fatal("the stream ended")
		}
		if len(res.Errors) > 0 {
			t.Fatalf("errors: %v", res.Errors)
		}
		return string(res.Data)
	case <-time.After(5 * time.Second):
		t.Fatal("no event in 5s")
	}
	return ""
}

func quiet(t *testing.T, c <-chan *graphql.Response) {
	t.Helper()
	select {
	case res := <-c:
		t.Errorf("unexpected event: %s %v", res.Data, res.Errors)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestSubscriptions(t *testing.T) {
	s, svc, broker := subscribed(t, 16)
	ctx, cancel := context.WithCancel(t.Context())
	created := subscribe(t, ctx, s, `subscription { postCreated(userId: "alice") { title userId author { id } } }`)
	var updatedQuery struct{ id string }
	deleted := subscribe(t, ctx, s, `subscription { postDeleted }`)
	for deadline := time.Now().Add(5 * time.Second); broker.Subscribers() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the subscriptions did not start")
		}
	}

	if _, err := svc.Create(ctx, bob, posts.NewPost{Title: "by bob"}); err != nil {
		t.Fatal(err)
	}
	p, err := svc.Create(ctx, alice, posts.NewPost{Title: "by alice"})
	if err != nil {
		t.Fatal(err)
	}
	if got := receive(t, created); got != `{"postCreated":{"title":"by alice","userId":"alice","author":{"id":"alice"}}}` {
		t.Errorf("postCreated(userId: alice) got %s", got)
	}
	quiet(t, created) // bob's post is not alice's

	updatedQuery.id = p.ID
	updated := subscribe(t, ctx, s, `subscription { postUpdated(id: "`+updatedQuery.id+`") { title } }`)
	for deadline := time.Now().Add(5 * time.Second); broker.Subscribers() < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("postUpdated did not start")
		}
	}
	title := "by alice, changed"
	if _, err := svc.Update(ctx, alice, p.ID, posts.Changes{Title: posts.Change{Set: true, Value: &title}}); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, updated); got != `{"postUpdated":{"title":"by alice, changed"}}` {
		t.Errorf("postUpdated got %s", got)
	}
	if err := svc.Delete(ctx, alice, p.ID); err != nil {
		t.Fatal(err)
	}
	var out struct{ PostDeleted string }
	if err := json.Unmarshal([]byte(receive(t, deleted)), &out); err != nil || out.PostDeleted != p.ID {
		t.Errorf("postDeleted got %+v, %v; want %s", out, err, p.ID)
	}

	cancel()
	for _, c := range []<-chan *graphql.Response{created, updated, deleted} {
		for range c { // each stream ends once its context does
		}
	}
	for deadline := time.Now().Add(5 * time.Second); broker.Subscribers() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d broker subscriptions outlive their streams", broker.Subscribers())
		}
	}
}

func TestASubscriberThatFallsBehindIsToldSo(t *testing.T) {
	s, svc, broker := subscribed(t, 1)
	fellBehind := make(chan struct{})
	ctx := schema.WithOverflow(t.Context(), func() { close(fellBehind) })
	c := subscribe(t, ctx, s, `subscription { postCreated { title } }`)
	for deadline := time.Now().Add(5 * time.Second); broker.Subscribers() < 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the subscription did not start")
		}
	}
	for range 20 { // nobody reads c; the stages between the broker and c hold a few
		if _, err := svc.Create(ctx, alice, posts.NewPost{Title: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-fellBehind:
	case <-time.After(5 * time.Second):
		t.Fatal("the transport was not told the subscriber fell behind")
	}
	for range c {
	}
}

func TestSubscriptionsNeedAnEventBroker(t *testing.T) {
	s := newSchema(t)
	op, refusal := s.Prepare(schema.Request{Query: `subscription { postCreated { id } }`})
	if refusal != nil {
		t.Fatal(refusal)
	}
	res := <-s.Subscribe(auth.NewContext(t.Context(), alice), op)
	if len(res.Errors) != 1 || res.Errors[0].Extensions["code"] != schema.CodeUnavailable {
		t.Errorf("got %s %v; want one UNAVAILABLE error", res.Data, res.Errors)
	}
}
