// Tests of the token cache: hits, a new key set, expiry, refused tokens, its size.

package auth_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/postsedge/caddy-posts/auth"
)

func TestTokenCache(t *testing.T) {
	t.Run("a token verified twice is checked once, even with the JWKS down in between", func(t *testing.T) {
		key := newECKey(t, "ec-1")
		srv := newKeyServer(t, key)
		jwks, _ := startJWKS(t, srv, time.Hour)
		tokens := newTokens(t, tokenConfig(jwks))
		waitFetched(t, jwks)
		token := key.sign(t, goodClaims())
		first := mustVerify(t, tokens, token)
		srv.Close()
		second := mustVerify(t, tokens, token)
		if !sameClaims(first, second) {
			t.Error("the second Verify checked the token again, want it found in the cache")
		}
		if n := tokens.CacheLen(); n != 1 {
			t.Errorf("CacheLen() = %d, want 1", n)
		}
		other := mustVerify(t, tokens, key.sign(t, withClaims(goodClaims(), map[string]any{"jti": "another"})))
		if sameClaims(first, other) {
			t.Error("another token was given the cached identity of the first")
		}
	})

	t.Run("a cached token is checked again once the key set changes", func(t *testing.T) {
		key, added := newECKey(t, "ec-1"), newEdKey(t, "ed-added")
		srv := newKeyServer(t, key)
		jwks, _ := startJWKS(t, srv, time.Hour)
		tokens := newTokens(t, tokenConfig(jwks))
		waitFetched(t, jwks)
		token := key.sign(t, goodClaims())
		first := mustVerify(t, tokens, token)

		version := jwks.Version()
		srv.serve(t, key, added)
		mustVerify(t, tokens, added.sign(t, goodClaims())) // its unknown kid refetches the key set
		if jwks.Version() == version {
			t.Fatal("the version did not change with the key set")
		}
		again := mustVerify(t, tokens, token)
		if sameClaims(first, again) {
			t.Error("the token was taken from the cache after the key set changed, want it checked again")
		}
	})

	t.Run("a cached token is refused after its expiry", func(t *testing.T) {
		clock := &fakeClock{at: time.Date(2030, time.January, 2, 3, 4, 5, 0, time.UTC)}
		key := newECKey(t, "ec-1")
		srv := newKeyServer(t, key)
		jwks, _ := startJWKS(t, srv, time.Hour)
		cfg := tokenConfig(jwks)
		cfg.Leeway = 0
		tokens := newTokensWithClock(t, cfg, clock.now)
		waitFetched(t, jwks)

		token := key.sign(t, withClaims(goodClaimsAt(clock.now()), map[string]any{"exp": clock.now().Add(time.Minute).Unix()}))
		first := mustVerify(t, tokens, token)
		clock.set(clock.now().Add(59 * time.Second))
		if again := mustVerify(t, tokens, token); !sameClaims(first, again) {
			t.Error("the token was not found in the cache before its expiry")
		}
		clock.set(clock.now().Add(time.Second))
		_, err := tokens.Verify(context.Background(), token)
		wantInvalidToken(t, err, token, "expired")
	})

	t.Run("a refused token is not cached", func(t *testing.T) {
		key := newECKey(t, "ec-1")
		srv := newKeyServer(t, key)
		jwks, _ := startJWKS(t, srv, time.Hour)
		tokens := newTokens(t, tokenConfig(jwks))
		waitFetched(t, jwks)
		for _, claims := range []jwt.MapClaims{
			withClaims(goodClaims(), map[string]any{"iss": "https://evil.example/"}),
			withClaims(goodClaims(), map[string]any{"sub": absent}),
			withClaims(goodClaims(), map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}),
		} {
			token := key.sign(t, claims)
			for range 2 {
				_, err := tokens.Verify(context.Background(), token)
				wantInvalidToken(t, err, token, "")
			}
		}
		if n := tokens.CacheLen(); n != 0 {
			t.Errorf("CacheLen() = %d after refused tokens only, want 0", n)
		}
	})

	t.Run("the cache holds no more than CacheSize tokens", func(t *testing.T) {
		key := newECKey(t, "ec-1")
		srv := newKeyServer(t, key)
		jwks, _ := startJWKS(t, srv, time.Hour)
		cfg := tokenConfig(jwks)
		cfg.CacheSize = 10
		tokens := newTokens(t, cfg)
		waitFetched(t, jwks)
		var last string
		var lastID auth.Identity
		for i := range 100 {
			last = key.sign(t, withClaims(goodClaims(), map[string]any{"jti": fmt.Sprint(i)}))
			lastID = mustVerify(t, tokens, last)
			if n := tokens.CacheLen(); n > cfg.CacheSize {
				t.Fatalf("CacheLen() = %d after %d tokens, want at most %d", n, i+1, cfg.CacheSize)
			}
		}
		if again := mustVerify(t, tokens, last); !sameClaims(lastID, again) {
			t.Error("the last token verified is not in the cache")
		}
	})
}
