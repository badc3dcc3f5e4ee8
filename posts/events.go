package posts

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/store"
)

// EventKind is what a write did.
type EventKind int

// The kinds of writes.
const (
	Created EventKind = iota + 1
	Updated
	Deleted
)

// Event is a write, published after it is stored: the post as it is afterwards (of a deleted
// post, only its ID and UserID).
type Event struct {
	Kind EventKind
	Post Post
}

// Subscribe returns a subscription to the writes that match, as they are stored. It fails with
// ErrUnavailable when the service publishes no events. Whether the caller may subscribe at all
// is Allow's to say (Subscribe), before this is called.
func (s *Service) Subscribe(match func(Event) bool) (*events.Subscription[Event], error) {
	if s.events == nil {
		return nil, fmt.Errorf("%w: this service publishes no events", ErrUnavailable)
	}
	return s.events.Subscribe(match), nil
}

// written does what follows every stored write: the caller's profile, then the event. With a
// relay, the event is recorded in the store for the other instances, and the relay hands it to
// the local subscribers at its next poll, in one order with theirs; without, it is published
// at once.
//
// The event is recorded after the post is written, not with it: a crash (or a store that fails)
// between the two leaves the post stored and its event lost to the other instances, whose
// subscribers see the post's next write; this instance's subscribers still get it unless the
// process crashed. A failed record is logged and counted; the write still succeeds.
func (s *Service) written(ctx context.Context, caller Caller, kind EventKind, post Post) {
	s.saveProfile(ctx, caller)
	switch {
	case s.relay != nil:
		// Not under the client's cancellation: a client that leaves after the write must not
		// take its event from the other instances.
		ctx, cancel := s.bounded(context.WithoutCancel(ctx))
		defer cancel()
		if err := s.relay.Record(ctx, storeKinds[kind], toStore(post)); err != nil {
			metrics.RelayError(metrics.RelayRecord)
			if s.logger != nil {
				s.logger.Error("recording a write's event for the other instances failed: their subscribers miss it",
					zap.String("kind", storeKinds[kind]), zap.String("post_id", post.ID), zap.Error(err))
			}
		}
	case s.events != nil:
		s.events.Publish(Event{Kind: kind, Post: post})
	}
}

// storeKinds are the kinds of events as the store records them.
var storeKinds = map[EventKind]string{Created: store.EventCreated, Updated: store.EventUpdated, Deleted: store.EventDeleted}

// EventOf is the event that e, recorded in the store, stands for: what a relay hands to the
// broker.
func EventOf(e store.Event) Event {
	kind := Updated
	for k, name := range storeKinds {
		if name == e.Kind {
			kind = k
		}
	}
	return Event{Kind: kind, Post: toPost(e.Post)}
}
