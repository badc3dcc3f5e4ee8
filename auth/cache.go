package auth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// tokenCache remembers verified tokens, so that a client reusing its token pays for one
// signature check, not one per request. It is keyed by the token's SHA-256 (the token itself is
// never kept), holds at most max entries, and an entry ends at the token's expiry or as soon as
// the key sets change, whichever comes first.
type tokenCache struct {
	mu      sync.RWMutex
	max     int
	entries map[[sha256.Size]byte]cachedToken
}

type cachedToken struct {
	id      Identity
	expires time.Time
	version uint64 // the key ring's version when the token was verified
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, entries: make(map[[sha256.Size]byte]cachedToken)}
}

// get returns the caller of a token verified earlier under the same key sets, unless expired.
func (c *tokenCache) get(digest [sha256.Size]byte, version uint64, at time.Time) (Identity, bool) {
	c.mu.RLock()
	e, ok := c.entries[digest]
	c.mu.RUnlock()
	if !ok || e.version != version || !at.Before(e.expires) {
		return Identity{}, false
	}
	return e.id, true
}

// put remembers a verified token until it expires; at is the time now. When full it drops the
// stale entries and then, if still over nine tenths full, arbitrary ones, so a full cache is swept
// once per tenth of its size rather than on every put. The cache only saves work, so any entry
// may go.
func (c *tokenCache) put(digest [sha256.Size]byte, id Identity, version uint64, expires, at time.Time) {
	if !at.Before(expires) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[digest]; !ok && len(c.entries) >= c.max {
		for k, e := range c.entries {
			if !at.Before(e.expires) || e.version != version {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < c.max*9/10 {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[digest] = cachedToken{id: id, expires: expires, version: version}
}
