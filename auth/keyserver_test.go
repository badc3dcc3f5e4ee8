// The tests' JWKS endpoint, whose answer a test changes, and helpers that start and wait on a JWKS.

package auth_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/postsedge/caddy-posts/auth"
)

// dropConnection, as a keyServer status, closes the connection instead of answering.
const dropConnection = -1

// keyServer is an identity provider's JWKS endpoint whose answer the test changes at run time.
type keyServer struct {
	*httptest.Server
	hits atomic.Int64 // requests received

	mu     sync.Mutex
	body   []byte
	status int           // 0 serves body; dropConnection; or an HTTP status to answer with
	gate   chan struct{} // when not nil, requests hang until it is closed
}

func newKeyServer(t testing.TB, keys ...testKey) *keyServer {
	t.Helper()
	s := &keyServer{body: jwksJSON(t, keys...)}
	s.Server = httptest.NewServer(s)
	t.Cleanup(s.Close)
	t.Cleanup(s.unhang) // before Close, which waits for hanging requests
	return s
}

func (s *keyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hits.Add(1)
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	s.mu.Lock()
	body, status := s.body, s.status
	s.mu.Unlock()
	switch status {
	case 0:
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(body)
	case dropConnection:
		panic(http.ErrAbortHandler)
	default:
		http.Error(w, http.StatusText(status), status)
	}
}

// serve makes the server publish the keys.
func (s *keyServer) serve(t testing.TB, keys ...testKey) { s.serveBody(jwksJSON(t, keys...)) }

// serveBody makes the server answer with body.
func (s *keyServer) serveBody(body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body, s.status = body, 0
}

// fail makes the server answer with the status, or drop the connection.
func (s *keyServer) fail(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}

// hang makes requests hang until unhang.
func (s *keyServer) hang() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate == nil {
		s.gate = make(chan struct{})
	}
}

func (s *keyServer) unhang() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

// fetchCounter counts the fetches a JWKS starts, failed ones included (a closed server gets no
// hits). Fetches run one at a time, so once n+2 have started, the (n+1)th has ended.
type fetchCounter struct {
	base    http.RoundTripper
	started atomic.Int64
}

func (c *fetchCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.started.Add(1)
	return c.base.RoundTrip(r)
}

// fast are the timings of the tests' key sets: a refresh interval is taken as given, below the
// floor of a second that NewJWKS sets, and failed fetches are retried after 10 to 50ms rather
// than 1s to a minute. The allowance of unknown-kid fetches keeps its minute on the real clock.
// Each key set has its own timings, so the tests that wait on them run in parallel.
var fast = auth.JWKSTimings{MinRefresh: time.Millisecond, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond}

// startJWKS starts keeping the key set of srv with the fast timings, closed when the test ends.
func startJWKS(t testing.TB, srv *keyServer, refresh time.Duration) (*auth.JWKS, *fetchCounter) {
	t.Helper()
	return startJWKSWith(t, srv, refresh, fast)
}

// startJWKSWith is startJWKS with other timings.
func startJWKSWith(t testing.TB, srv *keyServer, refresh time.Duration, timings auth.JWKSTimings) (*auth.JWKS, *fetchCounter) {
	t.Helper()
	fetches := &fetchCounter{base: srv.Client().Transport}
	jwks := auth.NewJWKSWithTimings(srv.URL, refresh, &http.Client{Transport: fetches}, zaptest.NewLogger(t), timings)
	t.Cleanup(jwks.Close)
	jwks.Start()
	return jwks, fetches
}

// waitFor waits, for at most five seconds, until cond holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitFetched(t testing.TB, jwks ...*auth.JWKS) {
	t.Helper()
	for _, s := range jwks {
		waitFor(t, "the JWKS at "+s.URL()+" is fetched", s.Fetched)
	}
}

// waitFailedFetch waits until a fetch that started after the call has ended.
func waitFailedFetch(t testing.TB, fetches *fetchCounter) {
	t.Helper()
	n := fetches.started.Load()
	waitFor(t, "a fetch ends", func() bool { return fetches.started.Load() >= n+2 })
}

// wantUnavailable checks that err says the keys are not there yet, and is no refusal.
func wantUnavailable(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, auth.ErrKeysUnavailable) {
		t.Fatalf("error = %v, want ErrKeysUnavailable", err)
	}
	var authErr *auth.Error
	if errors.As(err, &authErr) {
		t.Errorf("error %v is an *auth.Error (code %q): the token would be refused rather than retried", err, authErr.Code)
	}
}
