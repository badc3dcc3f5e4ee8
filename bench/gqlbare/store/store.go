// Package store reads caddy-posts' SQLite file (the posts and users tables its embedded store
// made) for the gqlgen server, as bench/bare does: the same driver (modernc.org/sqlite), a pool
// of read-only connections with the same pragmas, prepared statements, and the keyset query of
// a user's newest posts on the index in its order.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/url"
	"runtime"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/postsedge/caddy-posts/bench/gqlbare/graph/model"
)

// timeout bounds each read, as caddy-posts' store timeout does.
const timeout = 5 * time.Second

// The queries, on caddy-posts' tables (times are Unix milliseconds).
const (
	columns       = `id, user_id, title, body, created_at, updated_at, version`
	getPostSQL    = `SELECT ` + columns + ` FROM posts WHERE id = ?`
	listByUserSQL = `SELECT ` + columns + ` FROM posts WHERE user_id = ? AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?`
	getUserSQL    = `SELECT id, name FROM users WHERE id = ?`
	hasPostsSQL   = `SELECT EXISTS (SELECT 1 FROM posts WHERE user_id = ?)`
)

// Store reads one caddy-posts file. Its methods are safe for concurrent use.
type Store struct {
	db                                *sql.DB
	getPost, listByUser, getUser, has *sql.Stmt
}

// Open opens the SQLite file at path, which caddy-posts made, for reading only.
func Open(path string) (s *Store, err error) {
	s = &Store{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.db, err = sql.Open("sqlite", dsn(path)); err != nil {
		return s, err
	}
	readers := max(4, 2*runtime.GOMAXPROCS(0))
	s.db.SetMaxOpenConns(readers)
	s.db.SetMaxIdleConns(readers)
	for _, p := range []struct {
		stmt  **sql.Stmt
		query string
	}{{&s.getPost, getPostSQL}, {&s.listByUser, listByUserSQL}, {&s.getUser, getUserSQL}, {&s.has, hasPostsSQL}} {
		if *p.stmt, err = s.db.Prepare(p.query); err != nil {
			return s, fmt.Errorf("preparing %q: %w", p.query, err)
		}
	}
	return s, nil
}

// dsn names the file at path for the driver, with the pragmas each connection runs: bench/bare's
// for its readers.
func dsn(path string) string {
	q := url.Values{"_txlock": {"deferred"}}
	for _, p := range []string{"busy_timeout(5000)", "cache_size(-16000)", "foreign_keys(1)", "temp_store(MEMORY)", "query_only(1)"} {
		q.Add("_pragma", p)
	}
	return (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String()
}

// Close closes the statements and the connections.
func (s *Store) Close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.getPost, s.listByUser, s.getUser, s.has} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	return errors.Join(errs...)
}

// Post returns the post with the id, or nil if there is none.
func (s *Store) Post(ctx context.Context, id string) (*model.Post, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := scanPost(s.getPost.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return p, err
}

// UserPosts returns the newest limit posts of the user.
func (s *Store) UserPosts(ctx context.Context, user string, limit int) ([]*model.Post, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The first page starts after a key that every post comes after.
	rows, err := s.listByUser.QueryContext(ctx, user, int64(math.MaxInt64), "", limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]*model.Post, 0, limit)
	for rows.Next() {
		p, err := scanPost(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// User returns the user with the id: the saved profile, or the id alone for a user who has
// posts but no profile; nil for neither. The email is never set: it is only for the user
// themselves, and this server knows no caller.
func (s *Store) User(ctx context.Context, id string) (*model.User, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := &model.User{}
	err := s.getUser.QueryRowContext(ctx, id).Scan(&u.ID, &u.Name)
	if !errors.Is(err, sql.ErrNoRows) {
		return u, err
	}
	var has bool
	if err := s.has.QueryRowContext(ctx, id).Scan(&has); err != nil || !has {
		return nil, err
	}
	return &model.User{ID: id}, nil
}

// row is a *sql.Row or *sql.Rows.
type row interface{ Scan(dest ...any) error }

func scanPost(r row) (*model.Post, error) {
	var p model.Post
	var created, updated int64
	if err := r.Scan(&p.ID, &p.UserID, &p.Title, &p.Body, &created, &updated, &p.Version); err != nil {
		return nil, err
	}
	p.CreatedAt, p.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	return &p, nil
}
