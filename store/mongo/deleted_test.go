package mongo_test

import (
	"errors"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// An insert whose event's key (post, version, kind) an earlier write's event holds already, as
// the insert of a deleted post's id that no idempotency key named would: the insert is refused,
// rather than answered with the earlier event's position, which a follower past it would drop,
// leaving the post stored and its create never published.
func TestAnEventKeyAnEarlierWriteHoldsRefusesTheWrite(t *testing.T) {
	s := opener(mongotest.FerretDB(t).URI)(t)
	created, err := s.InsertPost(t.Context(), firstPost)
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := s.DeletePost(t.Context(), firstPost.ID, "alice", store.AnyVersion)
	if err != nil {
		t.Fatal(err)
	}
	again := firstPost
	again.Title, again.CreatedAt, again.UpdatedAt = "again", firstPost.CreatedAt.Add(time.Hour), firstPost.UpdatedAt.Add(time.Hour)
	e, err := s.InsertPost(t.Context(), again)
	if err == nil {
		t.Errorf("the insert was answered with the event at %d (the create's at %d, the delete's at %d); want it refused", e.Position, created.Position, deleted.Position)
	}
	if errors.Is(err, store.ErrUnavailable) {
		t.Errorf("the insert failed with %v; want a refusal, not a store to retry", err)
	}
	if p, err := s.GetPost(t.Context(), firstPost.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after it the post is %+v, %v; want none", p, err)
	}
	log := s.(store.EventLog)
	if n, err := log.RecoverEvents(t.Context(), time.Now().Add(time.Hour)); n != 0 || err != nil {
		t.Errorf("RecoverEvents found %d pending events, %v; want none left behind", n, err)
	}
	events, _, err := log.ReadEvents(t.Context(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[0].Position != created.Position || events[1].Position != deleted.Position {
		t.Errorf("the log holds %+v; want the create's and the delete's events only", events)
	}
}
