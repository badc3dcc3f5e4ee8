package auth

import (
	"testing"
	"time"
)

// The setters below change package-wide timings for one test and restore them when it ends. A
// test that uses them must not run in parallel with others, and must call them before NewJWKS:
// a JWKS reads the timings in its own goroutine, which its Close (registered later, so run
// earlier by t.Cleanup) ends before the old values come back.

// SetFetchTimeout bounds one fetch of a key set to d for the rest of the test.
func SetFetchTimeout(t testing.TB, d time.Duration) {
	old := fetchTimeout
	fetchTimeout = d
	t.Cleanup(func() { fetchTimeout = old })
}

// SetRetry sets the back-off between failed fetches for the rest of the test.
func SetRetry(t testing.TB, lo, hi time.Duration) {
	oldMin, oldMax := retryMin, retryMax
	retryMin, retryMax = lo, hi
	t.Cleanup(func() { retryMin, retryMax = oldMin, oldMax })
}

// SetUnknownKIDEvery sets how often a token with an unknown kid may trigger a fetch, for the
// JWKSs created later in the test.
func SetUnknownKIDEvery(t testing.TB, d time.Duration) {
	old := unknownKIDEvery
	unknownKIDEvery = d
	t.Cleanup(func() { unknownKIDEvery = old })
}

// SetNow replaces the clock that tokens are checked against for the rest of the test.
func SetNow(t testing.TB, clock func() time.Time) {
	old := now
	now = clock
	t.Cleanup(func() { now = old })
}

// Version counts the changes of the key set.
func (s *JWKS) Version() uint64 { return s.version.Load() }

// CacheLen is the number of verified tokens remembered.
func (t *Tokens) CacheLen() int {
	t.cache.mu.RLock()
	defer t.cache.mu.RUnlock()
	return len(t.cache.entries)
}
