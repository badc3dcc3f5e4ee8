// The token tests' fixtures: claims, configuration, refusal checks, an identity provider, a clock.

package auth_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
)

const (
	issuer        = "https://idp.example.com/"
	otherIssuer   = "https://login.example.org/"
	audience      = "posts-api"
	otherAudience = "posts-admin"
)

// goodClaimsAt are the claims of a good token for alice, issued at at and valid for an hour.
func goodClaimsAt(at time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"iss":   issuer,
		"aud":   audience,
		"sub":   "alice",
		"name":  "Alice Liddell",
		"email": "alice@example.com",
		"iat":   at.Unix(),
		"nbf":   at.Unix(),
		"exp":   at.Add(time.Hour).Unix(),
	}
}

func goodClaims() jwt.MapClaims { return goodClaimsAt(time.Now()) }

// absent, as the value of a change, removes the claim.
type absentClaim struct{}

var absent absentClaim

// withClaims returns c with the changes applied.
func withClaims(c jwt.MapClaims, changes map[string]any) jwt.MapClaims {
	for k, v := range changes {
		if v == absent {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// tokenConfig is the configuration of most tests: two issuers, two audiences, the RS256, ES256
// and EdDSA algorithms, the user id from sub, a leeway of 30s.
func tokenConfig(keys ...*auth.JWKS) auth.TokenConfig {
	return auth.TokenConfig{
		Keys:       keys,
		Issuers:    []string{issuer, otherIssuer},
		Audiences:  []string{audience, otherAudience},
		Algorithms: []string{"RS256", "ES256", "EdDSA"},
		UserClaim:  "sub",
		NameClaim:  "name",
		EmailClaim: "email",
		Leeway:     30 * time.Second,
		Timeout:    2 * time.Second,
	}
}

func newTokens(t testing.TB, cfg auth.TokenConfig) *auth.Tokens {
	t.Helper()
	tokens, err := auth.NewTokens(cfg)
	if err != nil {
		t.Fatalf("NewTokens: %v", err)
	}
	return tokens
}

// newTokensWithClock is newTokens checking tokens against the clock.
func newTokensWithClock(t testing.TB, cfg auth.TokenConfig, now func() time.Time) *auth.Tokens {
	t.Helper()
	tokens, err := auth.NewTokensWithClock(cfg, now)
	if err != nil {
		t.Fatalf("NewTokensWithClock: %v", err)
	}
	return tokens
}

func mustVerify(t testing.TB, tokens *auth.Tokens, token string) auth.Identity {
	t.Helper()
	id, err := tokens.Verify(context.Background(), token)
	if err != nil {
		t.Fatalf("Verify: %v, want the token accepted", err)
	}
	return id
}

// sameClaims reports whether two identities share their claims map: the second came out of the
// cache rather than from verifying the token again, which would have decoded a new map.
func sameClaims(a, b auth.Identity) bool {
	return a.Claims != nil && reflect.ValueOf(a.Claims).UnsafePointer() == reflect.ValueOf(b.Claims).UnsafePointer()
}

// bearer is a request with the token in an Authorization header.
func bearer(token string) *http.Request {
	return newRequest(http.Header{"Authorization": {"Bearer " + token}})
}

// wantInvalidToken checks that err refuses the token with a 401 invalid_token whose description
// gives the reason and echoes nothing of the token.
func wantInvalidToken(t testing.TB, err error, token, reason string) {
	t.Helper()
	var authErr *auth.Error
	if !errors.As(err, &authErr) {
		t.Fatalf("error = %v, want an *auth.Error", err)
	}
	if status := errcode.Of(err).Code.Status; status != http.StatusUnauthorized || authErr.Code != "invalid_token" {
		t.Errorf("error = {Status: %d, Code: %q}, want {Status: 401, Code: \"invalid_token\"}", status, authErr.Code)
	}
	if errors.Is(err, auth.ErrKeysUnavailable) {
		t.Errorf("error %v is also ErrKeysUnavailable", err)
	}
	if authErr.Description == "" {
		t.Error("the description is empty")
	}
	if !strings.Contains(authErr.Description, reason) {
		t.Errorf("description %q does not give the reason %q", authErr.Description, reason)
	}
	want := `Bearer realm="posts", error="invalid_token", error_description="` + authErr.Description + `"`
	if got := authErr.Challenge(); got != want {
		t.Errorf("Challenge() = %s, want %s", got, want)
	}
	for _, part := range append(strings.Split(token, "."), token) {
		if len(part) >= 8 && (strings.Contains(authErr.Description, part) || strings.Contains(authErr.Challenge(), part)) {
			t.Errorf("the description %q echoes the token", authErr.Description)
		}
	}
}

// wantInvalidRequest checks that err is a 400 invalid_request.
func wantInvalidRequest(t testing.TB, err error) {
	t.Helper()
	var authErr *auth.Error
	if !errors.As(err, &authErr) {
		t.Fatalf("error = %v, want an *auth.Error", err)
	}
	if status := errcode.Of(err).Code.Status; status != http.StatusBadRequest || authErr.Code != "invalid_request" {
		t.Errorf("error = {Status: %d, Code: %q}, want {Status: 400, Code: \"invalid_request\"}", status, authErr.Code)
	}
	want := `Bearer realm="posts", error="invalid_request", error_description="` + authErr.Description + `"`
	if got := authErr.Challenge(); got != want {
		t.Errorf("Challenge() = %s, want %s", got, want)
	}
}

// idp is an identity provider with two JWKSs.
type idp struct {
	rsa, ec, ed  testKey // published by the first JWKS
	second       testKey // published by the second JWKS, without alg
	stranger     testKey // published by neither
	first, other *keyServer
	jwks         []*auth.JWKS
}

func newIDP(t testing.TB) *idp {
	t.Helper()
	p := &idp{
		rsa:      newRSAKey(t, 0, "rsa-1"),
		ec:       newECKey(t, "ec-1"),
		ed:       newEdKey(t, "ed-1"),
		second:   newRSAKey(t, 1, "rsa-2"),
		stranger: newRSAKey(t, 2, "rsa-stranger"),
	}
	p.second.alg = "" // published without alg, so that it can verify other RSA algorithms
	p.first = newKeyServer(t, p.rsa, p.ec, p.ed)
	p.other = newKeyServer(t, p.second)
	a, _ := startJWKS(t, p.first, time.Hour)
	b, _ := startJWKS(t, p.other, time.Hour)
	waitFetched(t, a, b)
	p.jwks = []*auth.JWKS{a, b}
	return p
}

func (p *idp) hits() int64 { return p.first.hits.Load() + p.other.hits.Load() }

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	at time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

func (c *fakeClock) set(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = at
}
