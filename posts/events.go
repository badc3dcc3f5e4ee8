package posts

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/words"
)

// EventKind is what a write did.
type EventKind int

// The kinds of writes.
const (
	Created EventKind = iota + 1
	Updated
	Deleted
)

// Event is a write, as its subscribers get it: the post as it is afterwards (of a deleted post,
// only its ID, UserID and the version deleted), at its position in the store's event log, which
// orders every write of every instance alike.
type Event struct {
	Kind     EventKind
	Post     Post
	Position int64
	// words are the words of Post, read once for every subscription that searches (Found).
	words *postWords
}

// postWords are the words of a post, read at the first search that asks.
type postWords struct {
	once  sync.Once
	words []string
}

// Found says whether the search q finds the post of e (any post, for an empty q): the rule of
// lists, applied to an event's post as it is after the write. Its words are read once, for
// every subscription that asks.
func (e Event) Found(q words.Query) bool {
	if q.Empty() {
		return true
	}
	if e.words == nil {
		return q.Match(wordsOf(e.Post))
	}
	e.words.once.Do(func() { e.words.words = wordsOf(e.Post) })
	return q.Match(e.words.words)
}

// wordsOf are the words of p, by which a search finds it.
func wordsOf(p Post) []string {
	var body string
	if p.Body != nil {
		body = *p.Body
	}
	return words.Of(p.Title, body)
}

// Subscribe returns a subscription to the writes that match, in the order of the event log. It
// fails with ErrUnavailable when the service publishes no events. Whether the caller may
// subscribe at all is Allow's to say (Subscribe), before this is called.
func (s *Service) Subscribe(match func(Event) bool) (*events.Subscription[*Event], error) {
	if s.events == nil {
		return nil, fmt.Errorf("%w: this service publishes no events", ErrUnavailable)
	}
	if match == nil {
		return s.events.Subscribe(nil), nil
	}
	return s.events.Subscribe(func(e *Event) bool { return match(*e) }), nil
}

// written does what follows every stored write: the caller's profile, then the event, logged by the
// store with the write, is offered to the follower of the log (events.Follower.Offer), which hands
// it to the subscribers in the log's order (at once, unless it waits for an event before it).
func (s *Service) written(ctx context.Context, caller Caller, e store.Event) {
	s.saveProfile(ctx, caller)
	if s.follower != nil {
		s.follower.Offer(e)
	}
}

// failed is the service's error for err, a write's failure: one that left the store's answer
// unknown may have left its event to be logged, which the follower is asked to look for
// (events.Follower.Recover).
func (s *Service) failed(err error) error {
	if errors.Is(err, store.ErrUnavailable) && s.follower != nil {
		s.follower.Recover()
	}
	return fromStore(err)
}

// storeKinds are the kinds of events as the store logs them.
var storeKinds = map[string]EventKind{store.EventCreated: Created, store.EventUpdated: Updated, store.EventDeleted: Deleted}

// EventOf is the event that e, logged by the store, stands for.
func EventOf(e store.Event) Event {
	return Event{Kind: storeKinds[e.Kind], Post: toPost(e.Post), Position: e.Position, words: new(postWords)}
}

// Publish hands broker the event that e stands for: one, which every subscription that matches
// it shares, so that an idle subscription's queue is of pointers (a queue of 256 events took
// 32 KB for each distinct subscription, used or not).
func Publish(broker *events.Broker[*Event], e store.Event) {
	event := EventOf(e)
	broker.Publish(&event)
}

// OriginOf is where the event of cursor (a subscription response's, schema.CursorOf) came from,
// if the follower remembers it (events.Follower.OriginOf); its Position alone otherwise, 0 for a
// cursor it cannot read. For the span of its delivery to a traced subscription.
func (s *Service) OriginOf(cursor string) (events.Origin, bool) {
	if s.follower == nil || cursor == "" {
		return events.Origin{}, false
	}
	position, err := s.follower.Cursors().Read(cursor)
	if err != nil {
		return events.Origin{}, false
	}
	if o, ok := s.follower.OriginOf(position); ok {
		return o, true
	}
	return events.Origin{Position: position}, false
}

// KeepOrigins has the follower remember where the events it hands came from, for OriginOf: as a
// traced subscription starts (events.Follower.KeepOrigins).
func (s *Service) KeepOrigins() {
	if s.follower != nil {
		s.follower.KeepOrigins()
	}
}
