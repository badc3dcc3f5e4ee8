package sqlite_test

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
	"github.com/postsedge/caddy-posts/store/storetest"
)

func open(t *testing.T, dir string, opts sqlite.Options) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, t.TempDir(), sqlite.Options{}) })
}

// direct opens the database file as another program would, read-only, closed when the test ends.
func direct(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.DatabaseFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestListsSearchAnIndexAndNeverSort(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.Options{})
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 2000 { // enough rows for the planner to prefer an index to a scan on its own
		p := store.Post{ID: store.NewID(base), UserID: fmt.Sprint("user", i%50), Title: "t", CreatedAt: base.Add(time.Duration(i) * time.Second), UpdatedAt: base}
		if _, err := s.InsertPost(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	db := direct(t, dir)
	tests := []struct {
		name, query string
		args        []any
		index       string
	}{
		{"a post by id", sqlite.GetPostSQL, []any{"x"}, "PRIMARY KEY"},
		{"an update, at any version or at one", sqlite.UpdatePostSQL, []any{"t", false, nil, 1, "x", "user1", 3}, "PRIMARY KEY (id=?)"},
		{"a delete, at any version or at one", sqlite.DeletePostSQL, []any{"x", "user1", 3}, "PRIMARY KEY (id=?)"},
		{"the first page and every later one", sqlite.ListSQL, []any{int64(1 << 62), "", 20}, "posts_newest"},
		{"a user's pages", sqlite.ListByUserSQL, []any{"user1", int64(1 << 62), "", 20}, "posts_user_newest"},
		{"a profile", sqlite.GetUserSQL, []any{"user1"}, "PRIMARY KEY"},
		{"many profiles", sqlite.GetUsersSQL, []any{`["user1","user2"]`}, "PRIMARY KEY"},
		{"a copy's pages of posts", sqlite.AllPostsSQL, []any{"", 1000}, "PRIMARY KEY (id>?)"},
		{"a copy's pages of profiles", sqlite.AllUsersSQL, []any{"", 1000}, "PRIMARY KEY (id>?)"},
		{"an idempotency key of a user", sqlite.GetKeySQL, []any{"user1", "k"}, "sqlite_autoindex_idempotency_keys_1"},
		{"a sweep of expired idempotency keys", sqlite.DeleteExpiredKeysSQL, []any{int64(1 << 40), 1000}, "idempotency_keys_expiry"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := db.Query("EXPLAIN QUERY PLAN "+tc.query, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			text := strings.Join(plan, "; ")
			for _, bad := range []string{"SCAN posts", "SCAN users", "SCAN idempotency_keys", "TEMP B-TREE"} {
				if strings.Contains(text, bad) {
					t.Errorf("plan %q has %q", text, bad)
				}
			}
			if !strings.Contains(text, "SEARCH") || !strings.Contains(text, tc.index) {
				t.Errorf("plan %q; want a SEARCH using %s", text, tc.index)
			}
		})
	}
}

func TestOneStorePerDirectory(t *testing.T) {
	dir := t.TempDir()
	first := open(t, dir, sqlite.Options{})
	_, err := sqlite.Open(dir, sqlite.Options{})
	if err == nil {
		t.Fatal("a second store opened the same directory")
	}
	for _, want := range []string{filepath.Join(dir, sqlite.LockFile), "locked", dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if err := first.Ping(t.Context()); err != nil {
		t.Errorf("the first store after the refusal: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	open(t, dir, sqlite.Options{}) // the lock is released with the first store
}

func TestNewTouchesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not-yet")
	s := sqlite.New(dir, sqlite.Options{})
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("New made %s (%v)", dir, err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close of a store never opened: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close made %s (%v)", dir, err)
	}
}

func TestTheFirstCallOpensAStoreNothingOpened(t *testing.T) {
	dir := t.TempDir()
	s := sqlite.New(dir, sqlite.Options{})
	t.Cleanup(func() { s.Close() })
	if _, err := s.ListPosts(t.Context(), store.Filter{Limit: 1}); err != nil {
		t.Fatalf("ListPosts: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, sqlite.DatabaseFile)); err != nil {
		t.Errorf("no database after the first call: %v", err)
	}
}

func TestSchemaVersions(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.Options{})
	var version int
	if err := direct(t, dir).QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != sqlite.SchemaVersion {
		t.Errorf("a new database has user_version %d; want %d", version, sqlite.SchemaVersion)
	}
	post := store.Post{ID: store.NewID(time.Now()), UserID: "alice", Title: "kept", CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if _, err := s.InsertPost(t.Context(), post); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	t.Run("a database of this version opens again with its posts", func(t *testing.T) {
		again := open(t, dir, sqlite.Options{})
		if _, err := again.GetPost(t.Context(), post.ID); err != nil {
			t.Errorf("GetPost after reopening: %v", err)
		}
		again.Close()
	})

	t.Run("a database from a newer build is refused and left as it is", func(t *testing.T) {
		rw, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.DatabaseFile))
		if err != nil {
			t.Fatal(err)
		}
		newer := sqlite.SchemaVersion + 7
		if _, err := rw.Exec(fmt.Sprintf("PRAGMA user_version = %d", newer)); err != nil {
			t.Fatal(err)
		}
		rw.Close()
		_, err = sqlite.Open(dir, sqlite.Options{})
		if err == nil {
			t.Fatal("a database from a newer build opened")
		}
		for _, want := range []string{fmt.Sprintf("version %d", newer), fmt.Sprintf("up to %d", sqlite.SchemaVersion)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		var version int
		if err := direct(t, dir).QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != newer {
			t.Errorf("user_version is %d (%v) after the refusal; want %d", version, err, newer)
		}
	})
}

func TestADataDirWithFerretDBFilesIsRefused(t *testing.T) {
	dir := t.TempDir()
	old := map[string]string{"posts.sqlite": "FerretDB's database", "posts.sqlite-wal": "its log", "mongodb.sock": ""}
	for name, content := range old {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err := sqlite.Open(dir, sqlite.Options{})
	if err == nil {
		t.Fatal("the store opened a data_dir holding FerretDB's files")
	}
	for _, want := range []string{"posts.sqlite", dir, "FerretDB", "nothing was changed", "posts-import-ferretdb"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(old) {
		t.Errorf("the directory holds %d entries after the refusal; want the %d it had", len(entries), len(old))
	}
	for name, content := range old {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != content {
			t.Errorf("%s now holds %q (%v); want %q", name, got, err, content)
		}
	}
}
