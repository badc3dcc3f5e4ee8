package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

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
