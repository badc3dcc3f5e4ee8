package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap/zaptest"

	"github.com/postsedge/caddy-posts/auth"
)

// testKey is a key the tests sign tokens with, and what a JWKS publishes for it.
type testKey struct {
	kid     string // the kid of the tokens and of the published key; "" signs tokens without one
	method  jwt.SigningMethod
	private any
	public  any
	alg     jwkset.ALG // the "alg" published with the key, if any
}

// rsaKeys are generated once for the whole package: RSA key generation is slow, the more so
// under the race detector.
var rsaKeys struct {
	sync.Mutex
	keys []*rsa.PrivateKey
}

// rsaPrivateKey returns the i-th RSA key of the package.
func rsaPrivateKey(t testing.TB, i int) *rsa.PrivateKey {
	t.Helper()
	rsaKeys.Lock()
	defer rsaKeys.Unlock()
	for len(rsaKeys.keys) <= i {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatalf("generating an RSA key: %v", err)
		}
		rsaKeys.keys = append(rsaKeys.keys, k)
	}
	return rsaKeys.keys[i]
}

// newRSAKey is the i-th RSA key of the package, signing RS256 and published for RS256.
func newRSAKey(t testing.TB, i int, kid string) testKey {
	k := rsaPrivateKey(t, i)
	return testKey{kid: kid, method: jwt.SigningMethodRS256, private: k, public: &k.PublicKey, alg: jwkset.AlgRS256}
}

// newECKey is a new P-256 key, signing ES256 and published for ES256.
func newECKey(t testing.TB, kid string) testKey {
	t.Helper()
	return newECKeyOn(t, kid, elliptic.P256(), jwt.SigningMethodES256)
}

// newECKeyOn is a new key on the curve, signing with the method and published for its alg.
func newECKeyOn(t testing.TB, kid string, curve elliptic.Curve, method jwt.SigningMethod) testKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatalf("generating an ECDSA key: %v", err)
	}
	return testKey{kid: kid, method: method, private: k, public: &k.PublicKey, alg: jwkset.ALG(method.Alg())}
}

// newEdKey is a new Ed25519 key, signing EdDSA.
func newEdKey(t testing.TB, kid string) testKey {
	t.Helper()
	public, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("generating an Ed25519 key: %v", err)
	}
	return testKey{kid: kid, method: jwt.SigningMethodEdDSA, private: private, public: public, alg: jwkset.AlgEdDSA}
}

// withKID is the same key under another kid ("" for tokens without a kid).
func (k testKey) withKID(kid string) testKey {
	k.kid = kid
	return k
}

// withMethod is the same key signing with another algorithm; what the JWKS publishes is unchanged.
func (k testKey) withMethod(m jwt.SigningMethod) testKey {
	k.method = m
	return k
}

// sign returns a token with the claims, signed by the key.
func (k testKey) sign(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	token := jwt.NewWithClaims(k.method, claims)
	if k.kid != "" {
		token.Header["kid"] = k.kid
	}
	s, err := token.SignedString(k.private)
	if err != nil {
		t.Fatalf("signing a %s token: %v", k.method.Alg(), err)
	}
	return s
}

// jwk is the JSON member a JWKS publishes for the key.
func (k testKey) jwk(t testing.TB) jwkset.JWKMarshal {
	t.Helper()
	jwk, err := jwkset.NewJWKFromKey(k.public, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: k.kid, ALG: k.alg}})
	if err != nil {
		t.Fatalf("making the JWK of %q: %v", k.kid, err)
	}
	return jwk.Marshal()
}

// jwksJSON is the key set that publishes the keys.
func jwksJSON(t testing.TB, keys ...testKey) []byte {
	t.Helper()
	set := jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{}}
	for _, k := range keys {
		set.Keys = append(set.Keys, k.jwk(t))
	}
	body, err := json.Marshal(set)
	if err != nil {
		t.Fatalf("marshalling a key set: %v", err)
	}
	return body
}

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

