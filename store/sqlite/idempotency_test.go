package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

func TestIdempotencyKeysAreFoundThroughAnIndex(t *testing.T) {
	dir := t.TempDir()
	open(t, dir, sqlite.Options{})
	db := direct(t, dir)
	for _, tc := range []struct {
		name, query string
		args        []any
		index       string
	}{
		{"a key of a user", sqlite.GetKeySQL, []any{"alice", "k"}, "sqlite_autoindex_idempotency_keys_1"},
		{"a sweep of expired keys", sqlite.DeleteExpiredKeysSQL, []any{int64(1 << 40), 1000}, "idempotency_keys_expiry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := plan(t, db, tc.query, tc.args...)
			if strings.Contains(text, "SCAN idempotency_keys") || !strings.Contains(text, tc.index) {
				t.Errorf("plan %q; want a SEARCH using %s", text, tc.index)
			}
		})
	}
}

// plan is the EXPLAIN QUERY PLAN of query, its lines joined.
func plan(t *testing.T, db *sql.DB, query string, args ...any) string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	return strings.Join(lines, "; ")
}

// A data_dir written by a build before idempotency keys opens with its posts, and keeps keys.
func TestADatabaseOfVersionOneGainsIdempotencyKeys(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{sqlite.FirstSchema, "PRAGMA user_version = 1",
		`INSERT INTO posts VALUES ('67d44600000000000000000a', 'alice', 'from before', NULL, 1, 1)`} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s := open(t, dir, sqlite.Options{})
	if p, err := s.GetPost(t.Context(), "67d44600000000000000000a"); err != nil || p.Title != "from before" {
		t.Errorf("the post of before: %+v, %v", p, err)
	}
	now := time.Now()
	r := store.IdempotencyRecord{UserID: "alice", Key: "k", Fingerprint: "f", PostID: store.NewID(now), Attempt: 1,
		LockedUntil: now.Add(time.Minute), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if _, reserved, err := s.ReserveKey(t.Context(), r, now); !reserved || err != nil {
		t.Errorf("ReserveKey: %v, %v", reserved, err)
	}
	var version int
	if err := direct(t, dir).QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != sqlite.SchemaVersion {
		t.Errorf("user_version %d (%v); want %d", version, err, sqlite.SchemaVersion)
	}
}
