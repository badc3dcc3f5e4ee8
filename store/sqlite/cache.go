package sqlite

import (
	"encoding/hex"
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
// eviction's hand clears the bits it passes and takes the first entry it finds unused. Its
// entries hold one pointer each, to one string of the post's text, and its map none (an id's
// 12 bytes to an index of entries), so that the garbage collector's marking, which visits every
// pointer of the heap at each cycle, pays one object a post: with a map of strings to structs
// of strings, the posts of a store of 200,000 made it a sixth of a read's time.
// Copies between stores (copy.go, ferretdb.go) insert posts the cache cannot hold yet, new ids,
// and change none it holds.
type postCache struct {
	mu      sync.RWMutex
	index   map[cacheKey]int32 // an id's entry in entries
	entries []cachedPost       // in the order the hand sweeps
	hand    int
	bytes   int64
	limit   int64
	closed  bool // by drop: its store closed
}

// cacheKey is a post's id as its bytes.
type cacheKey [idBytes]byte

// idBytes are the bytes of an id, two hex digits each (store.ValidID).
const idBytes = 12

// cachedPost is a post in the cache: text is its ID, UserID, Title and Body one after the
// other, ending at idEnd, userEnd, titleEnd and the end of text.
type cachedPost struct {
	text                      string
	userEnd, titleEnd         int32
	idEnd                     uint8
	hasBody                   bool
	used                      uint32 // atomic: read since the hand last passed
	created, updated, version int64  // Unix milliseconds, and the version
	key                       cacheKey
}

// DefaultCacheSize is the default of Options.CacheSize: the posts of a store of 200,000 posts
// of a few hundred bytes each.
const DefaultCacheSize = 64 << 20

// MaxCacheSize bounds Options.CacheSize: its entries, of entryOverhead bytes at least, fit the
// int32 of an index.
const MaxCacheSize = 64 << 30

// entryOverhead is what an entry holds on the heap besides its text's bytes: its cachedPost in
// entries, its map entry, the rounding up of its text to a size class (measured by
// TestThePostCachesBoundIsWhatItHolds).
const entryOverhead = 112

// cachedSize is the estimate of the heap that an entry of text holds.
func cachedSize(text string) int64 { return int64(entryOverhead + len(text)) }

func newPostCache(limit int64) *postCache {
	return &postCache{index: make(map[cacheKey]int32), limit: limit}
}

// keyOf is the key of the id, and false if it is not one of the store's ids.
func keyOf(id string) (k cacheKey, ok bool) {
	if !store.ValidID(id) {
		return k, false
	}
	_, err := hex.Decode(k[:], []byte(id))
	return k, err == nil
}

// cached is the entry of p.
func cached(k cacheKey, p store.Post) cachedPost {
	var b strings.Builder
	body := ""
	if p.Body != nil {
		body = *p.Body
	}
	b.Grow(len(p.ID) + len(p.UserID) + len(p.Title) + len(body))
	b.WriteString(p.ID)
	b.WriteString(p.UserID)
	b.WriteString(p.Title)
	b.WriteString(body)
	return cachedPost{text: b.String(), key: k, hasBody: p.Body != nil,
		idEnd: uint8(len(p.ID)), userEnd: int32(len(p.ID) + len(p.UserID)), titleEnd: int32(len(p.ID) + len(p.UserID) + len(p.Title)),
		created: millis(p.CreatedAt), updated: millis(p.UpdatedAt), version: p.Version}
}

// post is the post of e, whose strings are parts of e.text.
func (e *cachedPost) post() store.Post {
	p := store.Post{ID: e.text[:e.idEnd], UserID: e.text[e.idEnd:e.userEnd], Title: e.text[e.userEnd:e.titleEnd],
		CreatedAt: fromMillis(e.created), UpdatedAt: fromMillis(e.updated), Version: e.version}
	if e.hasBody {
		body := e.text[e.titleEnd:]
		p.Body = &body
	}
	return p
}

// get returns the post with the id if the cache holds it and no commit is under way or failed
// (st), with the log's last position, which the post reflects.
func (pc *postCache) get(id string, st *state) (p store.Post, last int64, ok bool) {
	k, valid := keyOf(id)
	seq := st.seq.Load()
	if !valid || seq%2 != 0 || !st.known.Load() {
		metrics.PostCache(metrics.CacheMiss)
		return store.Post{}, 0, false
	}
	last = st.last.Load()
	pc.mu.RLock()
	i, held := pc.index[k]
	if held {
		e := &pc.entries[i]
		p = e.post()
		if atomic.LoadUint32(&e.used) == 0 {
			atomic.StoreUint32(&e.used, 1)
		}
	}
	pc.mu.RUnlock()
	if !held || st.seq.Load() != seq {
		metrics.PostCache(metrics.CacheMiss)
		return store.Post{}, 0, false
	}
	metrics.PostCache(metrics.CacheHit)
	return p, last, true
}

// fill keeps p, read by a statement that began when st.seq was seq, unless a commit began since
// (or the state was not known then): that commit may have changed p, and applies its own change.
func (pc *postCache) fill(p store.Post, st *state, seq uint64) {
	k, ok := keyOf(p.ID)
	if !ok {
		return
	}
	e := cached(k, p)
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if seq%2 != 0 || st.seq.Load() != seq || !st.known.Load() {
		return
	}
	pc.put(e)
}

// apply brings the cache to the file as a committed transaction left it: changes are the events
// it logged, in order. Called by the committer, with state.seq odd.
func (pc *postCache) apply(changes []store.Event) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, e := range changes {
		k, ok := keyOf(e.Post.ID)
		switch {
		case !ok:
		case e.Kind == store.EventDeleted:
			pc.remove(k)
		default:
			pc.put(cached(k, e.Post))
		}
	}
}

