package sqlite

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/store"
)

// postCache keeps posts of the file in memory for GetPost, so that a read of a post read before
// runs no statement: at 200,000 posts a statement of GetPost was a third of a GET's time in the
// module (the B-tree's pages, the driver, the rows). It is never stale, as only this process
// writes the file (its lock) and every write of a post logs its event through logEvent in the
// committer's transaction, which notes it (conns.changed): state.commit applies those changes
// to the cache under the cache's lock once the transaction has committed, while state.seq is
// odd, and forgets the posts they name if the commit failed. A read uses the cache only while
// no commit is under way and the state is known (get checks state.seq before and after), and
// a post a statement read fills the cache only if no commit began since before that statement
// (fill checks state.seq under the cache's lock, which apply holds): so the cache holds, at
// every even state.seq, the version of each post that the file holds, and a read from it
// reflects the log's position state.last exactly, as a statement's read does.
//
// It is bounded by limit bytes, an estimate of what its entries hold on the heap (cachedSize),
// and evicts with CLOCK: a hit only sets its entry's used bit, under the read lock, and the
// eviction's hand clears the bits it passes and takes the first entry it finds unused.
// Copies between stores (copy.go, ferretdb.go) insert posts the cache cannot hold yet, new ids,
// and change none it holds.
type postCache struct {
	mu    sync.RWMutex
	posts map[string]*cachedPost
	ring  []*cachedPost // every entry, in the order the hand sweeps
	hand  int
	bytes int64
	limit int64
}

// cachedPost is a post in the cache.
type cachedPost struct {
	post store.Post
	size int64
	slot int // its index in ring
	used atomic.Bool
}

// DefaultCacheSize is the default of Options.CacheSize: the posts of a store of 200,000 posts
// of a few hundred bytes each.
const DefaultCacheSize = 128 << 20

// entryOverhead is what an entry holds on the heap besides its strings' bytes: the cachedPost
// (160 bytes of its size class), the headers of its strings and of the body's pointer, its map
// entry and ring slot (measured by TestThePostCachesBoundIsWhatItHolds).
const entryOverhead = 256

// cachedSize is the estimate of the heap that an entry for p holds.
func cachedSize(p store.Post) int64 {
	n := entryOverhead + len(p.ID) + len(p.UserID) + len(p.Title)
	if p.Body != nil {
		n += len(*p.Body)
	}
	return int64(n)
}

func newPostCache(limit int64) *postCache {
	return &postCache{posts: make(map[string]*cachedPost), limit: limit}
}

// get returns the post with the id if the cache holds it and no commit is under way or failed
// (st), with the log's last position, which the post reflects.
func (pc *postCache) get(id string, st *state) (p store.Post, last int64, ok bool) {
	seq := st.seq.Load()
	if seq%2 != 0 || !st.known.Load() {
		return store.Post{}, 0, false
	}
	last = st.last.Load()
	pc.mu.RLock()
	e := pc.posts[id]
	if e != nil {
		p = e.post
		if !e.used.Load() {
			e.used.Store(true)
		}
	}
	pc.mu.RUnlock()
	if e == nil || st.seq.Load() != seq {
		metrics.PostCache(metrics.CacheMiss)
		return store.Post{}, 0, false
	}
	metrics.PostCache(metrics.CacheHit)
	return p, last, true
}

// fill keeps p, read by a statement that began when st.seq was seq, unless a commit began since
// (or the state was not known then): that commit may have changed p, and applies its own change.
func (pc *postCache) fill(p store.Post, st *state, seq uint64) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if seq%2 != 0 || st.seq.Load() != seq || !st.known.Load() {
		return
	}
	pc.put(p)
}

// apply brings the cache to the file as a committed transaction left it: changes are the events
// it logged, in order. Called by the committer, with state.seq odd.
func (pc *postCache) apply(changes []store.Event) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, e := range changes {
		switch e.Kind {
		case store.EventDeleted:
			pc.remove(e.Post.ID)
		case store.EventCreated:
			pc.put(owned(e.Post))
		default:
			pc.put(e.Post)
		}
	}
}

// forget drops the posts of changes, those of a transaction whose commit failed (it may have
// committed or not).
func (pc *postCache) forget(changes []store.Event) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, e := range changes {
		pc.remove(e.Post.ID)
	}
}

// owned is p with strings of its own: a created post's come from its request, and a substring
// of the request would keep all of it alive, uncounted. An updated post's were read from its
// RETURNING row, its own already.
func owned(p store.Post) store.Post {
	p.ID, p.UserID, p.Title = strings.Clone(p.ID), strings.Clone(p.UserID), strings.Clone(p.Title)
	if p.Body != nil {
		body := strings.Clone(*p.Body)
		p.Body = &body
	}
	return p
}

// setLimit bounds the cache to limit bytes from now on.
func (pc *postCache) setLimit(limit int64) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.limit = limit
	pc.evict()
}

// put keeps p, in place of the version held, then evicts down to the limit. pc.mu is held.
func (pc *postCache) put(p store.Post) {
	size := cachedSize(p)
	if e := pc.posts[p.ID]; e != nil {
		pc.add(size - e.size)
		e.post, e.size = p, size
	} else {
		e := &cachedPost{post: p, size: size, slot: len(pc.ring)}
		pc.posts[p.ID] = e
		pc.ring = append(pc.ring, e)
		pc.add(size)
	}
	pc.evict()
}

// evict drops entries, each the first unused one the hand finds, until the cache is within its
// limit. pc.mu is held.
func (pc *postCache) evict() {
	for pc.bytes > pc.limit && len(pc.ring) > 0 {
		if pc.hand >= len(pc.ring) {
			pc.hand = 0
		}
		if e := pc.ring[pc.hand]; e.used.Load() {
			e.used.Store(false)
			pc.hand++
			continue
		}
		pc.remove(pc.ring[pc.hand].post.ID)
		metrics.PostCache(metrics.CacheEviction)
	}
}

// remove drops the post with the id, if held: the last entry of the ring takes its slot.
// pc.mu is held.
func (pc *postCache) remove(id string) {
	e := pc.posts[id]
	if e == nil {
		return
	}
	last := pc.ring[len(pc.ring)-1]
	pc.ring[e.slot], last.slot = last, e.slot
	pc.ring[len(pc.ring)-1] = nil
	pc.ring = pc.ring[:len(pc.ring)-1]
	delete(pc.posts, id)
	pc.add(-e.size)
}

// add counts n more bytes held, or fewer. pc.mu is held.
func (pc *postCache) add(n int64) {
	pc.bytes += n
	metrics.PostCacheBytes(n)
}

// drop empties the cache, of a store that closes.
func (pc *postCache) drop() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	metrics.PostCacheBytes(-pc.bytes)
	pc.posts, pc.ring, pc.hand, pc.bytes = make(map[string]*cachedPost), nil, 0, 0
}

// stats are the cache's entries and estimated bytes.
func (pc *postCache) stats() (entries int, bytes int64) {
	pc.mu.RLock()
	defer pc.mu.RUnlock()
	return len(pc.posts), pc.bytes
}