func TestJWKSKeyRotation(t *testing.T) {
	current, next, later := newRSAKey(t, 0, "rsa-current"), newECKey(t, "ec-next"), newEdKey(t, "ed-later")
	srv := newKeyServer(t, current)
	jwks, _ := startJWKS(t, srv, time.Hour)
	tokens := newTokens(t, tokenConfig(jwks))
	waitFetched(t, jwks)
	mustVerify(t, tokens, current.sign(t, goodClaims()))

	srv.serve(t, current, next)
	hits := srv.hits.Load()

	t.Run("a token signed with a key the JWKS started serving after start is accepted", func(t *testing.T) {
		id := mustVerify(t, tokens, next.sign(t, goodClaims()))
		if id.UserID != "alice" {
			t.Errorf("UserID = %q, want alice", id.UserID)
		}
		if got := srv.hits.Load() - hits; got != 1 {
			t.Errorf("the JWKS was fetched %d times for the unknown kid, want once", got)
		}
	})
	srv.serve(t, current, next, later)
	hits = srv.hits.Load()

	t.Run("a second unknown kid within the rate-limit window does not refetch", func(t *testing.T) {
		token := later.sign(t, goodClaims())
		_, err := tokens.Verify(context.Background(), token)
		wantInvalidToken(t, err, token, "kid")
		if got := srv.hits.Load() - hits; got != 0 {
			t.Errorf("the JWKS was fetched %d times, want none within the rate-limit window", got)
		}
	})

	t.Run("a token without kid signed by the key rotated in is accepted", func(t *testing.T) {
		mustVerify(t, tokens, next.withKID("").sign(t, goodClaims()))
	})
}

func TestJWKSUnknownKIDRefetchAfterTheWindow(t *testing.T) {
	clock := &fakeClock{at: time.Now()}
	timings := fast
	timings.Now = clock.now // the default allowance, one fetch a minute, on a clock the test moves
	first, second := newECKey(t, "ec-1"), newECKey(t, "ec-2")
	srv := newKeyServer(t)
	jwks, _ := startJWKSWith(t, srv, time.Hour, timings)
	tokens := newTokens(t, tokenConfig(jwks))
	waitFetched(t, jwks)

	hits := srv.hits.Load()
	srv.serve(t, first)
	mustVerify(t, tokens, first.sign(t, goodClaims()))
	srv.serve(t, first, second)
	token := second.sign(t, goodClaims())
	_, err := tokens.Verify(context.Background(), token)
	wantInvalidToken(t, err, token, "kid")
	if got := srv.hits.Load() - hits; got != 1 {
		t.Fatalf("two unknown kids in a row fetched the JWKS %d times, want once", got)
	}

	clock.set(clock.now().Add(59 * time.Second))
	_, err = tokens.Verify(context.Background(), token)
	wantInvalidToken(t, err, token, "kid")
	if got := srv.hits.Load() - hits; got != 1 {
		t.Fatalf("an unknown kid 59s after the first fetched the JWKS %d times in all, want once", got)
	}

	clock.set(clock.now().Add(time.Second))
	mustVerify(t, tokens, token)
	if got := srv.hits.Load() - hits; got != 2 {
		t.Errorf("an unknown kid after the window fetched the JWKS %d times in all, want twice", got)
	}
}

