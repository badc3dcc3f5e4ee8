// Tests of fetching a key set: its contents, Close, the first fetch, a refresh with no usable key.

package auth_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/internal/race"
)

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
		if elapsed := time.Since(start); !race.Enabled && elapsed > time.Second {
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
		jwks, fetches := startJWKS(t, srv, 10*time.Millisecond)
		waitFor(t, "the key set is refreshed a few times", func() bool { return srv.hits.Load() >= 3 })
		jwks.Close()
		// Counted by the client as each fetch starts, in the goroutines Close waits for: a
		// fetch that Close cancelled could still reach the server's handler after it returned
		// (srv.hits, counted there, failed once under go test -race -p 4 on a loaded machine).
		started := fetches.started.Load()
		time.Sleep(100 * time.Millisecond)
		if got := fetches.started.Load(); got != started {
			t.Errorf("the JWKS was fetched %d times after Close, want none", got-started)
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

func TestTheSpanOfAFetchShowsTheKeySetsURLWithoutItsSecrets(t *testing.T) {
	for in, want := range map[string]string{
		"https://idp.example.com/.well-known/jwks.json":         "https://idp.example.com/.well-known/jwks.json",
		"https://user:secret@idp.example.com/jwks":              "https://REDACTED:REDACTED@idp.example.com/jwks",
		"https://idp.example.com/jwks?api_key=secret&tenant=ab": "https://idp.example.com/jwks?api_key=REDACTED&tenant=REDACTED",
	} {
		if got := auth.Redacted(in); got != want {
			t.Errorf("redacted(%q) = %q, want %q", in, got, want)
		}
	}
}
