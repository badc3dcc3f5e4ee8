package posts

import (
	"context"
	"fmt"

	"github.com/postsedge/caddy-posts/events"
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

// written does what follows every stored write: the caller's profile, then the event.
func (s *Service) written(ctx context.Context, caller Caller, kind EventKind, post Post) {
	s.saveProfile(ctx, caller)
	if s.events != nil {
		s.events.Publish(Event{Kind: kind, Post: post})
	}
}
