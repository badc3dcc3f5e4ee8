package sqlite_test

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// A file written by the release before versions (schema version 1) opens with its posts at
// version 1, and its writes go on from there.
func TestAFileOfSchemaVersion1GetsVersions(t *testing.T) {
	dir := t.TempDir()
	old, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2025, 3, 14, 15, 9, 26, 535_000_000, time.UTC)
	ids := []string{store.NewID(base), store.NewID(base)}
	for _, stmt := range []string{sqlite.Migrations[0], "PRAGMA user_version = 1"} {
		if _, err := old.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range ids {
		if _, err := old.Exec(`INSERT INTO posts (id, user_id, title, body, created_at, updated_at) VALUES (?, 'alice', ?, NULL, ?, ?)`,
			id, fmt.Sprint("from before ", i), base.UnixMilli(), base.UnixMilli()); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s := open(t, dir, sqlite.Options{})
	t.Run("the file is at this build's schema version", func(t *testing.T) {
		var version int
		if err := direct(t, dir).QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != sqlite.SchemaVersion {
			t.Errorf("user_version = %d (%v); want %d", version, err, sqlite.SchemaVersion)
		}
	})
	t.Run("every post stored before is at version 1, and otherwise as it was", func(t *testing.T) {
		for i, id := range ids {
			p, err := s.GetPost(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if p.Version != 1 || p.Title != fmt.Sprint("from before ", i) || !p.CreatedAt.Equal(base) || p.Body != nil {
				t.Errorf("post %s = %+v; want it as stored, at version 1", id, p)
			}
		}
	})
	t.Run("an update at version 1 succeeds and gives version 2", func(t *testing.T) {
		p, err := s.UpdatePost(t.Context(), ids[0], "alice", 1, store.Update{Title: new("after"), UpdatedAt: base.Add(time.Second)})
		if err != nil || p.Post.Version != 2 {
			t.Fatalf("UpdatePost = %+v, %v; want version 2", p, err)
		}
		if _, err := s.UpdatePost(t.Context(), ids[0], "alice", 1, store.Update{Title: new("again"), UpdatedAt: base.Add(time.Second)}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a second update at version 1: %v; want ErrNotFound", err)
		}
	})
	t.Run("the event log has a key", func(t *testing.T) {
		if key, err := s.Key(t.Context()); err != nil || len(key) != 16 {
			t.Errorf("Key = %x, %v; want 16 bytes", key, err)
		}
	})
	t.Run("a delete at version 1 succeeds", func(t *testing.T) {
		if _, err := s.DeletePost(t.Context(), ids[1], "alice", 1); err != nil {
			t.Fatal(err)
		}
	})
}

// A log of schema version 5 (AUTOINCREMENT, its last position in sqlite_sequence) keeps its
// events at their positions, and goes on after the last position it gave, even when expiry has
// deleted that position's event: a position is never given twice.
func TestALogOfSchemaVersion5GoesOnAfterItsLastPosition(t *testing.T) {
	for _, tc := range []struct {
		name string
		kept int // of the five events logged, the newest kept
	}{
		{"with its newest events kept", 2},
		{"emptied by expiry", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			old, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.DatabaseFile))
			if err != nil {
				t.Fatal(err)
			}
			stmts := append(append([]string{}, sqlite.Migrations[:5]...), "PRAGMA user_version = 5")
			for i := range 5 {
				stmts = append(stmts, fmt.Sprintf(`INSERT INTO events (at, kind, post_id, user_id, title, version) VALUES (%d, 'created', 'p%d', 'alice', 't', 1)`, 1000+i, i))
			}
			stmts = append(stmts, fmt.Sprintf(`DELETE FROM events WHERE position <= %d`, 5-tc.kept))
			for _, stmt := range stmts {
				if _, err := old.Exec(stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}

			s := open(t, dir, sqlite.Options{})
			if last, err := s.LastPosition(t.Context()); err != nil || last != 5 {
				t.Errorf("LastPosition = %d, %v; want 5, the last given", last, err)
			}
			events, _, err := s.ReadEvents(t.Context(), 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			var kept []int64
			for _, e := range events {
				kept = append(kept, e.Position)
			}
			if want := []int64{3, 4, 5}[3-tc.kept:]; fmt.Sprint(kept) != fmt.Sprint(want) {
				t.Errorf("the log holds the positions %v; want %v", kept, want)
			}
			now := time.Now()
			e, err := s.InsertPost(t.Context(), store.Post{ID: store.NewID(now), UserID: "alice", Title: "after", CreatedAt: now, UpdatedAt: now})
			if err != nil || e.Position != 6 {
				t.Fatalf("the next write's event is at %d, %v; want 6", e.Position, err)
			}
			if _, err := s.ExpireEvents(t.Context(), time.Now().Add(time.Hour), 0); err != nil {
				t.Fatal(err)
			}
			e, err = s.InsertPost(t.Context(), store.Post{ID: store.NewID(now), UserID: "alice", Title: "after expiry", CreatedAt: now, UpdatedAt: now})
			if err != nil || e.Position != 7 {
				t.Errorf("the write after every event expired is at %d, %v; want 7", e.Position, err)
			}
		})
	}
}
