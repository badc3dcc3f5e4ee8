package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// TestThePostCachesBoundIsWhatItHolds keeps 50,000 posts of the sizes of the bench's seeding in a
// cache and compares what the heap grew by with the cache's estimate (cachedSize), so that
// post_cache_size bounds memory, not a count. Not parallel: the heap is measured.
func TestThePostCachesBoundIsWhatItHolds(t *testing.T) {
	const n = 50_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	pc := newPostCache(1 << 40)
	at := time.Now()
	for i := range n {
		body := strings.Repeat("lorem ipsum ", 1+i%20)
		p := store.Post{ID: store.NewID(at), UserID: fmt.Sprintf("user-%02d", i%20), Title: fmt.Sprintf("post %d of the seeding", i),
			Body: &body, CreatedAt: at, UpdatedAt: at, Version: 1}
		k, _ := keyOf(p.ID)
		pc.put(cached(k, p))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	entries, estimate := pc.stats()
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d entries: the heap grew by %d bytes, the estimate is %d (%.2f), %d bytes an entry", entries, grew, estimate,
		float64(grew)/float64(estimate), grew/int64(entries))
	if entries != n {
		t.Fatalf("%d entries, want %d", entries, n)
	}
	if ratio := float64(grew) / float64(estimate); ratio < 0.75 || ratio > 1.25 {
		t.Errorf("the heap grew by %d bytes for an estimate of %d: off by more than a quarter; entryOverhead is %d", grew, estimate, entryOverhead)
	}
	runtime.KeepAlive(pc)
}

// TestThePostCacheEvictsWhatWasNotReadAgain fills a cache past its bound, reading one post between
// every put: that post stays (its used bit), the cache stays within its bound, and setLimit
// shrinks it.
func TestThePostCacheEvictsWhatWasNotReadAgain(t *testing.T) {
	var st state
	st.known.Store(true)
	at := time.Now()
	post := func(i int) store.Post {
		return store.Post{ID: fmt.Sprintf("%024x", i), UserID: "u", Title: "t", CreatedAt: at, UpdatedAt: at, Version: 1}
	}
	k, _ := keyOf(post(0).ID)
	size := cachedSize(cached(k, post(0)).text)
	pc := newPostCache(10 * size)
	pc.fill(post(0), &st, 0)
	for i := 1; i < 100; i++ {
		if _, _, ok := pc.get(post(0).ID, &st); !ok {
			t.Fatalf("after %d puts, the post read between each is gone", i)
		}
		pc.fill(post(i), &st, 0)
		if entries, bytes := pc.stats(); bytes > 10*size || entries > 10 {
			t.Fatalf("after %d puts: %d entries, %d bytes; the bound is %d", i, entries, bytes, 10*size)
		}
	}
	pc.setLimit(3 * size)
	if entries, bytes := pc.stats(); entries != 3 || bytes != 3*size {
		t.Fatalf("after setLimit: %d entries, %d bytes; want 3, %d", entries, bytes, 3*size)
	}
	if _, _, ok := pc.get(post(0).ID, &st); !ok {
		t.Error("the post read again and again is gone")
	}
	pc.apply([]store.Event{{Kind: store.EventDeleted, Post: store.Post{ID: post(0).ID}}})
	if _, _, ok := pc.get(post(0).ID, &st); ok {
		t.Error("a deleted post is still held")
	}
}

// TestAFullCacheTakesANewWorkingSet: in a cache full of posts read before, posts read again and
// again from then on take their place, each after its first read.
func TestAFullCacheTakesANewWorkingSet(t *testing.T) {
	var st state
	st.known.Store(true)
	post := func(i int) store.Post {
		return store.Post{ID: fmt.Sprintf("%024x", i), UserID: "u", Title: "t", Version: 1}
	}
	k, _ := keyOf(post(0).ID)
	pc := newPostCache(10 * cachedSize(cached(k, post(0)).text))
	read := func(i int) bool {
		if _, _, ok := pc.get(post(i).ID, &st); ok {
			return true
		}
		pc.fill(post(i), &st, st.seq.Load())
		return false
	}
	for i := range 10 {
		read(i)
		read(i)
	}
	hits := 0
	for range 20 {
		for i := 100; i < 105; i++ {
			if read(i) {
				hits++
			}
		}
	}
	if hits < 95 {
		t.Errorf("%d hits of 100 reads of 5 posts in a cache of 10, want 95 (all but the first of each)", hits)
	}
}

// TestThePostCachesMemoryShrinksWithIt: a cache that held many small posts, then a few large
// ones, gives back the room of its entries and index.
func TestThePostCachesMemoryShrinksWithIt(t *testing.T) {
	var st state
	st.known.Store(true)
	pc := newPostCache(1 << 20)
	small := func(i int) store.Post { return store.Post{ID: fmt.Sprintf("%024x", i), Title: "t", Version: 1} }
	for i := range 6000 {
		pc.fill(small(i), &st, st.seq.Load())
	}
	large := strings.Repeat("x", 100<<10)
	for i := range 9 {
		pc.fill(store.Post{ID: fmt.Sprintf("%024x", 10_000+i), Title: "t", Body: &large, Version: 1}, &st, st.seq.Load())
	}
	if entries, bytes := pc.stats(); bytes > 1<<20 || cap(pc.entries) > 4*max(entries, minShrink) {
		t.Errorf("%d entries in a room of %d, %d bytes", entries, cap(pc.entries), bytes)
	}
	huge := strings.Repeat("x", 2<<20)
	pc.fill(store.Post{ID: fmt.Sprintf("%024x", 20_000), Title: "t", Body: &huge, Version: 1}, &st, st.seq.Load())
	if _, _, ok := pc.get(fmt.Sprintf("%024x", 20_000), &st); ok {
		t.Error("a post larger than the cache's bound is kept")
	}
	pc.drop()
	pc.fill(small(1), &st, st.seq.Load())
	if entries, bytes := pc.stats(); entries != 0 || bytes != 0 {
		t.Errorf("a cache dropped (its store closed) keeps %d entries, %d bytes", entries, bytes)
	}
}

