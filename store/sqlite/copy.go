package sqlite

import (
	"context"
	"database/sql"
	"iter"

	"github.com/postsedge/caddy-posts/store"
)

// The queries of a copy (store.CopyTarget). Each page is a range search of the primary key from
// the last id of the page before, so reading a whole store costs one pass over each table
// however many pages it takes (a test checks the plans).
const (
	allPostsSQL      = `SELECT ` + postColumns + ` FROM posts WHERE id > ? ORDER BY id LIMIT ?`
	allUsersSQL      = `SELECT id, name, email, updated_at FROM users WHERE id > ? ORDER BY id LIMIT ?`
	insertNewPostSQL = insertPostSQL + ` ON CONFLICT (id) DO NOTHING`
	insertNewUserSQL = `INSERT INTO users (id, name, email, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`
)

// rowQuerier is what both a pool and a transaction can run a query on.
type rowQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryPage reads one page of query from q: at most limit rows after the id after, and fewer
// once they hold store.MaxBatchBytes.
func queryPage[T any](ctx context.Context, q rowQuerier, query, after string, limit int, scan func(scanner) (T, error), size func(T) int) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close() // ends the statement, however many rows were read
	var page []T
	for bytes := 0; bytes < store.MaxBatchBytes && rows.Next(); {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		page = append(page, v)
		bytes += size(v)
	}
	return page, rows.Err()
}

// inPages yields the rows of the pages that page reads, each after the last id of the one
// before, until one is empty. No statement stays open while a value is yielded.
func inPages[T any](page func(after string) ([]T, error), id func(T) string) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for after := ""; ; {
			values, err := page(after)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			if len(values) == 0 {
				return
			}
			for _, v := range values {
				if !yield(v, nil) {
					return
				}
			}
			after = id(values[len(values)-1])
		}
	}
}

func postID(p store.Post) string { return p.ID }
func userID(u store.User) string { return u.ID }

// AllPosts yields every post in ascending id order, a page of batch at a time.
func (s *Store) AllPosts(ctx context.Context, batch int) iter.Seq2[store.Post, error] {
	return inPages(func(after string) ([]store.Post, error) {
		return readPage(ctx, s, allPostsSQL, after, batch, scanPost, store.Post.Size)
	}, postID)
}

// AllUsers yields every profile in ascending id order, a page of batch at a time.
func (s *Store) AllUsers(ctx context.Context, batch int) iter.Seq2[store.User, error] {
	return inPages(func(after string) ([]store.User, error) {
		return readPage(ctx, s, allUsersSQL, after, batch, scanUser, store.User.Size)
	}, userID)
}

// readPage reads a page on the store's readers, as every read does (see Store.reading).
func readPage[T any](ctx context.Context, s *Store, query, after string, limit int, scan func(scanner) (T, error), size func(T) int) ([]T, error) {
	c, done, err := s.reading()
	if err != nil {
		return nil, err
	}
	defer done()
	page, err := queryPage(ctx, c.read, query, after, limit, scan, size)
	return page, s.classify(err)
}

// InsertPosts stores the posts whose ids are not stored yet, in one transaction.
func (s *Store) InsertPosts(ctx context.Context, posts []store.Post) (int, error) {
	for _, p := range posts {
		if !store.ValidID(p.ID) {
			return 0, &invalidIDError{p.ID}
		}
	}
	return s.insertNew(ctx, insertNewPostSQL, len(posts), func(i int) []any { return postArgs(posts[i]) })
}

// InsertUsers stores the profiles whose ids are not stored yet, in one transaction.
func (s *Store) InsertUsers(ctx context.Context, users []store.User) (int, error) {
	return s.insertNew(ctx, insertNewUserSQL, len(users), func(i int) []any {
		u := users[i]
		return []any{u.ID, orNil(u.Name), orNil(u.Email), millis(u.UpdatedAt)}
	})
}

// insertNew runs query, an insert that skips an id stored already, with the args of each of n
// rows, in one transaction, and returns how many rows it stored.
func (s *Store) insertNew(ctx context.Context, query string, n int, args func(int) []any) (inserted int, err error) {
	if n == 0 {
		return 0, nil
	}
	c, err := s.conns()
	if err != nil {
		return 0, err
	}
	tx, err := c.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, s.classify(err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, query)
	if err != nil {
		return 0, s.classify(err)
	}
	defer stmt.Close()
	for i := range n {
		res, err := stmt.ExecContext(ctx, args(i)...)
		if err != nil {
			return 0, s.classify(err)
		}
		stored, err := res.RowsAffected()
		if err != nil {
			return 0, s.classify(err)
		}
		inserted += int(stored)
	}
	if err := indexWords(ctx, tx, c); err != nil {
		return 0, s.classify(err)
	}
	if err := c.state.commit(ctx, tx, c, nil); err != nil { // new ids: none the cache holds
		return 0, s.classify(err)
	}
	s.wrote(c)
	return inserted, nil
}

// invalidIDError is a post whose id store.NewID did not make.
type invalidIDError struct{ id string }

func (e *invalidIDError) Error() string { return "not a post id: " + e.id }

var _ store.CopyTarget = (*Store)(nil)
