package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

func TestBackupWhileWriting(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.Options{})
	base := time.Now().UTC().Truncate(time.Millisecond)
	var written atomic.Int64
	insert := func(i int) {
		p := store.Post{ID: store.NewID(base), UserID: "alice", Title: fmt.Sprint("post ", i), CreatedAt: base.Add(time.Duration(i) * time.Millisecond), UpdatedAt: base}
		if _, err := s.InsertPost(context.Background(), p); err != nil {
			t.Error(err)
		}
		written.Add(1)
	}
	for i := range 2000 {
		insert(i)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // writes go on all through the backup
		for i := 2000; ; i++ {
			select {
			case <-stop:
				return
			default:
				insert(i)
			}
		}
	})
	before := written.Load()
	dest := filepath.Join(t.TempDir(), "backup.db")
	posts, err := sqlite.Backup(t.Context(), dir, dest)
	after := written.Load()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if int64(posts) < before || int64(posts) > after {
		t.Errorf("the backup holds %d posts; want from %d to %d, the posts written when it began and ended", posts, before, after)
	}
	if _, err := os.Stat(dest + ".partial"); !os.IsNotExist(err) {
		t.Errorf("the temporary copy is left behind (%v)", err)
	}

	t.Run("a backup never overwrites a file", func(t *testing.T) {
		if _, err := sqlite.Backup(t.Context(), dir, dest); err == nil || !strings.Contains(err.Error(), "exists") {
			t.Errorf("Backup onto an existing file: error %v", err)
		}
	})
	t.Run("a directory without a database has nothing to back up", func(t *testing.T) {
		if _, err := sqlite.Backup(t.Context(), t.TempDir(), filepath.Join(t.TempDir(), "x.db")); err == nil {
			t.Error("Backup of an empty directory succeeded")
		}
	})
	t.Run("the backup, put in place of the file, is a store with those posts", func(t *testing.T) {
		restored := t.TempDir()
		data, err := os.ReadFile(dest)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(restored, sqlite.DatabaseFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
		r := open(t, restored, sqlite.Options{})
		got, err := r.ListPosts(t.Context(), store.Filter{Limit: posts + 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != posts {
			t.Errorf("the restored store lists %d posts; want %d", len(got), posts)
		}
	})
}

// The files of the embedded store of earlier releases are made by FerretDB itself, through the
// documents the MongoDB store writes, as those releases did.
func TestImportFerretDB(t *testing.T) {
	dir := t.TempDir()
	server, err := mongotest.Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	old, err := mongo.Open(server.URI, "posts")
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2025, 3, 14, 15, 9, 26, 535_000_000, time.UTC)
	var want []store.Post
	for i := range 30 {
		p := store.Post{ID: store.NewID(base), UserID: fmt.Sprint("user", i%3), Title: fmt.Sprintf("post %d ✓", i),
			CreatedAt: base.Add(time.Duration(i) * time.Second), UpdatedAt: base.Add(time.Duration(i) * time.Minute)}
		if i%2 == 0 {
			p.Body = new(fmt.Sprintf("body of %d, \"quoted\"\n", i))
		}
		if _, err := old.InsertPost(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		want = append([]store.Post{p}, want...)
	}
	for _, u := range []store.User{{ID: "user0", Name: new("Zero"), Email: new("zero@example.com"), UpdatedAt: base}, {ID: "user1", UpdatedAt: base}} {
		if err := old.SaveUser(t.Context(), u); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	server.Close()

	if _, err := sqlite.Open(dir, sqlite.Options{}); err == nil {
		t.Fatal("the store opened a directory with FerretDB's files")
	}
	done, err := sqlite.ImportFerretDB(t.Context(), dir, "posts", sqlite.Options{})
	if err != nil {
		t.Fatalf("ImportFerretDB: %v", err)
	}
	if done.Posts != 30 || done.Users != 2 || done.Moved != filepath.Join(dir, sqlite.FerretDBDir) {
		t.Errorf("imported %+v; want 30 posts, 2 users, the files moved to %s", done, sqlite.FerretDBDir)
	}
	if _, err := os.Stat(filepath.Join(dir, sqlite.FerretDBDir, "posts.sqlite")); err != nil {
		t.Errorf("the old database is not kept: %v", err)
	}

	s := open(t, dir, sqlite.Options{})
	got, err := s.ListPosts(t.Context(), store.Filter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d posts after the import; want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.UserID != w.UserID || g.Title != w.Title || deref(g.Body) != deref(w.Body) || (g.Body == nil) != (w.Body == nil) ||
			!g.CreatedAt.Equal(w.CreatedAt) || !g.UpdatedAt.Equal(w.UpdatedAt) {
			t.Errorf("post %d is %+v; want %+v", i, g, w)
		}
	}
	u, err := s.GetUser(t.Context(), "user0")
	if err != nil || deref(u.Name) != "Zero" || deref(u.Email) != "zero@example.com" || !u.UpdatedAt.Equal(base) {
		t.Errorf("user0 is %+v (%v)", u, err)
	}
	s.Close()

	t.Run("a second import copies nothing twice", func(t *testing.T) {
		again, err := sqlite.ImportFerretDB(t.Context(), dir, "posts", sqlite.Options{})
		if err != nil || again.Posts != 0 || again.Users != 0 {
			t.Errorf("second import: %+v, %v; want nothing copied", again, err)
		}
	})
	t.Run("a directory without FerretDB's files has nothing to import", func(t *testing.T) {
		if _, err := sqlite.ImportFerretDB(t.Context(), t.TempDir(), "posts", sqlite.Options{}); err == nil {
			t.Error("import from an empty directory succeeded")
		}
	})
	files, _ := os.ReadDir(dir)
	var names []string
	for _, f := range files {
		names = append(names, f.Name())
	}
	if slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".sqlite") }) {
		t.Errorf("FerretDB files are left in the data directory: %v", names)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
