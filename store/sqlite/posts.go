package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

const postColumns = `id, user_id, title, body, created_at, updated_at, version`

// The queries. A list reads one of the two indexes in order from its keyset position and stops
// after LIMIT rows or at its other bound (Since newest first, Until oldest first); the first page
// starts from a key past every post of its range (start), so it is the same range search:
// EXPLAIN QUERY PLAN shows a SEARCH of an index, never a SCAN or a sort (a test checks). Row
// values, (created_at, id) < (?, ?), let the index serve the keyset. A search reads the index of
// words instead (search.go).
const (
	getPostSQL          = `SELECT ` + postColumns + ` FROM posts WHERE id = ?`
	listSQL             = `SELECT ` + postColumns + ` FROM posts WHERE (created_at, id) < (?1, ?2) AND created_at >= ?3 ORDER BY created_at DESC, id DESC LIMIT ?4`
	listOldestSQL       = `SELECT ` + postColumns + ` FROM posts WHERE (created_at, id) > (?1, ?2) AND created_at < ?3 ORDER BY created_at, id LIMIT ?4`
	listByUserSQL       = `SELECT ` + postColumns + ` FROM posts WHERE user_id = ?5 AND (created_at, id) < (?1, ?2) AND created_at >= ?3 ORDER BY created_at DESC, id DESC LIMIT ?4`
	listByUserOldestSQL = `SELECT ` + postColumns + ` FROM posts WHERE user_id = ?5 AND (created_at, id) > (?1, ?2) AND created_at < ?3 ORDER BY created_at, id LIMIT ?4`
	insertPostSQL       = `INSERT INTO posts (` + postColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?)`
	// insertLivePostSQL is InsertPost's insert: insertPostSQL's unless the id is of a deleted post
	// kept in deleted_posts: then it inserts nothing (store.ErrDeleted).
	insertLivePostSQL = `INSERT INTO posts (` + postColumns + `) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7
		WHERE NOT EXISTS (SELECT 1 FROM deleted_posts WHERE id = ?1)`
	// keepDeletedSQL keeps, on a delete, the id of its post if an idempotency key names it, until
	// the last such key expires (store.Store.DeletePost); an id no key names leaves no row.
	keepDeletedSQL = `INSERT INTO deleted_posts (id, until)
		SELECT post_id, max(expires_at) FROM idempotency_keys WHERE post_id = ?1 GROUP BY post_id
		ON CONFLICT (id) DO UPDATE SET until = max(until, excluded.until)`
	// updatePostSQL has the owner and the expected version (0: any) in its WHERE clause, so a write
	// can never touch someone else's post nor one that changed since its writer read it, and there
	// is no read between the check and the write.
	updatePostSQL = `UPDATE posts SET title = coalesce(?1, title),
		body = CASE WHEN ?2 THEN NULL ELSE coalesce(?3, body) END, updated_at = ?4, version = version + 1
		WHERE id = ?5 AND user_id = ?6 AND (?7 = 0 OR version = ?7) RETURNING ` + postColumns
	deletePostSQL = `DELETE FROM posts WHERE id = ?1 AND user_id = ?2 AND (?3 = 0 OR version = ?3) RETURNING version`
	saveUserSQL   = `INSERT INTO users (id, name, email, updated_at) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (id) DO UPDATE SET name = coalesce(?2, name), email = coalesce(?3, email), updated_at = ?4`
	// savepointSQL gives each write of a shared transaction (Store.together) a savepoint of its
	// own, released after it (releaseSQL), or rolled back to (rollbackToSQL) and released if it
	// fails.
	savepointSQL  = `SAVEPOINT write`
	rollbackToSQL = `ROLLBACK TO write`
	releaseSQL    = `RELEASE write`
	getUserSQL    = `SELECT id, name, email, updated_at FROM users WHERE id = ?`
	getUsersSQL   = `SELECT id, name, email, updated_at FROM users WHERE id IN (SELECT value FROM json_each(?))`
)

// statements are the queries, prepared once per store.
type statements struct {
	getPost, getUser, getUsers                   *sql.Stmt       // on the readers
	list                                         [2][2]*sql.Stmt // [by user][oldest first]
	search                                       [2]*sql.Stmt    // [oldest first] (search.go)
	readState, writeState, searchDue             *sql.Stmt       // of the state of a snapshot (state.go), and search.go
	insertPost, updatePost, deletePost, saveUser *sql.Stmt       // on the writer
	keepDeleted                                  *sql.Stmt
	savepoint, rollbackTo, release               *sql.Stmt // of the writes of a shared transaction (commit.go)
	indexWords                                   *sql.Stmt // of the search's index (search.go)
	logEvent, lastPosition, readEvents           *sql.Stmt // of the event log (events.go)
	expiryCut, raiseFloor, expireEvents          *sql.Stmt
	kept, keepsAfter, logStats                   *sql.Stmt
	prepared                                     []*sql.Stmt
}

func (st *statements) prepare(read, write *sql.DB) error {
	for _, s := range []struct {
		db    *sql.DB
		stmt  **sql.Stmt
		query string
	}{
		{read, &st.getPost, getPostSQL},
		{read, &st.list[0][0], listSQL},
		{read, &st.list[0][1], listOldestSQL},
		{read, &st.list[1][0], listByUserSQL},
		{read, &st.list[1][1], listByUserOldestSQL},
		{read, &st.search[0], searchSQL},
		{read, &st.search[1], searchOldestSQL},
		{read, &st.readState, stateSQL},
		{write, &st.writeState, stateSQL},
		{read, &st.searchDue, searchDueSQL},
		{read, &st.getUser, getUserSQL},
		{read, &st.getUsers, getUsersSQL},
		{write, &st.insertPost, insertLivePostSQL},
		{write, &st.keepDeleted, keepDeletedSQL},
		{write, &st.updatePost, updatePostSQL},
		{write, &st.deletePost, deletePostSQL},
		{write, &st.saveUser, saveUserSQL},
		{write, &st.savepoint, savepointSQL},
		{write, &st.rollbackTo, rollbackToSQL},
		{write, &st.release, releaseSQL},
		{write, &st.indexWords, indexWordsSQL},
		{write, &st.logEvent, logEventSQL},
		{read, &st.lastPosition, lastPositionSQL},
		{read, &st.readEvents, readEventsSQL},
		{read, &st.expiryCut, expiryCutSQL},
		{write, &st.raiseFloor, raiseFloorSQL},
		{write, &st.expireEvents, expireEventsSQL},
		{read, &st.kept, keptSQL},
		{read, &st.keepsAfter, keepsAfterSQL},
		{read, &st.logStats, logStatsSQL},
	} {
		stmt, err := s.db.Prepare(s.query)
		if err != nil {
			return fmt.Errorf("preparing %q: %w", s.query, err)
		}
		*s.stmt = stmt
		st.prepared = append(st.prepared, stmt)
	}
	return nil
}

func (st *statements) close() {
	for _, s := range st.prepared {
		s.Close()
	}
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanPost(row scanner) (p store.Post, err error) {
	var created, updated int64
	if err := row.Scan(&p.ID, &p.UserID, &p.Title, &p.Body, &created, &updated, &p.Version); err != nil {
		return store.Post{}, err
	}
	p.CreatedAt, p.UpdatedAt = fromMillis(created), fromMillis(updated)
	return p, nil
}

func millis(t time.Time) int64      { return t.UnixMilli() }
func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
func orNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// GetPost returns the post with the id, or store.ErrNotFound: from the cache of posts if it
// holds it (postCache), or else from the file, and then keeps it there.
func (s *Store) GetPost(ctx context.Context, id string) (store.Post, error) {
	c, err := s.conns()
	if err != nil {
		return store.Post{}, err
	}
	if err := ctx.Err(); err != nil { // as a statement would fail
		return store.Post{}, s.classify(err)
	}
	if p, position, ok := c.cache.get(id, &c.state); ok {
		note(ctx, position)
		return p, nil
	}
	c, done, err := s.reading()
	if err != nil {
		return store.Post{}, err
	}
	defer done()
	seq := c.state.seq.Load()
	posts, position, err := read(ctx, c, c.stmt.getPost, []any{id}, make([]store.Post, 0, 1))
	if err != nil {
		return store.Post{}, s.classify(err)
	}
	note(ctx, position) // of a post not found too: the read shows it absent
	if len(posts) == 0 {
		return store.Post{}, s.classify(sql.ErrNoRows)
	}
	c.cache.fill(posts[0], &c.state, seq)
	return posts[0], nil
}

// note notes position in the store.Seen of ctx, if its caller asked for one.
func note(ctx context.Context, position int64) {
	if seen := store.SeenIn(ctx); seen != nil {
		seen.Note(position)
	}
}

// read runs stmt, a read of posts (postColumns), with args, appending them to into, and, for a
// caller that asked for the position of its read (store.Seen), returns the last position of the
// snapshot it read (state.during), reading again in a transaction that reads it too if that is
// not certain (readAgain).
func read(ctx context.Context, c *conns, stmt *sql.Stmt, args []any, into []store.Post) ([]store.Post, int64, error) {
	run := func() ([]store.Post, error) {
		rows, err := stmt.QueryContext(ctx, args...)
		return collect(rows, err, into, scanPost)
	}
	if store.SeenIn(ctx) == nil {
		posts, err := run()
		return posts, 0, err
	}
	var posts []store.Post
	last, _, exact, err := c.state.during(func() (err error) {
		posts, err = run()
		return err
	})
	if err == nil && !exact {
		return readAgain(ctx, c, stmt, args, into[:0])
	}
	return posts, last, err
}

// ListPosts returns the posts that f selects, in its order.
func (s *Store) ListPosts(ctx context.Context, f store.Filter) ([]store.Post, error) {
	if !f.Search.Empty() {
		return s.searchPosts(ctx, f)
	}
	c, done, err := s.reading()
	if err != nil {
		return nil, err
	}
	defer done()
	posts, position, err := list(ctx, c, f)
	if err == nil {
		note(ctx, position)
	}
	return posts, s.classify(err)
}

// searchPosts reads a page of f, which has a search, from the index, which holds the words of
// every post whose write has returned: if words wait to be indexed (commitIndexing), it has them
// indexed first, through the committer, before it takes the read lock that the committer may
// wait for (Store.wrote). A transaction that leaves words unindexed may still commit before the
// search reads (a write that has not returned): then the index may hold, for a row of that
// write, the words of the post it had before (updated, or deleted and its row taken again), or
// none; the state of the search's snapshot says so (state.during), and searchAgain reads it
// again with the posts whose words wait.
func (s *Store) searchPosts(ctx context.Context, f store.Filter) ([]store.Post, error) {
	c, err := s.conns()
	if err != nil {
		return nil, err
	}
	if c.committer.behind.Load() {
		if err := s.run(ctx, indexing(ctx)); err != nil {
			return nil, err
		}
	}
	posts, position, err := s.searchRead(ctx, f)
	if err == nil {
		note(ctx, position)
	}
	return posts, err
}

// searchRead reads the page of searchPosts, and the log's last position in its snapshot.
func (s *Store) searchRead(ctx context.Context, f store.Filter) ([]store.Post, int64, error) {
	c, done, err := s.reading()
	if err != nil {
		return nil, 0, err
	}
	defer done()
	var posts []store.Post
	last, due, exact, err := c.state.during(func() (err error) {
		posts, err = search(ctx, c.stmt.search[oldest(f)], f, false)
		return err
	})
	if err == nil && (!exact || due) {
		posts, last, err = searchAgain(ctx, c, f)
	}
	return posts, last, s.classify(err)
}

// list reads a page of f, which has no search, from the index of its order, and the position it
// reflects.
func list(ctx context.Context, c *conns, f store.Filter) ([]store.Post, int64, error) {
	ms, id := start(f)
	byUser, stop := 0, bound(f.Since, math.MinInt64)
	if f.UserID != "" {
		byUser = 1
	}
	if f.Oldest {
		stop = bound(f.Until, math.MaxInt64)
	}
	return read(ctx, c, c.stmt.list[byUser][oldest(f)], []any{ms, id, stop, f.Limit, f.UserID}, make([]store.Post, 0, f.Limit))
}

// oldest is the index of f's order in the statements of both orders: 1 oldest first.
func oldest(f store.Filter) int {
	if f.Oldest {
		return 1
	}
	return 0
}

// readAgain runs stmt, a read of posts, with args, in a transaction that reads the state of its
// snapshot too (stateSQL), and returns the posts and the log's last position in it.
func readAgain(ctx context.Context, c *conns, stmt *sql.Stmt, args []any, into []store.Post) ([]store.Post, int64, error) {
	tx, last, _, err := snapshot(ctx, c)
	if err != nil {
		return nil, 0, err
	}
	defer tx.Rollback()
	rows, err := tx.StmtContext(ctx, stmt).QueryContext(ctx, args...)
	posts, err := collect(rows, err, into, scanPost)
	return posts, last, err
}

// bound is t, a bound of Filter.Since or Until, in Unix milliseconds rounded up (a post, stored
// to the millisecond, is created at or after t exactly when it is at or after that), or
// unbounded for a zero t.
func bound(t time.Time, unbounded int64) int64 {
	if t.IsZero() {
		return unbounded
	}
	ms := millis(t)
	if fromMillis(ms).Before(t) {
		return ms + 1
	}
	return ms
}

// start is the keyset position, in Unix milliseconds and an id, that a page of f starts after:
// After, or, on the first page, a place before every post of f's range in its order. An empty
// id comes before every id, so (Since, "") is before the posts created at Since, oldest first,
// and (Until, "") after those created at Until, newest first.
func start(f store.Filter) (ms int64, id string) {
	if f.Oldest {
		ms = bound(f.Since, math.MinInt64)
	} else {
		ms = bound(f.Until, math.MaxInt64)
	}
	if f.After == nil {
		return ms, ""
	}
	if after := millis(f.After.CreatedAt); f.Oldest && after >= ms || !f.Oldest && after < ms {
		return after, f.After.ID
	}
	return ms, ""
}

// collect appends every row of rows to into, read with scan, and closes rows; err is that of the
// query that made rows. Every row is read: a statement left open would keep its transaction, and
// the write-ahead log, from ending.
func collect[T any](rows *sql.Rows, err error, into []T, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		into = append(into, v)
	}
	return into, rows.Err()
}

// InsertPost stores a new post and its event, in one transaction.
func (s *Store) InsertPost(ctx context.Context, p store.Post) (e store.Event, err error) {
	err = s.inTransaction(ctx, func(ctx context.Context, tx *sql.Tx, c *conns) error {
		if err := insertPost(ctx, tx, c, p); err != nil {
			return err
		}
		e, err = logEvent(ctx, tx, c, store.EventCreated, asStored(p))
		return err
	})
	return e, err
}

// insertPost inserts p in tx: store.ErrDeleted if its id is of a deleted post kept in
// deleted_posts, and nothing is inserted.
func insertPost(ctx context.Context, tx *sql.Tx, c *conns, p store.Post) error {
	res, err := tx.StmtContext(ctx, c.stmt.insertPost).ExecContext(ctx, postArgs(p)...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return cmp.Or(err, store.ErrDeleted)
	}
	return nil
}

// asStored is p as InsertPost stores it: times to the millisecond in UTC, version 1 at least.
func asStored(p store.Post) store.Post {
	p.CreatedAt, p.UpdatedAt = fromMillis(millis(p.CreatedAt)), fromMillis(millis(p.UpdatedAt))
	p.Version = max(p.Version, 1)
	return p
}

// postArgs are the values of p for insertPostSQL.
func postArgs(p store.Post) []any {
	return []any{p.ID, p.UserID, p.Title, orNil(p.Body), millis(p.CreatedAt), millis(p.UpdatedAt), max(p.Version, 1)}
}

// UpdatePost applies u to the post with the id if it belongs to owner and is at version (any,
// for store.AnyVersion), in one statement, and logs its event in the same transaction.
func (s *Store) UpdatePost(ctx context.Context, id, owner string, version int64, u store.Update) (e store.Event, err error) {
	err = s.inTransaction(ctx, func(ctx context.Context, tx *sql.Tx, c *conns) error {
		rows, err := tx.StmtContext(ctx, c.stmt.updatePost).QueryContext(ctx, orNil(u.Title), u.UnsetBody, orNil(u.Body), millis(u.UpdatedAt), id, owner, version)
		updated, err := collect(rows, err, nil, scanPost)
		switch {
		case err != nil:
			return err
		case len(updated) == 0:
			return store.ErrNotFound
		}
		e, err = logEvent(ctx, tx, c, store.EventUpdated, updated[0])
		return err
	})
	return e, err
}

// DeletePost deletes the post with the id if it belongs to owner and is at version (any, for
// store.AnyVersion), keeps its id if an idempotency key names it (keepDeletedSQL), and logs its
// event, in one transaction.
func (s *Store) DeletePost(ctx context.Context, id, owner string, version int64) (e store.Event, err error) {
	err = s.inTransaction(ctx, func(ctx context.Context, tx *sql.Tx, c *conns) error {
		var deleted int64
		if err := tx.StmtContext(ctx, c.stmt.deletePost).QueryRowContext(ctx, id, owner, version).Scan(&deleted); err != nil {
			return err // sql.ErrNoRows: store.ErrNotFound
		}
		if _, err := tx.StmtContext(ctx, c.stmt.keepDeleted).ExecContext(ctx, id); err != nil {
			return err
		}
		e, err = logEvent(ctx, tx, c, store.EventDeleted, store.Post{ID: id, UserID: owner, Version: deleted})
		return err
	})
	return e, err
}

// SaveUser creates the user or refreshes its profile.
func (s *Store) SaveUser(ctx context.Context, u store.User) error {
	c, err := s.conns()
	if err != nil {
		return err
	}
	if _, err = c.stmt.saveUser.ExecContext(ctx, u.ID, orNil(u.Name), orNil(u.Email), millis(u.UpdatedAt)); err != nil {
		return s.classify(err)
	}
	s.wrote(c)
	return nil
}

func scanUser(row scanner) (u store.User, err error) {
	var updated int64
	if err := row.Scan(&u.ID, &u.Name, &u.Email, &updated); err != nil {
		return store.User{}, err
	}
	u.UpdatedAt = fromMillis(updated)
	return u, nil
}

// GetUser returns the user with the id, or store.ErrNotFound.
func (s *Store) GetUser(ctx context.Context, id string) (store.User, error) {
	c, done, err := s.reading()
	if err != nil {
		return store.User{}, err
	}
	defer done()
	u, err := scanUser(c.stmt.getUser.QueryRowContext(ctx, id))
	return u, s.classify(err)
}

// GetUsers returns the users with the ids that have a profile, in one query.
func (s *Store) GetUsers(ctx context.Context, ids []string) ([]store.User, error) {
	// The ids go in as one JSON array parameter, so the statement is prepared once for any count.
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	c, done, err := s.reading()
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := c.stmt.getUsers.QueryContext(ctx, string(list))
	users, err := collect(rows, err, nil, scanUser)
	return users, s.classify(err)
}
