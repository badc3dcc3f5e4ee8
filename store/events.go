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

// Event is one write, as the store's event log keeps it. A backend writes it with its post and
// never apart from it: in the write's transaction (SQLite), or recorded in the post's document by
// the write itself and moved to the log before the write is acknowledged (MongoDB, see
// store/mongo/events.go). So the log holds every write the store holds.
type Event struct {
	// Position is the event's place in the log: positive, unique, and the order in which every
	// reader reads the log. A post's events are in the order of its versions.
	Position int64
	// At is when the log took the event, in UTC to the millisecond.
	At time.Time
	// Origin names the store instance (a process's store) that logged it: EventLog.Origin.
	Origin string
	// Kind is EventCreated, EventUpdated or EventDeleted.
	Kind string
	// Post is the post afterwards; of a deleted post, its ID, UserID and the Version deleted.
	Post Post
}

// EventLog is the ordered log of a store's writes, which a reader follows by position. Both
// backends keep one. Its methods are safe for concurrent use, across processes sharing the
// database too.
type EventLog interface {
	// Origin names this store instance in the events it logs.
	Origin() string
	// LastPosition returns the position of the last event logged, 0 for a log that never held
	// one: a reader that starts now reads from after it.
	LastPosition(ctx context.Context) (int64, error)
	// ReadEvents returns at most limit events from after position after on, in order, and upto,
	// the position the log is decided to: each position from after+1 to upto holds one of the
	// events returned, or will never hold an event. The next read starts after upto.
	ReadEvents(ctx context.Context, after int64, limit int) (events []Event, upto int64, err error)
	// ExpireEvents deletes the events logged before before, and returns how many it deleted.
	ExpireEvents(ctx context.Context, before time.Time) (int, error)
	// RecoverEvents logs the events of the writes made before before whose writer stopped
	// before it had logged them, and returns how many. A store whose writes log their events in
	// their transaction has none.
	RecoverEvents(ctx context.Context, before time.Time) (int, error)
}
