package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

func TestBackupWhileWriting(t *testing.T) {
	t.Parallel() // on a store of its own; the package's longest tests under the race detector run together
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

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
