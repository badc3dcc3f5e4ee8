package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"

	"github.com/postsedge/caddy-posts/store"
)

// Snapshot is the database of a data directory as it was at one moment, to read only: one read
// transaction on a connection of its own, without the directory's lock, so a Caddy serving the
// directory goes on reading and writing it meanwhile, as beside a backup. It is what
// `caddy posts-copy` reads a data_dir through: every page it reads is of the same moment.
//
// While it is open the server cannot start its write-ahead log over, so the log grows by what
// is written meanwhile (see Store.wrote): close it when done.
type Snapshot struct {
	path string
	db   *sql.DB
	tx   *sql.Tx
}

// OpenSnapshot opens a snapshot of the database of dir, which must exist and have this build's
// schema; it creates and changes nothing. ctx bounds the snapshot's life: when it ends, the
// snapshot's reads fail.
func OpenSnapshot(ctx context.Context, dir string) (_ *Snapshot, err error) {
	path := filepath.Join(dir, DatabaseFile)
	if _, err := os.Stat(path); err != nil {
		if old, _ := ferretDBFiles(dir); len(old) > 0 {
			return nil, fmt.Errorf("%s holds %s, the FerretDB-based embedded store of earlier releases: run caddy posts-import-ferretdb --data_dir %s first",
				dir, strings.Join(old, ", "), dir)
		}
		return nil, fmt.Errorf("no embedded store in %s: %w", dir, err)
	}
	db, err := sql.Open("sqlite", dsn(path, "deferred", "query_only(1)"))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	s := &Snapshot{path: path, db: db}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.tx, err = db.BeginTx(ctx, nil); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	// The transaction's first read fixes the moment it sees.
	version, err := schemaVersion(ctx, s.tx)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if version != SchemaVersion {
		return nil, fmt.Errorf("%s has schema version %d, and this build of caddy-posts reads version %d: "+
			"run the build of caddy-posts that wrote it, or start this one on it once to bring it up to date", path, version, SchemaVersion)
	}
	return s, nil
}

// AllPosts yields every post of the snapshot in ascending id order, a page of batch at a time.
func (s *Snapshot) AllPosts(ctx context.Context, batch int) iter.Seq2[store.Post, error] {
	return inPages(func(after string) ([]store.Post, error) {
		page, err := queryPage(ctx, s.tx, allPostsSQL, after, batch, scanPost, store.Post.Size)
		return named(s.path, page, err)
	}, postID)
}

// AllUsers yields every profile of the snapshot in ascending id order, a page of batch at a time.
func (s *Snapshot) AllUsers(ctx context.Context, batch int) iter.Seq2[store.User, error] {
	return inPages(func(after string) ([]store.User, error) {
		page, err := queryPage(ctx, s.tx, allUsersSQL, after, batch, scanUser, store.User.Size)
		return named(s.path, page, err)
	}, userID)
}

// named names the file in a failure to read a page of it.
func named[T any](path string, values []T, err error) ([]T, error) {
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return values, nil
}

// Close ends the snapshot.
func (s *Snapshot) Close() error {
	var err error
	if s.tx != nil {
		err = s.tx.Rollback()
		if errors.Is(err, sql.ErrTxDone) { // ended with its context
			err = nil
		}
	}
	return errors.Join(err, s.db.Close())
}

var _ store.CopySource = (*Snapshot)(nil)
