package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// The event log is the table events: a write of a post inserts its event in its own transaction,
// so the two commit together or not at all, and the one writer gives positions in the order of
// commits. A reader sees whole transactions, so the log holds no position still to be decided:
// every position up to the last one read is decided.
const (
	eventColumns    = `position, at, kind, post_id, user_id, title, body, created_at, updated_at, version`
	logEventSQL     = `INSERT INTO events (at, kind, post_id, user_id, title, body, created_at, updated_at, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING position`
	lastPositionSQL = `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)`
	readEventsSQL   = `SELECT ` + eventColumns + ` FROM events WHERE position > ? ORDER BY position LIMIT ?`
	expireEventsSQL = `DELETE FROM events WHERE at < ?`
)

// now is the clock of the events' times, replaceable in tests.
var now = time.Now

// logEvent inserts the event of kind of p, the post as the write left it, in tx, and returns it.
func logEvent(ctx context.Context, tx *sql.Tx, c *conns, kind string, p store.Post) (store.Event, error) {
	e := store.Event{At: now().UTC().Truncate(time.Millisecond), Kind: kind, Post: p}
	var title, created, updated any
	if kind != store.EventDeleted {
		title, created, updated = p.Title, millis(p.CreatedAt), millis(p.UpdatedAt)
	}
	err := tx.StmtContext(ctx, c.stmt.logEvent).QueryRowContext(ctx, millis(e.At), kind, p.ID, p.UserID, title, orNil(p.Body),
		created, updated, p.Version).Scan(&e.Position)
	return e, err
}

func scanEvent(row scanner) (e store.Event, err error) {
	var (
		at               int64
		title            sql.NullString
		created, updated sql.NullInt64
	)
	p := &e.Post
	if err := row.Scan(&e.Position, &at, &e.Kind, &p.ID, &p.UserID, &title, &p.Body, &created, &updated, &p.Version); err != nil {
		return store.Event{}, err
	}
	e.At, p.Title = fromMillis(at), title.String
	if created.Valid {
		p.CreatedAt, p.UpdatedAt = fromMillis(created.Int64), fromMillis(updated.Int64)
	}
	return e, nil
}

// Origin is empty: one process owns the file, so every event is its own.
func (s *Store) Origin() string { return "" }

// LastPosition returns the last position the log gave, even if its event has expired since.
func (s *Store) LastPosition(ctx context.Context) (int64, error) {
	c, done, err := s.reading()
	if err != nil {
		return 0, err
	}
	defer done()
	var last int64
	err = c.stmt.lastPosition.QueryRowContext(ctx).Scan(&last)
	return last, s.classify(err)
}

// ReadEvents returns at most limit events after position after, in order: one range of the
// primary key.
func (s *Store) ReadEvents(ctx context.Context, after int64, limit int) ([]store.Event, int64, error) {
	c, done, err := s.reading()
	if err != nil {
		return nil, after, err
	}
	defer done()
	rows, err := c.stmt.readEvents.QueryContext(ctx, after, max(limit, 1))
	events, err := collect(rows, err, nil, scanEvent)
	if err != nil {
		return nil, after, s.classify(err)
	}
	if len(events) > 0 {
		after = events[len(events)-1].Position
	}
	return events, after, nil
}

// ExpireEvents deletes the events logged before before.
func (s *Store) ExpireEvents(ctx context.Context, before time.Time) (int, error) {
	c, err := s.conns()
	if err != nil {
		return 0, err
	}
	res, err := c.stmt.expireEvents.ExecContext(ctx, millis(before))
	if err != nil {
		return 0, s.classify(err)
	}
	n, err := res.RowsAffected()
	if n > 0 {
		s.wrote(c)
	}
	return int(n), s.classify(err)
}

// RecoverEvents has nothing to do: every event is logged in its write's transaction.
func (s *Store) RecoverEvents(context.Context, time.Time) (int, error) { return 0, nil }

var _ store.EventLog = (*Store)(nil)
