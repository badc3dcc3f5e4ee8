//go:build !race

// The import of FerretDB's files: one goroutine, and a FerretDB that makes the race test binary
// of the package slow to link and the test slow to run; make test runs it in its step without the
// race detector.

package sqlite_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

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
