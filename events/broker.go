// Package events carries the writes of posts.Service to the subscriptions of GraphQL: Broker,
// the publish/subscribe broker (broker.go), Follower, which hands a Broker every event of a
// store's log once, in the log's order (follower.go), and Cursors, the signed cursors of the
// log's positions (cursor.go). Publishing never waits for a subscriber: each has a bounded
// queue, and one whose queue is full is dropped, so a slow reader cannot slow the writer or the
// others.
package events

import (
	"errors"
	"sync"

	"github.com/postsedge/caddy-posts/metrics"
)

// Why a subscription ended.
var (
	// ErrTooSlow: the subscriber let its queue fill up, and was dropped.
	ErrTooSlow = errors.New("the subscriber fell behind the events and was dropped")
	// ErrClosed: the broker closed (its config was unloaded).
	ErrClosed = errors.New("the event broker closed")
)

// Broker fans events of type T out to its subscriptions. It is safe for concurrent use.
type Broker[T any] struct {
	queue int // the length of each subscription's queue

	mu     sync.Mutex
	subs   map[*Subscription[T]]struct{}
	closed bool
}

// NewBroker returns a broker whose subscriptions queue up to queue events each.
func NewBroker[T any](queue int) *Broker[T] {
	return &Broker[T]{queue: max(queue, 1), subs: map[*Subscription[T]]struct{}{}}
}

// Subscription receives the events that match its filter, on C, until it ends: then C is
// closed and Err says why.
type Subscription[T any] struct {
	broker *Broker[T]
	match  func(T) bool
	c      chan T
	done   chan struct{} // closed with c
	err    error         // set, under the broker's lock, before c is closed
}

// C delivers the events, in the order they were published.
func (s *Subscription[T]) C() <-chan T { return s.c }

// Done is closed when the subscription ends, even while events are still queued on C.
func (s *Subscription[T]) Done() <-chan struct{} { return s.done }

// Err is why the subscription ended: ErrTooSlow, ErrClosed, or nil when its owner closed it.
// It is meaningful once C is closed.
func (s *Subscription[T]) Err() error {
	s.broker.mu.Lock()
	defer s.broker.mu.Unlock()
	return s.err
}

// Close ends the subscription; it may be called more than once.
func (s *Subscription[T]) Close() {
	s.broker.mu.Lock()
	defer s.broker.mu.Unlock()
	s.broker.end(s, nil)
}

// Subscribe returns a subscription to the events that match (nil: all of them). After the
// broker closed, the subscription it returns has ended already.
func (b *Broker[T]) Subscribe(match func(T) bool) *Subscription[T] {
	s := &Subscription[T]{broker: b, match: match, c: make(chan T, b.queue), done: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		s.err = ErrClosed
		close(s.c)
		close(s.done)
		return s
	}
	b.subs[s] = struct{}{}
	return s
}

// Publish hands v to every subscription that matches it, without waiting: a subscription whose
// queue is full ends with ErrTooSlow. Under the broker's lock, each subscription's match is
// called once per event, in the order of the calls of Publish, and an event it matches is queued
// (or the subscription ends): a subscriber may note what it will receive as it matches.
func (b *Broker[T]) Publish(v T) {
	metrics.EventPublished()
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if s.match != nil && !s.match(v) {
			continue
		}
		select {
		case s.c <- v:
		default:
			metrics.EventsDropped(metrics.StageFeed, len(s.c)+1) // the queued ones are not read
			b.end(s, ErrTooSlow)
		}
	}
}

// Subscribers is how many subscriptions are open.
func (b *Broker[T]) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// Backlog is the most events queued on any subscription, which its reader has not taken yet:
// how far the slowest is from falling behind (its queue's length, queue).
func (b *Broker[T]) Backlog() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	most := 0
	for s := range b.subs {
		most = max(most, len(s.c))
	}
	return most
}

// Close ends every subscription with ErrClosed, and every later one at once.
func (b *Broker[T]) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		b.end(s, ErrClosed)
	}
}

// end removes s and closes its channel, once; b.mu is held.
func (b *Broker[T]) end(s *Subscription[T], why error) {
	if _, open := b.subs[s]; !open {
		return
	}
	delete(b.subs, s)
	s.err = why
	close(s.c)
	close(s.done)
}
