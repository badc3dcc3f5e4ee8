package mongo_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// eventAt is an event of post n recorded at base+ms.
func eventAt(base time.Time, ms int, id string, post store.Post) store.Event {
	return store.Event{ID: id, At: base.Add(time.Duration(ms) * time.Millisecond), Origin: "origin-a", Kind: store.EventUpdated, Post: post}
}

func TestTheEventLogOnFerretDB(t *testing.T) {
	uri := mongotest.FerretDB(t).URI
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	body, empty := "a body", ""
	post := func(n int, b *string) store.Post {
		at := base.Add(time.Duration(n) * time.Second)
		return store.Post{ID: store.NewID(at), UserID: "alice", Title: fmt.Sprint("post ", n), Body: b, CreatedAt: at, UpdatedAt: at, Version: int64(n)}
	}
	open := func(t *testing.T) *mongo.Store {
		s := opener(uri)(t).(*mongo.Store)
		s.SetEventTTL(time.Hour)
		return s
	}
	// Recorded out of order: the log reads them back by At, then ID.
	recorded := []store.Event{
		eventAt(base, 20, "e3", post(3, nil)),
		eventAt(base, 10, "e2", post(2, &empty)),
		eventAt(base, 10, "e1", post(1, &body)),
		{ID: "e4", At: base.Add(30 * time.Millisecond), Origin: "origin-b", Kind: store.EventDeleted, Post: store.Post{ID: post(4, nil).ID, UserID: "bob"}},
	}
	fill := func(t *testing.T, s *mongo.Store) {
		for _, e := range recorded {
			if err := s.RecordEvent(t.Context(), e); err != nil {
				t.Fatal(err)
			}
		}
	}
	ids := func(events []store.Event) []string {
		out := []string{}
		for _, e := range events {
			out = append(out, e.ID)
		}
		return out
	}

	t.Run("events read back in order of At then ID, as they were recorded", func(t *testing.T) {
		s := open(t)
		fill(t, s)
		got, err := s.EventsSince(t.Context(), base, 100)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"e1", "e2", "e3", "e4"}; !reflect.DeepEqual(ids(got), want) {
			t.Fatalf("ids %v; want %v", ids(got), want)
		}
		byID := map[string]store.Event{}
		for _, e := range recorded {
			byID[e.ID] = e
		}
		for _, e := range got {
			if !reflect.DeepEqual(e, byID[e.ID]) {
				t.Errorf("read back %+v;\nrecorded %+v", e, byID[e.ID])
			}
		}
		if got[0].Post.Body == nil || *got[0].Post.Body != body || got[1].Post.Body == nil || *got[1].Post.Body != "" || got[2].Post.Body != nil {
			t.Errorf("bodies read back as %v, %v, %v; want a body, an empty one, none", got[0].Post.Body, got[1].Post.Body, got[2].Post.Body)
		}
	})
	t.Run("since is inclusive and excludes what is older", func(t *testing.T) {
		s := open(t)
		fill(t, s)
		got, err := s.EventsSince(t.Context(), base.Add(20*time.Millisecond), 100)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"e3", "e4"}; !reflect.DeepEqual(ids(got), want) {
			t.Errorf("ids %v; want %v", ids(got), want)
		}
		if got, _ := s.EventsSince(t.Context(), base.Add(time.Second), 100); len(got) != 0 {
			t.Errorf("since after the last event: %v; want none", ids(got))
		}
	})
	t.Run("a page holds at most limit events, the oldest", func(t *testing.T) {
		s := open(t)
		fill(t, s)
		got, err := s.EventsSince(t.Context(), base, 2)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"e1", "e2"}; !reflect.DeepEqual(ids(got), want) {
			t.Errorf("ids %v; want %v", ids(got), want)
		}
	})
	t.Run("expiry deletes the events before the bound and says how many", func(t *testing.T) {
		s := open(t)
		fill(t, s)
		n, err := s.ExpireEvents(t.Context(), base.Add(20*time.Millisecond))
		if err != nil || n != 2 {
			t.Fatalf("ExpireEvents = %d, %v; want 2", n, err)
		}
		got, _ := s.EventsSince(t.Context(), time.Time{}, 100)
		if want := []string{"e3", "e4"}; !reflect.DeepEqual(ids(got), want) {
			t.Errorf("left %v; want %v", ids(got), want)
		}
		if n, err := s.ExpireEvents(t.Context(), base.Add(20*time.Millisecond)); err != nil || n != 0 {
			t.Errorf("again: %d, %v; want 0", n, err)
		}
	})
	t.Run("an id recorded twice is refused the second time", func(t *testing.T) {
		s := open(t)
		fill(t, s)
		if err := s.RecordEvent(t.Context(), recorded[0]); err == nil {
			t.Error("a second event with the id of the first was stored")
		}
	})
	t.Run("a closed store is unavailable", func(t *testing.T) {
		s := open(t)
		s.Close()
		if _, err := s.EventsSince(t.Context(), base, 1); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("EventsSince after Close: %v; want ErrUnavailable", err)
		}
	})
}
