package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// The statements of idempotency keys, all on conns.write: a record is read only in the
// transaction that may change it, so that what is read is what is written over.
const (
	keyColumns = `user_id, idempotency_key, fingerprint, post_id, attempt, locked_until, created_at, expires_at, status, header, body`
	// reserveKeySQL writes a new record, and over one that has expired as if it were absent;
	// RETURNING gives the record only when it was written.
	reserveKeySQL = `INSERT INTO idempotency_keys (` + keyColumns + `) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0, NULL, NULL)
		ON CONFLICT (user_id, idempotency_key) DO UPDATE SET fingerprint = ?3, post_id = ?4, attempt = ?5,
			locked_until = ?6, created_at = ?7, expires_at = ?8, status = 0, header = NULL, body = NULL
		WHERE expires_at <= ?9
		RETURNING ` + keyColumns
	getKeySQL      = `SELECT ` + keyColumns + ` FROM idempotency_keys WHERE user_id = ? AND idempotency_key = ?`
	takeOverKeySQL = `UPDATE idempotency_keys SET attempt = attempt + 1, locked_until = ?1
		WHERE user_id = ?2 AND idempotency_key = ?3 AND status = 0 AND attempt = ?4 AND locked_until <= ?5 AND expires_at > ?5`
	completeKeySQL = `UPDATE idempotency_keys SET status = ?1, header = ?2, body = ?3
		WHERE user_id = ?4 AND idempotency_key = ?5 AND status = 0`
	releaseKeySQL = `UPDATE idempotency_keys SET locked_until = 0
		WHERE user_id = ? AND idempotency_key = ? AND status = 0 AND attempt = ?`
	deleteKeySQL = `DELETE FROM idempotency_keys
		WHERE user_id = ? AND idempotency_key = ? AND status = 0 AND attempt = ?`
	// deleteExpiredKeysSQL deletes a bounded batch of a sweep, found through the index on
	// expires_at.
	deleteExpiredKeysSQL = `DELETE FROM idempotency_keys WHERE rowid IN
		(SELECT rowid FROM idempotency_keys WHERE expires_at <= ? LIMIT ?)`
	// deleteExpiredIDsSQL deletes, in the same sweep, the ids of deleted posts kept until their
	// keys expired, through the index on until.
	deleteExpiredIDsSQL = `DELETE FROM deleted_posts WHERE id IN
		(SELECT id FROM deleted_posts WHERE until <= ? LIMIT ?)`
)

// keyStatements are the statements of idempotency keys, prepared once per store.
type keyStatements struct {
	reserve, get, takeOver, complete, release, delete, deleteExpired, deleteExpiredIDs *sql.Stmt
}

func (ks *keyStatements) prepare(write *sql.DB) error {
	for _, s := range []struct {
		stmt  **sql.Stmt
		query string
	}{
		{&ks.reserve, reserveKeySQL}, {&ks.get, getKeySQL}, {&ks.takeOver, takeOverKeySQL},
		{&ks.complete, completeKeySQL}, {&ks.release, releaseKeySQL}, {&ks.delete, deleteKeySQL},
		{&ks.deleteExpired, deleteExpiredKeysSQL}, {&ks.deleteExpiredIDs, deleteExpiredIDsSQL},
	} {
		stmt, err := write.Prepare(s.query)
		if err != nil {
			return fmt.Errorf("preparing %q: %w", s.query, err)
		}
		*s.stmt = stmt
	}
	return nil
}

func (ks *keyStatements) close() {
	for _, s := range []*sql.Stmt{ks.reserve, ks.get, ks.takeOver, ks.complete, ks.release, ks.delete, ks.deleteExpired, ks.deleteExpiredIDs} {
		if s != nil {
			s.Close()
		}
	}
}

func scanKey(row scanner) (r store.IdempotencyRecord, err error) {
	var (
		lockedUntil, created, expires int64
		status                        int
		header                        sql.NullString
		body                          []byte
	)
	if err := row.Scan(&r.UserID, &r.Key, &r.Fingerprint, &r.PostID, &r.Attempt, &lockedUntil, &created, &expires, &status, &header, &body); err != nil {
		return store.IdempotencyRecord{}, err
	}
	r.LockedUntil, r.CreatedAt, r.ExpiresAt = fromMillis(lockedUntil), fromMillis(created), fromMillis(expires)
	if status != 0 {
		r.Response = &store.Response{Status: status, Body: body}
		if header.Valid {
			if err := json.Unmarshal([]byte(header.String), &r.Response.Header); err != nil {
				return store.IdempotencyRecord{}, fmt.Errorf("the header of idempotency key %q: %w", r.Key, err)
			}
		}
	}
	return r, nil
}

