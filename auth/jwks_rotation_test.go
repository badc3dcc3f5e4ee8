// Tests of key rotation: a key added (the unknown-kid refetch and its allowance), a key removed.

package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth"
)

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
