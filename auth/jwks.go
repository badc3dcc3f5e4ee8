package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/spans"
)

// ErrKeysUnavailable means a bearer token arrived before the identity provider's keys could be
// fetched, so it can be neither accepted nor refused yet; the client should try again shortly.
var ErrKeysUnavailable = errors.New("the identity provider's keys have not been fetched yet, try again shortly")

// jwksTimings are the intervals of a JWKS, and the clock it counts its allowance of unknown-kid
// fetches by. Each JWKS has its own, so that a test can shorten them for one key set without
// waiting the real ones out or touching another test's.
type jwksTimings struct {
	minRefresh         time.Duration    // the shortest refresh interval NewJWKS accepts
	fetchTimeout       time.Duration    // bounds one fetch of a key set
	retryMin, retryMax time.Duration    // bound the back-off between failed fetches
	unknownKIDEvery    time.Duration    // how often a token with an unknown kid may trigger a fetch
	now                func() time.Time // the clock of that allowance
}

// defaultJWKSTimings are the timings of every JWKS that NewJWKS returns.
var defaultJWKSTimings = jwksTimings{
	minRefresh:      time.Second,
	fetchTimeout:    10 * time.Second,
	retryMin:        time.Second,
	retryMax:        time.Minute,
	unknownKIDEvery: time.Minute,
	now:             time.Now,
}

// maxJWKSSize is the largest key set read; real ones are a few KiB.
const maxJWKSSize = 1 << 20

// JWKS is the JSON Web Key Set (RFC 7517) published at one URL. Once started it is fetched in
// the background, every refresh interval and sooner after a failure, and kept: a failed fetch
// never drops the keys of the last good one. Its methods are safe for concurrent use.
type JWKS struct {
	url     string
	refresh time.Duration
	client  *http.Client
	logger  *zap.Logger
	timings jwksTimings

	keys    *jwkset.MemoryJWKSet
	fetched atomic.Bool   // a fetch has succeeded
	version atomic.Uint64 // counts the changes of the key set, so verified tokens can be rechecked
	last    []byte        // the body of the last good fetch; guarded by busy

	busy         chan struct{} // a one-slot semaphore: one fetch at a time
	unknownKID   *rate.Limiter // fetches asked for by tokens with an unknown kid
	firstAttempt chan struct{} // closed when the first fetch has succeeded or failed

	// provider is the TracerProvider of the last traced request that checked a token against
	// the set (tracedBy), which traces its timed refreshes; nil until one.
	provider atomic.Pointer[tracerProvider]

	life      context.Context // ends with Close; every fetch runs under it
	cancel    context.CancelFunc
	startOnce sync.Once
	mu        sync.Mutex // guards closed and the Adds of fetches
	closed    bool
	fetches   sync.WaitGroup
}

// NewJWKS returns the key set at url, refetched every refresh (at least a second) once started.
// It does no I/O: Start, or the first token that needs the keys, begins the fetches, so that
// loading a config (and `caddy validate`) never reaches the network. A nil client means
// http.DefaultClient. Close ends it.
func NewJWKS(url string, refresh time.Duration, client *http.Client, logger *zap.Logger) *JWKS {
	return newJWKS(url, refresh, client, logger, defaultJWKSTimings)
}

// newJWKS is NewJWKS with other timings than the defaults.
func newJWKS(url string, refresh time.Duration, client *http.Client, logger *zap.Logger, timings jwksTimings) *JWKS {
	if client == nil {
		client = http.DefaultClient
	}
	life, cancel := context.WithCancel(context.Background())
	return &JWKS{
		url:          url,
		refresh:      max(refresh, timings.minRefresh),
		client:       client,
		logger:       logger,
		timings:      timings,
		keys:         jwkset.NewMemoryStorage(),
		busy:         make(chan struct{}, 1),
		unknownKID:   rate.NewLimiter(rate.Every(timings.unknownKIDEvery), 1),
		firstAttempt: make(chan struct{}),
		life:         life,
		cancel:       cancel,
	}
}

// Start begins the background fetches; later calls do nothing.
func (s *JWKS) Start() {
	s.startOnce.Do(func() { s.spawn(s.run) })
}

// spawn runs f in a goroutine that Close waits for, unless the key set is closed.
func (s *JWKS) spawn(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.fetches.Add(1)
	go func() {
		defer s.fetches.Done()
		f()
	}()
	return true
}

// Close stops the fetches and waits for them to end.
func (s *JWKS) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.fetches.Wait()
	metrics.JWKSClosed(s.url)
}

// awaitFirstAttempt starts the fetches and waits, no longer than ctx, for the first to end.
func (s *JWKS) awaitFirstAttempt(ctx context.Context) {
	s.Start()
	select {
	case <-s.firstAttempt:
	case <-ctx.Done():
	}
}

// URL is where the key set is fetched from.
func (s *JWKS) URL() string { return s.url }

// Fetched reports whether a fetch has succeeded.
func (s *JWKS) Fetched() bool { return s.fetched.Load() }

// tracerProvider holds a trace.TracerProvider, whatever its type, for an atomic.Pointer.
type tracerProvider struct{ trace.TracerProvider }

// tracedBy keeps p, the provider of a traced request's span, for the timed refreshes.
func (s *JWKS) tracedBy(p trace.TracerProvider) {
	if kept := s.provider.Load(); kept == nil || kept.TracerProvider != p {
		s.provider.Store(&tracerProvider{p})
	}
}

