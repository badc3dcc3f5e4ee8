package sqlite_test

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

func snapshot(t *testing.T, dir string) *sqlite.Snapshot {
	t.Helper()
	s, err := sqlite.OpenSnapshot(t.Context(), dir)
	if err != nil {
		t.Fatalf("OpenSnapshot: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// postIDs reads the ids of every post s yields, in pages of 2.
func postIDs(t *testing.T, s store.CopySource) []string {
	t.Helper()
	var ids []string
	for p, err := range s.AllPosts(t.Context(), 2) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	return ids
}

func TestASnapshotReadsOneMomentWhileTheStoreWrites(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.Options{}) // holds the directory's lock all along
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	post := func(n int) store.Post {
		return store.Post{ID: fmt.Sprintf("67d44600%016x", n), UserID: "alice", Title: fmt.Sprint(n), CreatedAt: at, UpdatedAt: at}
	}
	var before []string
	for n := 1; n <= 5; n++ {
		if _, err := s.InsertPost(t.Context(), post(n)); err != nil {
			t.Fatal(err)
		}
		before = append(before, post(n).ID)
	}
	if err := s.SaveUser(t.Context(), store.User{ID: "alice", Name: new("Alice"), UpdatedAt: at}); err != nil {
		t.Fatal(err)
	}
	snap := snapshot(t, dir)
	for n := 6; n <= 8; n++ {
		if _, err := s.InsertPost(t.Context(), post(n)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DeletePost(t.Context(), post(1).ID, "alice", store.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveUser(t.Context(), store.User{ID: "bob", UpdatedAt: at}); err != nil {
		t.Fatal(err)
	}

	t.Run("posts written or deleted after it opened are as they were", func(t *testing.T) {
		if got := postIDs(t, snap); !slices.Equal(got, before) {
			t.Errorf("the snapshot yields %v; want %v", got, before)
		}
	})
	t.Run("profiles saved after it opened are not in it", func(t *testing.T) {
		var got []string
		for u, err := range snap.AllUsers(t.Context(), 1) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, u.ID)
		}
		if !slices.Equal(got, []string{"alice"}) {
			t.Errorf("the snapshot yields profiles %v; want [alice]", got)
		}
	})
	t.Run("the store reads what it wrote meanwhile", func(t *testing.T) {
		if got := len(postIDs(t, s)); got != 7 {
			t.Errorf("the store yields %d posts; want 7", got)
		}
	})
}

func TestASnapshotRefusesWhatItCannotRead(t *testing.T) {
	t.Run("a directory that does not exist, which it does not make", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "none")
		_, err := sqlite.OpenSnapshot(t.Context(), dir)
		if err == nil || !strings.Contains(err.Error(), "no embedded store in "+dir) {
			t.Errorf("error %v; want one naming %s", err, dir)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the directory was made (%v)", err)
		}
	})
	t.Run("a directory without posts.db, which it leaves empty", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := sqlite.OpenSnapshot(t.Context(), dir); err == nil || !strings.Contains(err.Error(), "no embedded store") {
			t.Errorf("error %v; want no embedded store", err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("the directory holds %v", entries)
		}
	})
	t.Run("a directory of the FerretDB store, naming the command that imports it", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "posts.sqlite"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := sqlite.OpenSnapshot(t.Context(), dir)
		if err == nil || !strings.Contains(err.Error(), "posts-import-ferretdb --data_dir "+dir) {
			t.Errorf("error %v; want the import command", err)
		}
	})
	t.Run("a database of another schema version, naming both", func(t *testing.T) {
		dir := t.TempDir()
		open(t, dir, sqlite.Options{}).Close()
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.DatabaseFile))
		if err != nil {
			t.Fatal(err)
		}
		newer := sqlite.SchemaVersion + 3
		_, err = db.Exec(fmt.Sprintf("PRAGMA user_version = %d", newer))
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		_, err = sqlite.OpenSnapshot(t.Context(), dir)
		for _, want := range []string{fmt.Sprintf("version %d", newer), fmt.Sprintf("reads version %d", sqlite.SchemaVersion)} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v does not say %q", err, want)
			}
		}
	})
}
