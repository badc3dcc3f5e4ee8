// Tests of a JWKS that is down: after start, at start, and one of two not fetched yet.

package auth_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/internal/race"
)

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
			if elapsed := time.Since(start); !race.Enabled && elapsed > cfg.Timeout+time.Second {
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
