package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
)

// Backup writes a consistent copy of the database of dir to dest, a file that must not exist,
// while a server may be reading and writing it: VACUUM INTO copies one snapshot, as a read does,
// so writes go on meanwhile. The copy is a whole database on its own (no log beside it); it is
// checked with PRAGMA integrity_check, and posts is how many posts it holds.
//
// It needs no lock of dir, only a connection to its file, so it runs from another process
// beside the server.
func Backup(ctx context.Context, dir, dest string) (posts int, err error) {
	src := filepath.Join(dir, DatabaseFile)
	if _, err := os.Stat(src); err != nil {
		return 0, fmt.Errorf("no database to back up: %w", err)
	}
	if _, err := os.Lstat(dest); err == nil {
		return 0, fmt.Errorf("%s exists already: name a new file", dest)
	}
	// Written under a temporary name and renamed once complete, so dest is never a partial copy.
	tmp := dest + ".partial"
	os.Remove(tmp)
	defer os.Remove(tmp)
	db, err := sql.Open("sqlite", dsn(src, "deferred"))
	if err != nil {
		return 0, err
	}
	db.SetMaxOpenConns(1)
	_, err = db.ExecContext(ctx, "VACUUM INTO ?", tmp)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("copying %s: %w", src, err)
	}
	if posts, err = check(ctx, tmp); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, dest); err != nil {
		return 0, err
	}
	return posts, nil
}

// check runs PRAGMA integrity_check on the database file at path and counts its posts.
func check(ctx context.Context, path string) (posts int, err error) {
	db, err := sql.Open("sqlite", dsn(path, "deferred", "query_only(1)"))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var result string
	if err := db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&result); err != nil {
		return 0, err
	}
	if result != "ok" {
		return 0, fmt.Errorf("%s fails its integrity check: %s", path, result)
	}
	err = db.QueryRowContext(ctx, "SELECT count(*) FROM posts").Scan(&posts)
	return posts, err
}
