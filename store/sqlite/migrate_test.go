package sqlite_test

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
	"github.com/postsedge/caddy-posts/store/words"
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

// A file of schema version 7, the release before search, opens with every post it holds in the
// search's index, ranked within each millisecond by id, and its progress logged a batch at a
// time; the writes after it are found too.
func TestAFileOfSchemaVersion7IsSearchedWhole(t *testing.T) {
	dir := t.TempDir()
	old, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := old.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range append(append([]string{}, sqlite.Migrations[:7]...), "PRAGMA user_version = 7") {
		if _, err := tx.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	const stored = 25_000 // two and a half batches of the backfill
	for n := range stored {
		// Three posts a millisecond, inserted in descending id order; one in 100 says "needle".
		title := fmt.Sprint("post number ", n)
		if n%100 == 0 {
			title = "Needle " + title
		}
		created := base.Add(time.Duration(n/3) * time.Millisecond).UnixMilli()
		if _, err := tx.Exec(`INSERT INTO posts (id, user_id, title, body, created_at, updated_at) VALUES (?, 'alice', ?, 'Ünïcödé body', ?, ?)`,
			fmt.Sprintf("67d44600%016x", stored-n), title, created, created); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	logs, logged := observer.New(zap.InfoLevel)
	s := open(t, dir, sqlite.Options{Logger: zap.New(logs)})
	var progress []int64
	for _, e := range logged.FilterMessage("building the search index").All() {
		progress = append(progress, e.ContextMap()["indexed"].(int64))
	}
	if fmt.Sprint(progress) != "[10000 20000 25000]" {
		t.Errorf("the progress logged: %v; want [10000 20000 25000]", progress)
	}
	needle := func(f store.Filter) []store.Post {
		t.Helper()
		f.Search, f.Limit = words.Parse("needle"), 1000
		found, err := s.ListPosts(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	found := needle(store.Filter{})
	if len(found) != stored/100 {
		t.Fatalf("a search found %d posts; want %d", len(found), stored/100)
	}
	if len(needle(store.Filter{UserID: "alice"})) != stored/100 || len(needle(store.Filter{UserID: "bob"})) != 0 {
		t.Error("a search of a user's posts finds other users' or not theirs")
	}
	if all, err := s.ListPosts(t.Context(), store.Filter{Search: words.Parse("unicode"), Limit: 10}); err != nil || len(all) != 10 {
		t.Errorf("a search of every post's body found %d, %v; want 10", len(all), err)
	}
	// A post created in a millisecond of the stored posts takes a row of its own.
	at := base.Add(time.Millisecond)
	p := store.Post{ID: store.NewID(at), UserID: "bob", Title: "needle after", CreatedAt: at, UpdatedAt: at}
	if _, err := s.InsertPost(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if got := needle(store.Filter{UserID: "bob"}); len(got) != 1 || got[0].ID != p.ID {
		t.Errorf("the search of the post written after found %d posts; want it alone", len(got))
	}
	if len(needle(store.Filter{})) != stored/100+1 {
		t.Error("the post written after hid a stored one")
	}
}