// ReserveKey stores r unless a record of its user and key that has not expired is stored.
func (s *Store) ReserveKey(ctx context.Context, r store.IdempotencyRecord, now time.Time) (store.IdempotencyRecord, bool, error) {
	var stored store.IdempotencyRecord
	reserved := false
	err := s.inTransaction(ctx, func(ctx context.Context, tx *sql.Tx, c *conns) (err error) {
		stored, err = scanKey(tx.StmtContext(ctx, c.keys.reserve).QueryRowContext(ctx, r.UserID, r.Key, r.Fingerprint, r.PostID, r.Attempt,
			millis(r.LockedUntil), millis(r.CreatedAt), millis(r.ExpiresAt), millis(now)))
		if !errors.Is(err, sql.ErrNoRows) { // written, or failed
			reserved = err == nil
			return err
		}
		stored, err = scanKey(tx.StmtContext(ctx, c.keys.get).QueryRowContext(ctx, r.UserID, r.Key))
		return err
	})
	return stored, reserved, err
}

// TakeOverKey moves the record from attempt to the next, if attempt's hold has ended.
func (s *Store) TakeOverKey(ctx context.Context, user, key string, attempt int, now, until time.Time) (bool, error) {
	n, err := s.writeKey(ctx, func(ks *keyStatements) *sql.Stmt { return ks.takeOver }, millis(until), user, key, attempt, millis(now))
	return n == 1, err
}

// CompleteKey keeps res as the record's response, if it has none yet.
func (s *Store) CompleteKey(ctx context.Context, user, key string, res store.Response) error {
	header, err := json.Marshal(res.Header)
	if err != nil {
		return err
	}
	_, err = s.writeKey(ctx, func(ks *keyStatements) *sql.Stmt { return ks.complete }, res.Status, string(header), res.Body, user, key)
	return err
}

// InsertPostCompletingKey inserts p with its event and completes the record of its user and key,
// in one transaction.
func (s *Store) InsertPostCompletingKey(ctx context.Context, p store.Post, key string, res store.Response) (e store.Event, inserted bool, err error) {
	header, err := json.Marshal(res.Header)
	if err != nil {
		return store.Event{}, false, err
	}
	err = s.inTransaction(ctx, func(ctx context.Context, tx *sql.Tx, c *conns) error {
		if err := insertPost(ctx, tx, c, p); err != nil {
			return err
		}
		if e, err = logEvent(ctx, tx, c, store.EventCreated, asStored(p)); err != nil {
			return err
		}
		_, err := tx.StmtContext(ctx, c.keys.complete).ExecContext(ctx, res.Status, string(header), res.Body, p.UserID, key)
		return err
	})
	return e, err == nil, err
}

// ReleaseKey ends attempt's hold on the record.
func (s *Store) ReleaseKey(ctx context.Context, user, key string, attempt int) error {
	_, err := s.writeKey(ctx, func(ks *keyStatements) *sql.Stmt { return ks.release }, user, key, attempt)
	return err
}

// DeleteKey deletes the record if attempt holds it.
func (s *Store) DeleteKey(ctx context.Context, user, key string, attempt int) error {
	_, err := s.writeKey(ctx, func(ks *keyStatements) *sql.Stmt { return ks.delete }, user, key, attempt)
	return err
}

// DeleteExpiredKeys deletes at most limit expired records, then, within what is left of limit,
// the ids of deleted posts kept until then.
func (s *Store) DeleteExpiredKeys(ctx context.Context, now time.Time, limit int) (int, error) {
	n, err := s.writeKey(ctx, func(ks *keyStatements) *sql.Stmt { return ks.deleteExpired }, millis(now), limit)
	if err != nil || n >= int64(limit) {
		return int(n), err
	}
	ids, err := s.writeKey(ctx, func(ks *keyStatements) *sql.Stmt { return ks.deleteExpiredIDs }, millis(now), int64(limit)-n)
	return int(n + ids), err
}

// writeKey runs the statement of the open store that stmt picks with args, and returns how many
// rows it changed.
func (s *Store) writeKey(ctx context.Context, stmt func(*keyStatements) *sql.Stmt, args ...any) (int64, error) {
	c, err := s.conns()
	if err != nil {
		return 0, err
	}
	res, err := stmt(&c.keys).ExecContext(ctx, args...)
	if err != nil {
		return 0, s.classify(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, s.classify(err)
	}
	if n > 0 {
		s.wrote(c)
	}
	return n, nil
}

var _ store.IdempotencyStore = (*Store)(nil)
