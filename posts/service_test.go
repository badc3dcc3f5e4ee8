package posts

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

var (
	alice     = auth.Identity{UserID: "alice", Method: "api_key"}
	bob       = auth.Identity{UserID: "bob", Method: "api_key"}
	anonymous = auth.Identity{}
)

// start is the clock's reading when a test begins: not UTC and finer than a millisecond, as
// time.Now is.
var start = time.Date(2025, 3, 14, 17, 9, 26, 535_897_932, time.FixedZone("UTC+2", 2*60*60))

// newStore returns a new embedded store, closed when the test ends.
func newStore(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

// publishing returns a broker that gets the events of st's log through a follower, started, as
// Provision runs one, and the follower to offer the service's writes to: poststest.Publishing,
// which this package's own tests cannot import (it imports posts).
func publishing(t testing.TB, st store.Store) (*events.Broker[*Event], *events.Follower) {
	t.Helper()
	broker := events.NewBroker[*Event](100)
	follower := events.NewFollower(events.FollowerConfig{Log: st.(store.EventLog), Hand: func(e store.Event) { Publish(broker, e) }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		follower.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		broker.Close()
	})
	<-follower.Started()
	return broker, follower
}

func newService(st store.Store, maxLimit int) *Service {
	return NewService(Config{Store: st, Timeout: 5 * time.Second, MaxLimit: maxLimit, Logger: zap.NewNop()})
}

// setClock makes now return the time the returned pointer holds, until the test ends.
func setClock(t *testing.T, at time.Time) *time.Time {
	t.Helper()
	clock, saved := at, now
	now = func() time.Time { return clock }
	t.Cleanup(func() { now = saved })
	return &clock
}

// stored returns every post in st, newest first.
func stored(t *testing.T, st store.Store) []store.Post {
	t.Helper()
	all, err := st.ListPosts(t.Context(), store.Filter{Limit: 10_000})
	if err != nil {
		t.Fatalf("listing the store: %v", err)
	}
	return all
}

func create(t *testing.T, s *Service, caller auth.Identity, title string) Post {
	t.Helper()
	post, err := s.Create(t.Context(), caller, NewPost{Title: title, Body: ptr("body of " + title)})
	if err != nil {
		t.Fatalf("Create(%q): %v", title, err)
	}
	return post
}

func get(t *testing.T, s *Service, id string) Post {
	t.Helper()
	post, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return post
}

// describe renders every field of a post, its body dereferenced and its times with their zone.
func describe(p Post) string {
	body := "<none>"
	if p.Body != nil {
		body = fmt.Sprintf("%q", *p.Body)
	}
	return fmt.Sprintf("{ID: %s, UserID: %q, Title: %q, Body: %s, CreatedAt: %s, UpdatedAt: %s, Version: %d}",
		p.ID, p.UserID, p.Title, body,
		p.CreatedAt.Format(time.RFC3339Nano+" MST"), p.UpdatedAt.Format(time.RFC3339Nano+" MST"), p.Version)
}

// wantInvalid fails unless err is an *InvalidError for field that matches ErrInvalid.
func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	var invalidErr *InvalidError
	switch {
	case !errors.Is(err, ErrInvalid):
		t.Errorf("error = %v, want ErrInvalid", err)
	case !errors.As(err, &invalidErr):
		t.Errorf("error = %v, want an *InvalidError", err)
	case invalidErr.Field != field:
		t.Errorf("error names the field %q, want %q (%v)", invalidErr.Field, field, err)
	}
}

func ptr(s string) *string { return &s }

func TestUnavailable(t *testing.T) {
	unreachable, err := mongo.Open("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=60000", "test")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = unreachable.Close() })
	s := NewService(Config{Store: unreachable, Timeout: 300 * time.Millisecond, MaxLimit: 100, Logger: zap.NewNop()})
	id := store.NewID(time.Now())

	ops := []struct {
		name string
		do   func(context.Context) error
	}{
		{"Get", func(ctx context.Context) error {
			_, err := s.Get(ctx, id)
			return err
		}},
		{"List", func(ctx context.Context) error {
			_, err := s.List(ctx, ListQuery{})
			return err
		}},
		{"Create", func(ctx context.Context) error {
			_, err := s.Create(ctx, alice, NewPost{Title: "Hello"})
			return err
		}},
		{"Update", func(ctx context.Context) error {
			_, err := s.Update(ctx, alice, id, Changes{Title: Change{Set: true, Value: ptr("New")}}, Expect{})
			return err
		}},
		{"Delete", func(ctx context.Context) error {
			return s.Delete(ctx, alice, id, Expect{})
		}},
		{"User", func(ctx context.Context) error {
			_, _, err := s.User(ctx, alice, "alice")
			return err
		}},
	}
	for _, op := range ops {
		t.Run(op.name+" against an unreachable database is unavailable", func(t *testing.T) {
			err := op.do(t.Context())
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("%s error = %v, want ErrUnavailable", op.name, err)
			}
			for _, other := range []error{ErrNotFound, ErrForbidden} {
				if errors.Is(err, other) {
					t.Errorf("%s error = %v, also matches %v", op.name, err, other)
				}
			}
		})
	}
}

func TestPostConversion(t *testing.T) {
	at := start.UTC().Truncate(time.Millisecond)
	full := store.Post{ID: store.NewID(at), UserID: "alice", Title: "t", Body: ptr("b"), CreatedAt: at, UpdatedAt: at.Add(time.Second), Version: 7}

	t.Run("every field of a stored post comes through and goes back unchanged", func(t *testing.T) {
		if back := toStore(toPost(full)); back != full {
			t.Errorf("round trip gave %+v, want %+v", back, full)
		}
	})
	t.Run("Post has a field for every field of store.Post", func(t *testing.T) {
		// A field added to store.Post must be added to Post and its two conversions, or left
		// out of Post on purpose and this test changed.
		if s, p := reflect.TypeFor[store.Post]().NumField(), reflect.TypeFor[Post]().NumField(); s != p {
			t.Errorf("store.Post has %d fields and Post %d", s, p)
		}
	})
}
