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
	// Trace is the span of the write that logged it, as a W3C traceparent, when the write was
	// traced (spans.Traceparent): the spans of its deliveries link to it, on every instance.
	// "" when it was not.
	Trace string
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
	// ExpireEvents deletes the events logged before before, and all but the newest keep (0: no
	// cap), oldest first, and returns how many it deleted. What it keeps is every position
	// after one: an event goes only with every event before it, so a reader that finds the
	// event of a position kept (Kept) finds every later one. It deletes in batches, so that
	// writes go on meanwhile.
	ExpireEvents(ctx context.Context, before time.Time, keep int64) (int, error)
	// Kept says whether the log still holds the event at position, which it logged: false once
	// it has expired.
	Kept(ctx context.Context, position int64) (bool, error)
	// KeepsAfter says, in one read, whether a reader that resumes after position misses
	// nothing: position is one the log has given (0, before its first), and every event after
	// it is kept. A position's own event may have expired (a read's position, on a quiet
	// store); one past the last given (a log restored from a backup older than the cursor) is
	// refused, as its later events would be new ones.
	KeepsAfter(ctx context.Context, position int64) (bool, error)
	// Key returns the log's key: random bytes, made once with the log and the same for every
	// store instance that shares it, which signs the cursors of its positions, so that a cursor
	// of another log, or one altered, is told apart from the log's own.
	Key(ctx context.Context) ([]byte, error)
	// Stats returns what the log holds, for monitoring.
	Stats(ctx context.Context) (LogStats, error)
	// RecoverEvents logs the events of the writes made before before whose writer stopped
	// before it had logged them, and returns how many. A store whose writes log their events in
	// their transaction has none.
	RecoverEvents(ctx context.Context, before time.Time) (int, error)
}

// LogStats is what an event log holds.
type LogStats struct {
	// Events is how many events (and, on MongoDB, markers of holes) the log holds; an
	// estimate where counting exactly would scan.
	Events int64
	// Oldest is the position of the oldest event kept, 0 when the log is empty.
	Oldest int64
	// Last is the last position given, as LastPosition.
	Last int64
}
