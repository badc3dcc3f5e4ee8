package store

import (
	"context"
	"time"
)

// The kinds of Event.
const (
	EventCreated = "created"
	EventUpdated = "updated"
	EventDeleted = "deleted"
)

// Event is one write, as recorded for the other instances that serve the same store.
type Event struct {
	// ID is unique, made by the writer (NewID).
	ID string
	// At is the writer's clock when it recorded the event, in UTC to the millisecond.
	At time.Time
	// Origin names the recording instance: random per relay, so per store in a process.
	Origin string
	// Kind is EventCreated, EventUpdated or EventDeleted.
	Kind string
	// Post is the post afterwards; of a deleted post, its ID and UserID (and Version if known).
	Post Post
}

// EventLog is a store that records events for other instances and reads them back. MongoDB's
// store is one; the embedded store is not (one process per file: nothing to relay).
type EventLog interface {
	// RecordEvent stores e.
	RecordEvent(ctx context.Context, e Event) error
	// EventsSince returns at most limit events with At at or after since, in order of At, then ID.
	EventsSince(ctx context.Context, since time.Time, limit int) ([]Event, error)
	// ExpireEvents deletes the events with At before before, and returns how many it deleted.
	ExpireEvents(ctx context.Context, before time.Time) (int, error)
}
