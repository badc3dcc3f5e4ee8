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
	t.Parallel() // on a store of its own; the package's longest tests under the race detector run together
	storetest.RunWith(t, func(t *testing.T) store.Store { return open(t, t.TempDir(), sqlite.Options{}) }, storetest.Options{
		// A restart: one store at a time has the directory.
		Reopen: func(t *testing.T, s store.Store) store.Store {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, s.(*sqlite.Store).Dir(), sqlite.Options{})
		},
	})
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