// TestACachedPostIsThePostKept: every field comes back as it was kept, a body absent or empty
// alike, and an id that is not one of the store's is not kept.
func TestACachedPostIsThePostKept(t *testing.T) {
	var st state
	st.known.Store(true)
	at := time.UnixMilli(1_700_000_000_123).UTC()
	empty, text := "", "a body, with ünïcode"
	pc := newPostCache(1 << 20)
	for _, p := range []store.Post{
		{ID: fmt.Sprintf("%024x", 1), UserID: "alice", Title: "no body", CreatedAt: at, UpdatedAt: at.Add(time.Second), Version: 3},
		{ID: fmt.Sprintf("%024x", 2), UserID: "bob", Title: "an empty body", Body: &empty, CreatedAt: at, UpdatedAt: at, Version: 1},
		{ID: fmt.Sprintf("%024x", 3), UserID: "", Title: "", Body: &text, CreatedAt: at, UpdatedAt: at, Version: 7},
	} {
		pc.fill(p, &st, st.seq.Load())
		got, _, ok := pc.get(p.ID, &st)
		if !ok || got.ID != p.ID || got.UserID != p.UserID || got.Title != p.Title || !got.CreatedAt.Equal(p.CreatedAt) ||
			!got.UpdatedAt.Equal(p.UpdatedAt) || got.Version != p.Version || (got.Body == nil) != (p.Body == nil) ||
			got.Body != nil && *got.Body != *p.Body {
			t.Errorf("kept %+v, got %+v (%v)", p, got, ok)
		}
	}
	pc.fill(store.Post{ID: "not-an-id", Title: "t"}, &st, st.seq.Load())
	if _, _, ok := pc.get("not-an-id", &st); ok {
		t.Error("a post of an id that is not the store's was kept")
	}
}

// TestAFillThatACommitOvertookIsDropped: a post read by a statement that began before a commit
// began (state.seq moved) is not kept, nor one read while a commit was under way, nor while the
// state is not known; and nothing is read from the cache while a commit is under way.
func TestAFillThatACommitOvertookIsDropped(t *testing.T) {
	var st state
	st.known.Store(true)
	p := store.Post{ID: fmt.Sprintf("%024x", 1), UserID: "u", Title: "t", Version: 1}
	pc := newPostCache(1 << 20)
	seq := st.seq.Load()
	st.seq.Add(2) // a commit came and went
	pc.fill(p, &st, seq)
	st.seq.Add(1) // a commit under way
	pc.fill(p, &st, st.seq.Load())
	st.seq.Add(1)
	st.known.Store(false)
	pc.fill(p, &st, st.seq.Load())
	if entries, _ := pc.stats(); entries != 0 {
		t.Fatalf("%d entries kept, want none", entries)
	}
	st.known.Store(true)
	pc.fill(p, &st, st.seq.Load())
	st.seq.Add(1)
	if _, _, ok := pc.get(p.ID, &st); ok {
		t.Error("a post was read from the cache while a commit was under way")
	}
	st.seq.Add(1)
	if _, _, ok := pc.get(p.ID, &st); !ok {
		t.Error("the post filled with no commit since is not read")
	}
}

// TestARolledBackWritesEventNeverReachesTheCache: a write that logs its event and then fails is
// rolled back with it; a copy's commit that comes next (InsertPosts, beside the committer's)
// applies nothing of it, and the cache serves what the file holds. (Found by a review: the
// copy's commit applied the committer's leftover events.)
func TestARolledBackWritesEventNeverReachesTheCache(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	at := time.Now()
	id := store.NewID(at)
	if _, err := s.InsertPost(ctx, store.Post{ID: id, UserID: "u", Title: "v1", CreatedAt: at, UpdatedAt: at}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("a statement after logEvent failed")
	err = s.inTransaction(ctx, func(ctx context.Context, tx *sql.Tx, c *conns) error {
		rows, err := tx.StmtContext(ctx, c.stmt.updatePost).QueryContext(ctx, "rolled back", false, nil, millis(time.Now()), id, "u", 0)
		updated, err := collect(rows, err, nil, scanPost)
		if err != nil {
			return err
		}
		if _, err := logEvent(ctx, tx, c, store.EventUpdated, updated[0]); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("the failing write: %v", err)
	}
	// A copy's batches, beside the committer's writes (the race detector watches c.changed).
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 50 {
			title := fmt.Sprint(i)
			if _, err := s.UpdatePost(ctx, store.NewID(at), "u", store.AnyVersion, store.Update{Title: &title, UpdatedAt: time.Now()}); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("an update of a post that is not there: %v", err)
			}
		}
	})
	for range 20 {
		if _, err := s.InsertPosts(ctx, []store.Post{{ID: store.NewID(at), UserID: "w", Title: "copied", CreatedAt: at, UpdatedAt: at}}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	p, err := s.GetPost(ctx, id)
	if err != nil || p.Title != "v1" || p.Version != 1 {
		t.Errorf("GetPost: %q v%d (%v), the file holds \"v1\" v1", p.Title, p.Version, err)
	}
}