// forget drops the posts of changes, those of a transaction whose commit failed (it may have
// committed or not).
func (pc *postCache) forget(changes []store.Event) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, e := range changes {
		if k, ok := keyOf(e.Post.ID); ok {
			pc.remove(k)
		}
	}
}

// setLimit bounds the cache to limit bytes from now on.
func (pc *postCache) setLimit(limit int64) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.limit = limit
	pc.evict(0)
}

// put keeps e, in place of the version held: an entry new to the cache is put once the hand
// has made room for it, just behind the hand, which reaches it last, so that it has a whole turn
// of the hand to be read again. An entry larger than the limit is not kept. pc.mu is held.
func (pc *postCache) put(e cachedPost) {
	size := cachedSize(e.text)
	switch i, held := pc.index[e.key]; {
	case pc.closed:
	case size > pc.limit:
		pc.remove(e.key)
	case held:
		old := &pc.entries[i]
		pc.add(size - cachedSize(old.text))
		e.used = old.used
		*old = e
		pc.evict(0)
	default:
		pc.evict(size)
		i := len(pc.entries)
		pc.index[e.key] = int32(i)
		pc.entries = append(pc.entries, e)
		pc.add(size)
		pc.hand = min(pc.hand, i) // past the end: at it
		pc.swap(pc.hand, i)
		pc.hand++
	}
}

// swap exchanges the entries at i and j. pc.mu is held.
func (pc *postCache) swap(i, j int) {
	pc.entries[i], pc.entries[j] = pc.entries[j], pc.entries[i]
	pc.index[pc.entries[i].key], pc.index[pc.entries[j].key] = int32(i), int32(j)
}

// evict drops entries, each the first unused one the hand finds, until room more bytes are
// within the limit. pc.mu is held.
func (pc *postCache) evict(room int64) {
	for pc.bytes+room > pc.limit && len(pc.entries) > 0 {
		if pc.hand >= len(pc.entries) {
			pc.hand = 0
		}
		if e := &pc.entries[pc.hand]; e.used != 0 {
			e.used = 0
			pc.hand++
			continue
		}
		pc.remove(pc.entries[pc.hand].key)
		metrics.PostCache(metrics.CacheEviction)
	}
}

// remove drops the post of k, if held: the last entry takes its place. Once a quarter of entries'
// room is used, entries and index are made anew for what they hold, as neither gives back the
// memory of the entries removed, so that a cache that held many small posts, then fewer large
// ones, holds no more than its estimate says. pc.mu is held.
func (pc *postCache) remove(k cacheKey) {
	i, ok := pc.index[k]
	if !ok {
		return
	}
	pc.add(-cachedSize(pc.entries[i].text))
	last := len(pc.entries) - 1
	pc.entries[i] = pc.entries[last]
	pc.index[pc.entries[i].key] = i
	pc.entries[last] = cachedPost{}
	pc.entries = pc.entries[:last]
	delete(pc.index, k)
	if cap(pc.entries) > minShrink && len(pc.entries) < cap(pc.entries)/4 {
		pc.entries = append(make([]cachedPost, 0, 2*len(pc.entries)), pc.entries...)
		pc.index = make(map[cacheKey]int32, len(pc.entries))
		for i, e := range pc.entries {
			pc.index[e.key] = int32(i)
		}
	}
}

// minShrink is the room of entries under which remove keeps it as it is.
const minShrink = 1024

// add counts n more bytes held, or fewer. pc.mu is held.
func (pc *postCache) add(n int64) {
	pc.bytes += n
	metrics.PostCacheBytes(n)
}

// drop empties the cache, of a store that closes, and keeps it empty.
func (pc *postCache) drop() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	metrics.PostCacheBytes(-pc.bytes)
	pc.index, pc.entries, pc.hand, pc.bytes, pc.closed = make(map[cacheKey]int32), nil, 0, 0, true
}

// stats are the cache's entries and estimated bytes.
func (pc *postCache) stats() (entries int, bytes int64) {
	pc.mu.RLock()
	defer pc.mu.RUnlock()
	return len(pc.entries), pc.bytes
}
