package sqlite

import (
	"fmt"
	"runtime"
	"strings"
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