// refreshSpan starts the span of a timed refresh, jwks.refresh, the root of a trace of its own,
// once a traced request has checked a token against the set (tracedBy); its fetch's span is its
// child.
func (s *JWKS) refreshSpan() (context.Context, spans.Span) {
	p := s.provider.Load()
	if p == nil {
		return s.life, spans.Span{}
	}
	ctx, span := spans.StartRoot(s.life, p.TracerProvider, "jwks.refresh")
	if !span.On() { // shut down by a reload, or its sampler's no: the next traced request says again
		s.provider.CompareAndSwap(p, nil)
	}
	return ctx, span
}

func (s *JWKS) run() {
	retry := s.timings.retryMin
	for first := true; ; first = false {
		wait := s.refresh
		ctx, span := s.refreshSpan()
		err := s.fetch(ctx)
		span.End()
		if first {
			close(s.firstAttempt)
		}
		if err != nil {
			if s.life.Err() != nil {
				return
			}
			wait, retry = min(retry, s.refresh), min(2*retry, s.timings.retryMax)
			s.logger.Warn("could not fetch the JWKS; keeping the keys already fetched",
				zap.String("url", s.url), zap.Bool("have_keys", s.Fetched()), zap.Duration("retry_in", wait), zap.Error(err))
		} else {
			retry = s.timings.retryMin
		}
		select {
		case <-s.life.Done():
			return
		case <-time.After(wait):
		}
	}
}

// fetch reads the key set and, if it is valid, replaces the keys with it. A fetch already
// running makes it wait, but never past ctx. It is the span jwks.fetch of the request ctx
// carries, when that one is traced (refetchForUnknownKID), with the key set's url.full and
// the keys it holds.
func (s *JWKS) fetch(ctx context.Context) error {
	ctx, span := spans.Start(ctx, "jwks.fetch")
	defer span.End()
	if span.On() {
		span.String("url.full", redacted(s.url))
	}
	select {
	case s.busy <- struct{}{}:
		defer func() { <-s.busy }()
	case <-ctx.Done():
		return ctx.Err()
	}
	keys, err := s.load(ctx)
	metrics.JWKSFetched(s.url, keys, err)
	span.Int("auth.jwks.keys", int64(keys))
	if err != nil {
		span.FailCode(jwksFailure)
	}
	return err
}

// jwksFailure is the error.type of a fetch that failed: what failed is in the log line, whose
// URL and error may hold what a span's backend should not (a key in the query).
const jwksFailure = "jwks_fetch_failed"

// redacted is rawURL as OpenTelemetry's url.full should show it: without a password, and with
// the values of its query replaced by REDACTED, which may be credentials.
func redacted(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "REDACTED"
	}
	if u.User != nil {
		u.User = url.UserPassword("REDACTED", "REDACTED")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"REDACTED"}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// load fetches the key set, holding busy, and returns how many keys it holds.
func (s *JWKS) load(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timings.fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("the server answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSSize+1))
	if err != nil {
		return 0, err
	}
	if len(body) > maxJWKSSize {
		return 0, fmt.Errorf("the key set is larger than %d bytes", maxJWKSSize)
	}
	keys, err := s.parse(body)
	if err != nil {
		return 0, err
	}
	if err := s.keys.KeyReplaceAll(ctx, keys); err != nil {
		return 0, err
	}
	if !s.fetched.Load() || !bytes.Equal(body, s.last) {
		s.last = body
		s.version.Add(1)
		s.logger.Info("fetched the JWKS", zap.String("url", s.url), zap.Int("keys", len(keys)))
	}
	s.fetched.Store(true)
	return len(keys), nil
}

// parse reads the public keys of a key set. Keys it cannot use (symmetric keys, unsupported
// curves, malformed members) are skipped with a warning rather than failing the whole set, so one
// odd key at the provider does not lock every caller out; a set of which no key is usable is a
// failed fetch, and the keys already fetched are kept.
func (s *JWKS) parse(body []byte) ([]jwkset.JWK, error) {
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("the key set is not JSON: %w", err)
	}
	if set.Keys == nil {
		return nil, errors.New(`the key set has no "keys" member`)
	}
	keys := make([]jwkset.JWK, 0, len(set.Keys))
	for _, m := range set.Keys {
		if m.KTY == jwkset.KtyOct {
			continue // a shared secret has no place in a public key set; HMAC is never accepted
		}
		jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil {
			s.logger.Warn("skipping a key of the JWKS", zap.String("url", s.url), zap.String("kid", m.KID), zap.Error(err))
			continue
		}
		keys = append(keys, jwk)
	}
	if len(keys) == 0 && len(set.Keys) > 0 {
		return nil, fmt.Errorf("none of the %d keys of the key set is usable", len(set.Keys))
	}
	return keys, nil
}

// refetchForUnknownKID fetches the key set now, for a token whose kid it lacks, at most once per
// unknownKIDEvery, and reports whether a fetch succeeded within ctx. The fetch runs on the key
// set's own lifetime, not the request's: a client that hangs up cannot spend the allowance
// without a fetch taking place.
func (s *JWKS) refetchForUnknownKID(ctx context.Context) bool {
	if s.life.Err() != nil || !s.unknownKID.AllowN(s.timings.now(), 1) {
		return false
	}
	done := make(chan error, 1)
	// The fetch's span, when the request is traced, is a child of the request's (spans.Carry).
	life := spans.Carry(s.life, ctx)
	if !s.spawn(func() { done <- s.fetch(life) }) {
		return false
	}
	select {
	case err := <-done:
		if err != nil && s.life.Err() == nil {
			s.logger.Warn("could not fetch the JWKS for a token with an unknown kid", zap.String("url", s.url), zap.Error(err))
		}
		// Both cases may be ready at once, and select picks either: a request that has given up
		// is not answered, even when the fetch was quicker.
		return err == nil && ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}