func TestVerifyRefusesATokenWhoseKeyRotatedOut(t *testing.T) {
	t.Parallel()
	staying, leaving := newRSAKey(t, 0, "rsa-staying"), newECKey(t, "ec-leaving")
	srv := newKeyServer(t, staying, leaving)
	jwks, _ := startJWKS(t, srv, 20*time.Millisecond)
	tokens := newTokens(t, tokenConfig(jwks))
	waitFetched(t, jwks)

	token := leaving.sign(t, goodClaims())
	first := mustVerify(t, tokens, token)
	if again := mustVerify(t, tokens, token); !sameClaims(first, again) {
		t.Fatal("the token was verified again rather than found in the cache")
	}

	version := jwks.Version()
	srv.serve(t, staying)
	waitFor(t, "the JWKS refetches the key set without the key", func() bool { return jwks.Version() > version })

	_, err := tokens.Verify(context.Background(), token)
	wantInvalidToken(t, err, token, "kid")
	_, err = (&auth.Authenticator{Tokens: tokens}).Authenticate(bearer(token))
	wantInvalidToken(t, err, token, "kid")
	mustVerify(t, tokens, staying.sign(t, goodClaims()))
}

func TestJWKSDownAfterStart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		down func(*keyServer)
	}{
		{"tokens keep working when the JWKS answers 500", func(s *keyServer) { s.fail(http.StatusInternalServerError) }},
		{"tokens keep working when the JWKS drops the connection", func(s *keyServer) { s.fail(dropConnection) }},
		{"tokens keep working when the JWKS server is gone", func(s *keyServer) { s.Close() }},
		{"tokens keep working when the JWKS answers with something that is not JSON", func(s *keyServer) { s.serveBody([]byte("<html>maintenance</html>")) }},
		{"tokens keep working when the JWKS answers with an object without keys", func(s *keyServer) { s.serveBody([]byte(`{"error":"maintenance"}`)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rsaKey, ecKey := newRSAKey(t, 0, "rsa-1"), newECKey(t, "ec-1")
			srv := newKeyServer(t, rsaKey, ecKey)
			jwks, fetches := startJWKS(t, srv, 20*time.Millisecond)
			tokens := newTokens(t, tokenConfig(jwks))
			waitFetched(t, jwks)
			seen := rsaKey.sign(t, goodClaims())
			mustVerify(t, tokens, seen)

			tc.down(srv)
			waitFailedFetch(t, fetches)
			waitFailedFetch(t, fetches)

			if !jwks.Fetched() {
				t.Error("Fetched() = false after a failed fetch, want true: the keys were fetched once")
			}
			mustVerify(t, tokens, seen)
			mustVerify(t, tokens, ecKey.sign(t, goodClaims()))
			mustVerify(t, tokens, rsaKey.sign(t, withClaims(goodClaims(), map[string]any{"jti": "never-seen"})))
			mustVerify(t, tokens, ecKey.withKID("").sign(t, goodClaims()))
			unknown := newECKey(t, "ec-unknown").sign(t, goodClaims())
			_, err := tokens.Verify(context.Background(), unknown)
			wantInvalidToken(t, err, unknown, "kid")
		})
	}
}

