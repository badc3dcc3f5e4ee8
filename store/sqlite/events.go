package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"time"

	"github.com/postsedge/caddy-posts/spans"
	"github.com/postsedge/caddy-posts/store"
)

// The event log is the table events: a write of a post inserts its event in the write's
// transaction, so the two commit together or not at all, and the one connection that writes
// (conns.write, its transactions run by the committer, commit.go) gives positions in the order of
// commits. A reader sees whole transactions, so the log holds no position still to be decided:
// every position up to the last one read is decided.
//
// A position is the one after the last given (lastPosition): after the newest event kept, and
// after event_log.floor, which expiry raises to its cut before it deletes (migration 6), so a
// position is never given twice, even once every event has expired. A write's transaction
// rolled back, or a write of a shared transaction rolled back to its savepoint (commit.go), gives
// its position back, unseen: the next write takes it.
const (
	eventColumns = `position, at, kind, post_id, user_id, title, body, created_at, updated_at, version, trace`
	// lastPosition reads the last position of the primary key (no scan) and the one row of
	// event_log.
	lastPosition = `(SELECT max(coalesce((SELECT max(position) FROM events), 0), event_log.floor) FROM event_log)`
	logEventSQL  = `INSERT INTO events (position, at, kind, post_id, user_id, title, body, created_at, updated_at, version, trace)
		VALUES (` + lastPosition + ` + 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING position`
	lastPositionSQL = `SELECT ` + lastPosition
	readEventsSQL   = `SELECT ` + eventColumns + ` FROM events WHERE position > ? ORDER BY position LIMIT ?`
	// expiryCutSQL is the position up to which ExpireEvents deletes: the one before the oldest
	// event logged at ?1 or later (all of them, if none is), or the last position less the ?2 kept
	// (0: no cap), whichever is later. The oldest at ?1 or later is found in the order of
	// positions, from the oldest: the events logged before ?1 are read once more, and every one of
	// them goes. Times are in the order of positions, as the one connection that writes
	// (conns.write) takes each event's time in its transaction; a clock set back would only keep
	// some events longer.
	expiryCutSQL = `SELECT max(
		coalesce((SELECT position FROM events WHERE at >= ?1 ORDER BY position LIMIT 1) - 1, ` + lastPosition + `),
		iif(?2 > 0, ` + lastPosition + ` - ?2, 0))`
	// raiseFloorSQL raises the floor of positions to a cut before expiry deletes up to it (a write
	// only when it rises).
	raiseFloorSQL = `UPDATE event_log SET floor = ?1 WHERE floor < ?1`
	// expireEventsSQL deletes a batch of expiry: the oldest events up to a position, a range of
	// the primary key.
	expireEventsSQL = `DELETE FROM events WHERE position IN
		(SELECT position FROM events WHERE position <= ? ORDER BY position LIMIT ?)`
	keptSQL = `SELECT EXISTS (SELECT 1 FROM events WHERE position = ?)`
	// keepsAfterSQL is KeepsAfter's one statement: expiry deletes the oldest events first, so
	// every event after ?1 is kept when ?1 is the last position, or the oldest kept is ?1 + 1
	// at most.
	keepsAfterSQL = `SELECT ?1 <= last AND (?1 >= last OR coalesce((SELECT min(position) FROM events), last + 1) <= ?1 + 1)
		FROM (SELECT ` + lastPosition + ` AS last)`
	logStatsSQL = `SELECT coalesce(min(position), 0), ` + lastPosition + ` FROM events`
	logKeySQL   = `SELECT key FROM event_log`
)

// expireBatch is how many events one statement of ExpireEvents deletes: each takes the one
// writer for a few milliseconds, and the writes waiting for it go in between.
const expireBatch = 1000

// now is the clock of the events' times, replaceable in tests.
var now = time.Now

// logEvent inserts the event of kind of p, the post as the write left it, in tx, and returns it;
// it notes it in c.changed, for the cache of posts (postCache), as every write of a post logs its
// event here. It keeps the write's span, ctx's, when that one is traced.
func logEvent(ctx context.Context, tx *sql.Tx, c *conns, kind string, p store.Post) (store.Event, error) {
	e := store.Event{At: now().UTC().Truncate(time.Millisecond), Kind: kind, Post: p, Trace: spans.Traceparent(ctx)}
	var title, created, updated, trace any
	if e.Trace != "" {
		trace = e.Trace
	}
	if kind != store.EventDeleted {
		title, created, updated = p.Title, millis(p.CreatedAt), millis(p.UpdatedAt)
	}
	err := tx.StmtContext(ctx, c.stmt.logEvent).QueryRowContext(ctx, millis(e.At), kind, p.ID, p.UserID, title, orNil(p.Body),
		created, updated, p.Version, trace).Scan(&e.Position)
	if err == nil {
		c.changed = append(c.changed, e)
	}
	return e, err
}

