//go:build !race

package sqlite_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// The race detector makes SQLite (C translated to Go) some six times slower, and these tests are
// about the size of a file under load, not about races: `make test` runs them without -race.

// The write-ahead log stays bounded under writes beside reads that never stop: here with a
// walLimit of 2 MiB over 2,000 posts, which would grow it past 50 MB without the store's
// truncation; wal_long_test.go keeps the store's own limit, 32 MiB, over 20,000 posts. The log
// grows some 13 MB between two looks at its size (checkpointEvery writes, 52 kB a post here,
// most of them its search index's pages), so it peaks below the limit and that, at 15.2 MB:
// the bound, 20 MiB, leaves 5 MB to spare. (A smaller limit is the faster test: every read and
// write of a larger log costs more.)
func TestTheWriteAheadLogStaysBounded(t *testing.T) {
	sqlite.SetWALLimit(t, 2<<20)
	walStaysBounded(t, 2_000, 20<<20, 25)
}

// walStaysBounded inserts posts posts (and updates one in ten) beside four readers, looking at the
// log's size every measureEvery posts, and fails if it ever exceeds limit.
func walStaysBounded(t *testing.T, posts int, limit int64, measureEvery int) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.Options{})
	wal := filepath.Join(dir, sqlite.DatabaseFile+"-wal")
	var largest int64
	measure := func() {
		if fi, err := os.Stat(wal); err == nil {
			largest = max(largest, fi.Size())
		}
	}
	// Reads run all along, as under heavy traffic: four readers on two cores leave the log hardly
	// a moment without a read in it, and a read in progress holds back the log's restart, so
	// without the store's own truncation the log grows with every write (68 MB over 20,000 posts).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.ListPosts(t.Context(), store.Filter{Limit: 20}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	base := time.Now()
	body := strings.Repeat("lorem ipsum dolor sit amet ", 18) // 486 bytes of words, as posts hold
	for i := range posts {
		p := store.Post{ID: store.NewID(base), UserID: "alice", Title: "t", Body: &body, CreatedAt: base, UpdatedAt: base}
		if _, err := s.InsertPost(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if _, err := s.UpdatePost(t.Context(), p.ID, "alice", store.AnyVersion, store.Update{Title: new("u"), UpdatedAt: base}); err != nil {
				t.Fatal(err)
			}
		}
		if i%measureEvery == 0 {
			measure()
		}
	}
	close(stop)
	wg.Wait()
	measure()
	t.Logf("the largest -wal file seen was %.1f MB", float64(largest)/(1<<20))
	if largest > limit {
		t.Errorf("the -wal file reached %d bytes; want at most %d", largest, limit)
	}
}