func TestJWKSUnavailableAtStart(t *testing.T) {
	t.Parallel()
	down := []struct {
		name string
		down func(*keyServer)
	}{
		{"a JWKS answering 500 at start makes tokens unavailable until it is up", func(s *keyServer) { s.fail(http.StatusInternalServerError) }},
		{"a JWKS dropping connections at start makes tokens unavailable until it is up", func(s *keyServer) { s.fail(dropConnection) }},
	}
	for _, tc := range down {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := newRSAKey(t, 0, "rsa-1")
			srv := newKeyServer(t, key)
			tc.down(srv)
			jwks, fetches := startJWKS(t, srv, time.Hour)
			tokens := newTokens(t, tokenConfig(jwks))
			waitFailedFetch(t, fetches)

			if jwks.Fetched() {
				t.Fatal("Fetched() = true, want false: no fetch succeeded")
			}
			token := key.sign(t, goodClaims())
			_, err := tokens.Verify(context.Background(), token)
			wantUnavailable(t, err)
			_, err = tokens.Verify(context.Background(), key.withKID("").sign(t, goodClaims()))
			wantUnavailable(t, err)
			_, err = (&auth.Authenticator{Tokens: tokens}).Authenticate(bearer(token))
			wantUnavailable(t, err)

			srv.serve(t, key)
			waitFetched(t, jwks)
			mustVerify(t, tokens, token)
		})
	}

	t.Run("a JWKS hanging at start makes tokens unavailable without holding them past the timeout", func(t *testing.T) {
		t.Parallel()
		key := newRSAKey(t, 0, "rsa-1")
		srv := newKeyServer(t, key)
		srv.hang()
		timings := fast
		timings.FetchTimeout = 5 * time.Second // longer than the wait allowed: Verify must give up by itself
		jwks, _ := startJWKSWith(t, srv, time.Hour, timings)
		cfg := tokenConfig(jwks)
		cfg.Timeout = 100 * time.Millisecond
		tokens := newTokens(t, cfg)
		waitFor(t, "the first fetch reaches the server", func() bool { return srv.hits.Load() >= 1 })

		token := key.sign(t, goodClaims())
		for _, name := range []string{"the first token", "the next token"} {
			start := time.Now()
			_, err := tokens.Verify(context.Background(), token)
			if elapsed := time.Since(start); elapsed > cfg.Timeout+time.Second {
				t.Errorf("Verify of %s took %v while the JWKS hangs, want at most the timeout %v (+1s)", name, elapsed, cfg.Timeout)
			}
			wantUnavailable(t, err)
		}
		if jwks.Fetched() {
			t.Fatal("Fetched() = true, want false: the JWKS never answered")
		}

		srv.unhang()
		waitFetched(t, jwks)
		mustVerify(t, tokens, token)
	})

	t.Run("a fetch that hangs is abandoned after the fetch timeout and retried", func(t *testing.T) {
		t.Parallel()
		key := newRSAKey(t, 0, "rsa-1")
		srv := newKeyServer(t, key)
		srv.hang()
		timings := fast
		timings.FetchTimeout = 100 * time.Millisecond
		jwks, _ := startJWKSWith(t, srv, time.Hour, timings)
		tokens := newTokens(t, tokenConfig(jwks))
		waitFor(t, "hanging fetches time out and are retried", func() bool { return srv.hits.Load() >= 3 })
		if jwks.Fetched() {
			t.Fatal("Fetched() = true, want false: the JWKS never answered")
		}

		srv.unhang()
		waitFetched(t, jwks)
		mustVerify(t, tokens, key.sign(t, goodClaims()))
	})
}

// A token without a kid is checked against every key. While one of the configured JWKSs has never
// been fetched, a failure to verify it may only mean that its key is in the missing set, so, like
// a token with an unknown kid, it cannot be refused yet.
func TestVerifyWhileOneJWKSIsNotFetched(t *testing.T) {
	upKey, downKey := newRSAKey(t, 0, "rsa-up"), newECKey(t, "ec-down")
	up, down := newKeyServer(t, upKey), newKeyServer(t, downKey)
	down.fail(http.StatusServiceUnavailable)
	upJWKS, _ := startJWKS(t, up, time.Hour)
	downJWKS, downFetches := startJWKS(t, down, time.Hour)
	tokens := newTokens(t, tokenConfig(upJWKS, downJWKS))
	waitFetched(t, upJWKS)
	waitFailedFetch(t, downFetches)

	t.Run("a token with a kid of the fetched JWKS is accepted", func(t *testing.T) {
		mustVerify(t, tokens, upKey.sign(t, goodClaims()))
	})
	t.Run("a token without kid signed by a key of the fetched JWKS is accepted", func(t *testing.T) {
		mustVerify(t, tokens, upKey.withKID("").sign(t, goodClaims()))
	})
	t.Run("a token with a kid of the JWKS not fetched yet is unavailable, not refused", func(t *testing.T) {
		_, err := tokens.Verify(context.Background(), downKey.sign(t, goodClaims()))
		wantUnavailable(t, err)
	})
	t.Run("a token without kid signed by a key of the JWKS not fetched yet is unavailable, not refused", func(t *testing.T) {
		_, err := tokens.Verify(context.Background(), downKey.withKID("").sign(t, goodClaims()))
		wantUnavailable(t, err)
	})
}