func scanEvent(row scanner) (e store.Event, err error) {
	var (
		at               int64
		title, trace     sql.NullString
		created, updated sql.NullInt64
	)
	p := &e.Post
	if err := row.Scan(&e.Position, &at, &e.Kind, &p.ID, &p.UserID, &title, &p.Body, &created, &updated, &p.Version, &trace); err != nil {
		return store.Event{}, err
	}
	e.At, p.Title, e.Trace = fromMillis(at), title.String, trace.String
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

// ExpireEvents deletes the events up to a cut, oldest first, expireBatch at a time: the log
// has no hole to wait for (every position up to the last is decided once it is read), so the
// cut is exactly the newest event logged before before or the last position less keep. A batch
// is one statement, so readers see the log lose its oldest events and never one from the middle.
// The floor of positions is raised to the cut first, so the next position comes after it even if
// no event is left.
func (s *Store) ExpireEvents(ctx context.Context, before time.Time, keep int64) (int, error) {
	cut, err := s.expiryCut(ctx, before, keep)
	if err != nil || cut == 0 {
		return 0, err
	}
	c, err := s.conns()
	if err != nil {
		return 0, err
	}
	if _, err := c.stmt.raiseFloor.ExecContext(ctx, cut); err != nil {
		return 0, s.classify(err)
	}
	deleted := 0
	for {
		res, err := c.stmt.expireEvents.ExecContext(ctx, cut, expireBatch)
		if err != nil {
			return deleted, s.classify(err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return deleted, s.classify(err)
		}
		deleted += int(n)
		if n > 0 {
			s.wrote(c)
		}
		if n < expireBatch {
			return deleted, nil
		}
	}
}

// expiryCut returns the position up to which ExpireEvents deletes, 0 for none.
func (s *Store) expiryCut(ctx context.Context, before time.Time, keep int64) (int64, error) {
	c, done, err := s.reading()
	if err != nil {
		return 0, err
	}
	defer done()
	var cut int64
	err = c.stmt.expiryCut.QueryRowContext(ctx, millis(before), max(keep, 0)).Scan(&cut)
	return max(cut, 0), s.classify(err)
}

// KeepsAfter says whether a reader that resumes after position misses nothing (store.EventLog).
func (s *Store) KeepsAfter(ctx context.Context, position int64) (bool, error) {
	c, done, err := s.reading()
	if err != nil {
		return false, err
	}
	defer done()
	var kept bool
	err = c.stmt.keepsAfter.QueryRowContext(ctx, position).Scan(&kept)
	return kept, s.classify(err)
}

// Kept says whether the log holds position: one lookup of the primary key.
func (s *Store) Kept(ctx context.Context, position int64) (bool, error) {
	c, done, err := s.reading()
	if err != nil {
		return false, err
	}
	defer done()
	var kept bool
	err = c.stmt.kept.QueryRowContext(ctx, position).Scan(&kept)
	return kept, s.classify(err)
}

// Key returns the log's key, made by the migration that made its table and read when the store
// opened.
func (s *Store) Key(context.Context) ([]byte, error) {
	c, err := s.conns()
	if err != nil {
		return nil, err
	}
	return bytes.Clone(c.logKey), nil
}

// Stats counts the events without a scan: the log is one run of positions, as a position is
// never skipped (a write rolled back gives its position back) and expiry deletes the
// oldest first, so it holds every position from its oldest to the last.
func (s *Store) Stats(ctx context.Context) (store.LogStats, error) {
	c, done, err := s.reading()
	if err != nil {
		return store.LogStats{}, err
	}
	defer done()
	var st store.LogStats
	if err := c.stmt.logStats.QueryRowContext(ctx).Scan(&st.Oldest, &st.Last); err != nil {
		return store.LogStats{}, s.classify(err)
	}
	if st.Oldest > 0 {
		st.Events = st.Last - st.Oldest + 1
	}
	return st, nil
}

// RecoverEvents has nothing to do: every event is logged in its write's transaction.
func (s *Store) RecoverEvents(context.Context, time.Time) (int, error) { return 0, nil }

var _ store.EventLog = (*Store)(nil)
