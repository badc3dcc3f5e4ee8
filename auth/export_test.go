package auth

import (
	"net/http"
	"time"

	"go.uber.org/zap"
)

// JWKSTimings are the intervals of a test's JWKS, which the defaults would have it wait out, and
// the clock of its allowance of unknown-kid fetches. A zero field keeps the default.
type JWKSTimings struct {
	// MinRefresh is the shortest refresh interval accepted (default 1s).
	MinRefresh time.Duration
	// FetchTimeout bounds one fetch (default 10s).
	FetchTimeout time.Duration
	// RetryMin and RetryMax bound the back-off between failed fetches (default 1s to 1min).
	RetryMin, RetryMax time.Duration
	// UnknownKIDEvery is how often a token with an unknown kid may trigger a fetch (default 1min).
	UnknownKIDEvery time.Duration
	// Now is the clock that allowance is counted by (default time.Now).
	Now func() time.Time
}

// NewJWKSWithTimings is NewJWKS with the timings of a test.
func NewJWKSWithTimings(url string, refresh time.Duration, client *http.Client, logger *zap.Logger, t JWKSTimings) *JWKS {
	timings := defaultJWKSTimings
	set := func(field *time.Duration, d time.Duration) {
		if d != 0 {
			*field = d
		}
	}
	set(&timings.minRefresh, t.MinRefresh)
	set(&timings.fetchTimeout, t.FetchTimeout)
	set(&timings.retryMin, t.RetryMin)
	set(&timings.retryMax, t.RetryMax)
	set(&timings.unknownKIDEvery, t.UnknownKIDEvery)
	if t.Now != nil {
		timings.now = t.Now
	}
	return newJWKS(url, refresh, client, logger, timings)
}

// NewTokensWithClock is NewTokens checking tokens, and their expiry in the cache, against now.
func NewTokensWithClock(cfg TokenConfig, now func() time.Time) (*Tokens, error) {
	return newTokens(cfg, now)
}

// Version counts the changes of the key set.
func (s *JWKS) Version() uint64 { return s.version.Load() }

// CacheLen is the number of verified tokens remembered.
func (t *Tokens) CacheLen() int {
	t.cache.mu.RLock()
	defer t.cache.mu.RUnlock()
	return len(t.cache.entries)
}

// InitHeaders is initHeaders, for the tests and the fuzz target of the payload's syntax.
var InitHeaders = initHeaders

// Redacted is redacted, for the test of what a fetch's span shows.
var Redacted = redacted