func TestJWKSKeySetContents(t *testing.T) {
	t.Parallel()
	good := newRSAKey(t, 0, "rsa-good")
	goodJSON, err := json.Marshal(good.jwk(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		body        string
		wantFetched bool
		wantGood    bool // a token signed by the good key is accepted
	}{
		{
			name:        "keys the verifier cannot use are skipped and the others still verify",
			body:        `{"keys":[{"kty":"RSA","kid":"broken","n":"!!","e":"AQAB"},{"kty":"XYZ","kid":"odd"},{"kty":"oct","kid":"hmac","k":"c2VjcmV0"},` + string(goodJSON) + `]}`,
			wantFetched: true,
			wantGood:    true,
		},
		{
			name:        "an empty key set is a fetched set without keys",
			body:        `{"keys":[]}`,
			wantFetched: true,
		},
		{
			name: "a key set of which no key is usable is not used",
			body: `{"keys":[{"kty":"RSA","kid":"broken","n":"!!","e":"AQAB"},{"kty":"oct","kid":"hmac","k":"c2VjcmV0"}]}`,
		},
		{
			name: "a body that is not JSON is not used",
			body: `not json`,
		},
		{
			name: "an object without keys is not used",
			body: `{"keyz":[]}`,
		},
		{
			name: "a key set larger than 1 MiB is not used",
			body: `{"keys":[` + string(goodJSON) + `],"padding":"` + strings.Repeat("x", 1<<20) + `"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newKeyServer(t)
			srv.serveBody([]byte(tc.body))
			jwks, fetches := startJWKS(t, srv, time.Hour)
			tokens := newTokens(t, tokenConfig(jwks))
			if tc.wantFetched {
				waitFetched(t, jwks)
			} else {
				waitFailedFetch(t, fetches)
				if jwks.Fetched() {
					t.Fatal("Fetched() = true, want false")
				}
			}
			token := good.sign(t, goodClaims())
			_, err := tokens.Verify(context.Background(), token)
			switch {
			case tc.wantGood:
				if err != nil {
					t.Errorf("Verify: %v, want the token accepted", err)
				}
			case tc.wantFetched:
				wantInvalidToken(t, err, token, "kid")
			default:
				wantUnavailable(t, err)
			}
		})
	}
}

func TestJWKSClose(t *testing.T) {
	t.Parallel()
	t.Run("Close returns promptly while a fetch hangs, and no fetch follows", func(t *testing.T) {
		t.Parallel()
		srv := newKeyServer(t, newECKey(t, "ec-1"))
		srv.hang()
		jwks, _ := startJWKS(t, srv, 10*time.Millisecond)
		waitFor(t, "a fetch reaches the server", func() bool { return srv.hits.Load() >= 1 })
		start := time.Now()
		jwks.Close()
		if elapsed := time.Since(start); elapsed > time.Second {
			t.Errorf("Close took %v while a fetch hangs, want it prompt", elapsed)
		}
		hits := srv.hits.Load()
		time.Sleep(100 * time.Millisecond)
		if got := srv.hits.Load(); got != hits {
			t.Errorf("the JWKS was fetched %d times after Close, want none", got-hits)
		}
	})

	t.Run("Close stops the periodic refresh", func(t *testing.T) {
		t.Parallel()
		srv := newKeyServer(t, newECKey(t, "ec-1"))
		jwks, _ := startJWKS(t, srv, 10*time.Millisecond)
		waitFor(t, "the key set is refreshed a few times", func() bool { return srv.hits.Load() >= 3 })
		jwks.Close()
		hits := srv.hits.Load()
		time.Sleep(100 * time.Millisecond)
		if got := srv.hits.Load(); got != hits {
			t.Errorf("the JWKS was fetched %d times after Close, want none", got-hits)
		}
		if !jwks.Fetched() {
			t.Error("Fetched() = false after Close, want the state kept")
		}
	})

	t.Run("Close may be called twice", func(t *testing.T) {
		t.Parallel()
		srv := newKeyServer(t, newECKey(t, "ec-1"))
		jwks, _ := startJWKS(t, srv, time.Hour)
		done := make(chan struct{})
		go func() {
			jwks.Close()
			jwks.Close()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Fatal("a second Close did not return")
		}
	})
}

func TestJWKSURL(t *testing.T) {
	srv := newKeyServer(t)
	jwks, _ := startJWKS(t, srv, time.Hour)
	if jwks.URL() != srv.URL {
		t.Errorf("URL() = %q, want %q", jwks.URL(), srv.URL)
	}
	if jwks.Fetched() && srv.hits.Load() == 0 {
		t.Error("Fetched() = true before the server was asked")
	}
	waitFetched(t, jwks)
	if got := srv.hits.Load(); got != 1 {
		t.Errorf("the JWKS was fetched %d times at start, want once", got)
	}
}

// TestJWKSStartsOnFirstUse: a new key set makes no request (so loading a config, and `caddy
// validate`, never reaches the network); the first token that needs it starts it and waits for
// the first fetch, so it is verified rather than told to retry.
func TestJWKSStartsOnFirstUse(t *testing.T) {
	t.Parallel()
	key := newRSAKey(t, 0, "rsa-first-use")
	srv := newKeyServer(t, key)
	jwks := auth.NewJWKS(srv.URL, time.Hour, nil, zaptest.NewLogger(t))
	t.Cleanup(jwks.Close)
	time.Sleep(100 * time.Millisecond)
	if n := srv.hits.Load(); n != 0 || jwks.Fetched() {
		t.Fatalf("%d fetches before any use; want none", n)
	}
	mustVerify(t, newTokens(t, tokenConfig(jwks)), key.sign(t, goodClaims()))
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("%d fetches for the first token; want 1", n)
	}
}

// TestJWKSUnknownKIDFetchOutlivesTheRequest: a request with an unknown kid that gives up at once
// still gets the fetch it spent the allowance on, so a key the provider has just published is
// picked up for the next caller.
func TestJWKSUnknownKIDFetchOutlivesTheRequest(t *testing.T) {
	current, next := newRSAKey(t, 0, "rsa-current"), newECKey(t, "ec-next")
	srv := newKeyServer(t, current)
	jwks, _ := startJWKS(t, srv, time.Hour)
	tokens := newTokens(t, tokenConfig(jwks))
	waitFetched(t, jwks)
	srv.serve(t, current, next) // the provider adds a key
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := tokens.Verify(gone, next.sign(t, goodClaims())); err == nil {
		t.Fatal("a request that had already given up was verified")
	}
	waitFor(t, "the new key is fetched for the request that gave up", func() bool {
		_, err := tokens.Verify(t.Context(), next.sign(t, goodClaims()))
		return err == nil
	})
}

// TestJWKSKeepsItsKeysWhenARefreshHasNoUsableKey: a provider that answers 200 with nothing usable
// after a good fetch does not lock valid tokens out.
func TestJWKSKeepsItsKeysWhenARefreshHasNoUsableKey(t *testing.T) {
	t.Parallel()
	key := newRSAKey(t, 0, "rsa-kept")
	srv := newKeyServer(t, key)
	jwks, fetches := startJWKS(t, srv, 20*time.Millisecond)
	tokens := newTokens(t, tokenConfig(jwks))
	waitFetched(t, jwks)
	srv.serveBody([]byte(`{"keys":[{"kty":"RSA","kid":"broken","n":"!!","e":"AQAB"}]}`))
	waitFailedFetch(t, fetches)
	fresh := withClaims(goodClaims(), map[string]any{"jti": "not cached"})
	mustVerify(t, tokens, key.sign(t, fresh))
}
