package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// TestThePostCacheNeverServesAStaleVersion writes and reads a few posts from many goroutines
// through a cache that holds a fraction of them (so that posts come and go), and checks every read
// against the log, the model: the version a read gives (or its absence) is the one the log's last
// event of the post up to the read's position (store.Seen) says, and no read gives a version older
// than one whose write had returned before the read began.
func TestThePostCacheNeverServesAStaleVersion(t *testing.T) {
	t.Parallel()
	const posts, writers, readers = 40, 4, 8
	s := open(t, t.TempDir(), sqlite.Options{CacheSize: 12 * (sqlite.CacheEntryOverhead + 80)})
	ctx := context.Background()
	at := time.Now()
	ids := make([]string, posts)
	for i := range ids {
		ids[i] = store.NewID(at)
		if _, err := s.InsertPost(ctx, store.Post{ID: ids[i], UserID: "u", Title: "v1", CreatedAt: at, UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	// returned[i] is the version of post i that a write has returned, math.MaxInt64 once deleted.
	returned := make([]atomic.Int64, posts)
	for i := range returned {
		returned[i].Store(1)
	}
	type readOf struct {
		id       string
		version  int64 // 0: not found
		position int64
	}
	var (
		mu    sync.Mutex
		reads []readOf
		stop  atomic.Bool
		wg    sync.WaitGroup
		fail  = make(chan error, writers+readers)
	)
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for n := 0; !stop.Load(); n++ {
				i := rng.IntN(posts)
				var (
					e   store.Event
					err error
				)
				if i < posts/4 && rng.IntN(200) == 0 { // a quarter of the posts, deleted at length
					e, err = s.DeletePost(ctx, ids[i], "u", store.AnyVersion)
				} else {
					title := fmt.Sprintf("by %d, %d", w, n)
					e, err = s.UpdatePost(ctx, ids[i], "u", store.AnyVersion, store.Update{Title: &title, UpdatedAt: time.Now()})
				}
				switch {
				case errors.Is(err, store.ErrNotFound): // deleted already
				case err != nil:
					fail <- err
					return
				case e.Kind == store.EventDeleted:
					returned[i].Store(math.MaxInt64)
				default:
					for v := returned[i].Load(); v < e.Post.Version && !returned[i].CompareAndSwap(v, e.Post.Version); v = returned[i].Load() {
					}
				}
			}
		})
	}
	for r := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			for !stop.Load() {
				i := rng.IntN(posts)
				atLeast := returned[i].Load()
				ctx, seen := store.WithSeen(ctx)
				p, err := s.GetPost(ctx, ids[i])
				read := readOf{id: ids[i], version: p.Version}
				switch {
				case errors.Is(err, store.ErrNotFound):
					read.version = 0
				case err != nil:
					fail <- err
					return
				case p.Version < atLeast:
					fail <- fmt.Errorf("post %d read at version %d after a write of version %d (or its deletion) had returned", i, p.Version, atLeast)
					return
				}
				if atLeast == math.MaxInt64 && read.version != 0 {
					fail <- fmt.Errorf("post %d read at version %d after its deletion had returned", i, read.version)
					return
				}
				var ok bool
				if read.position, ok = seen.Position(); !ok {
					fail <- fmt.Errorf("a read of post %d noted no position", i)
					return
				}
				mu.Lock()
				reads = append(reads, read)
				mu.Unlock()
			}
		})
	}
	time.Sleep(2 * time.Second)
	stop.Store(true)
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}

	// The model: each post's version at each position of the log.
	type change struct{ position, version int64 }
	history := map[string][]change{}
	for after := int64(0); ; {
		events, upto, err := s.ReadEvents(ctx, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			version := e.Post.Version
			if e.Kind == store.EventDeleted {
				version = 0
			}
			history[e.Post.ID] = append(history[e.Post.ID], change{e.Position, version})
		}
		if len(events) == 0 {
			break
		}
		after = upto
	}
	found := 0
	for _, r := range reads {
		want := int64(0)
		for _, c := range history[r.id] {
			if c.position > r.position {
				break
			}
			want = c.version
		}
		if r.version != want {
			t.Fatalf("post %s read at version %d with the log at %d, where its version is %d", r.id, r.version, r.position, want)
		}
		if r.version != 0 {
			found++
		}
	}
	entries, bytes := sqlite.CacheStats(s)
	t.Logf("%d reads (%d found) checked against the log of %d posts; the cache holds %d posts, %d bytes", len(reads), found, len(history), entries, bytes)
	if len(reads) < 1000 {
		t.Fatalf("only %d reads in 2 s", len(reads))
	}
	if entries == 0 || bytes > 12*(sqlite.CacheEntryOverhead+80) {
		t.Fatalf("the cache holds %d posts, %d bytes: none, or past its bound", entries, bytes)
	}
}
