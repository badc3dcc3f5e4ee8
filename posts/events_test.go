package posts

import (
	"testing"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
)

func TestEveryStoredWriteIsPublishedOnceAndNothingElse(t *testing.T) {
	st := newStore(t)
	broker, follower := publishing(t, st)
	svc := NewService(Config{Store: st, MaxLimit: 10, Logger: zap.NewNop(), Events: broker, Follower: follower})
	sub := broker.Subscribe(nil)
	defer sub.Close()
	next := func() (Event, bool) {
		select {
		case e := <-sub.C():
			return *e, true
		default:
			return Event{}, false
		}
	}
	alice := auth.Identity{UserID: "alice", Method: auth.MethodAPIKey}
	bob := auth.Identity{UserID: "bob", Method: auth.MethodAPIKey}
	ctx := t.Context()

	p, err := svc.Create(ctx, alice, NewPost{Title: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := next(); !ok || e.Kind != Created || e.Post != p || e.Post.Version != 1 {
		t.Errorf("after Create: %+v, %v; want Created with the stored post", e, ok)
	}
	title := "changed"
	updated, err := svc.Update(ctx, alice, p.ID, Changes{Title: Change{Set: true, Value: &title}}, Expect{})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := next(); !ok || e.Kind != Updated || e.Post.Title != "changed" || e.Post != updated || e.Post.Version != 2 {
		t.Errorf("after Update: %+v, %v; want Updated with the post as it is now, at version 2", e, ok)
	}

	// Writes that fail publish nothing.
	refused := []struct {
		name string
		do   func() error
	}{
		{"an anonymous create", func() error { _, err := svc.Create(ctx, auth.Identity{}, NewPost{Title: "x"}); return err }},
		{"an invalid create", func() error { _, err := svc.Create(ctx, alice, NewPost{Title: " "}); return err }},
		{"an update by another user", func() error {
			_, err := svc.Update(ctx, bob, p.ID, Changes{Title: Change{Set: true, Value: &title}}, Expect{})
			return err
		}},
		{"a delete by another user", func() error { return svc.Delete(ctx, bob, p.ID, Expect{}) }},
		{"a delete of a missing post", func() error { return svc.Delete(ctx, alice, "6b011fa03aa928307595aeda", Expect{}) }},
		{"an update at another version", func() error {
			_, err := svc.Update(ctx, alice, p.ID, Changes{Title: Change{Set: true, Value: &title}}, AtVersion(1))
			return err
		}},
		{"a delete at another version", func() error { return svc.Delete(ctx, alice, p.ID, AtVersion(3)) }},
	}
	for _, r := range refused {
		if err := r.do(); err == nil {
			t.Fatalf("%s succeeded", r.name)
		}
		if e, ok := next(); ok {
			t.Errorf("%s published %+v", r.name, e)
		}
	}

	if err := svc.Delete(ctx, alice, p.ID, Expect{}); err != nil {
		t.Fatal(err)
	}
	if e, ok := next(); !ok || e.Kind != Deleted || e.Post.ID != p.ID || e.Post.UserID != "alice" || e.Post.Version != 2 {
		t.Errorf("after Delete: %+v, %v; want Deleted with the id, owner and version deleted", e, ok)
	}
}
