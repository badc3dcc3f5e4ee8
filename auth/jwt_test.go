package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
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

func TestVerifyAcceptsGoodTokens(t *testing.T) {
	p := newIDP(t)
	alice := auth.Identity{UserID: "alice", Method: "jwt", Name: "Alice Liddell", Email: "alice@example.com"}
	tests := []struct {
		name   string
		token  func(t *testing.T) string
		config func(*auth.TokenConfig)
		want   auth.Identity // Claims aside
	}{
		{
			name:  "an RS256 token is accepted",
			token: func(t *testing.T) string { return p.rsa.sign(t, goodClaims()) },
			want:  alice,
		},
		{
			name:  "an ES256 token is accepted",
			token: func(t *testing.T) string { return p.ec.sign(t, goodClaims()) },
			want:  alice,
		},
		{
			name:  "an EdDSA (Ed25519) token is accepted",
			token: func(t *testing.T) string { return p.ed.sign(t, goodClaims()) },
			want:  alice,
		},
		{
			name:  "a token without kid is accepted, every key being tried",
			token: func(t *testing.T) string { return p.ec.withKID("").sign(t, goodClaims()) },
			want:  alice,
		},
		{
			name:  "a token signed by a key of the second JWKS is accepted",
			token: func(t *testing.T) string { return p.second.sign(t, goodClaims()) },
			want:  alice,
		},
		{
			name:  "a token without kid signed by a key of the second JWKS is accepted",
			token: func(t *testing.T) string { return p.second.withKID("").sign(t, goodClaims()) },
			want:  alice,
		},
		{
			name: "a token from the second configured issuer is accepted",
			token: func(t *testing.T) string {
				return p.rsa.sign(t, withClaims(goodClaims(), map[string]any{"iss": otherIssuer}))
			},
			want: alice,
		},
		{
			name: "a token for the second configured audience is accepted",
			token: func(t *testing.T) string {
				return p.rsa.sign(t, withClaims(goodClaims(), map[string]any{"aud": otherAudience}))
			},
			want: alice,
		},
		{
			name: "a token whose aud array names one configured audience among others is accepted",
			token: func(t *testing.T) string {
				return p.ec.sign(t, withClaims(goodClaims(), map[string]any{"aud": []string{"billing", otherAudience}}))
			},
			want: alice,
		},
		{
			name: "a token without name and email gives an identity without a profile",
			token: func(t *testing.T) string {
				return p.ed.sign(t, withClaims(goodClaims(), map[string]any{"name": absent, "email": absent}))
			},
			want: auth.Identity{UserID: "alice", Method: "jwt"},
		},
		{
			name: "a token with only sub and exp is accepted",
			token: func(t *testing.T) string {
				return p.rsa.sign(t, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Minute).Unix()})
			},
			config: func(c *auth.TokenConfig) { c.Issuers, c.Audiences = nil, nil },
			want:   auth.Identity{UserID: "alice", Method: "jwt"},
		},
		{
			name: "a token from any issuer for any audience is accepted when none are configured",
			token: func(t *testing.T) string {
				return p.rsa.sign(t, withClaims(goodClaims(), map[string]any{"iss": "https://elsewhere.example/", "aud": "anything"}))
			},
			config: func(c *auth.TokenConfig) { c.Issuers, c.Audiences = nil, nil },
			want:   alice,
		},
		{
			name: "configured user, name and email claims give the identity",
			token: func(t *testing.T) string {
				return p.ec.sign(t, withClaims(goodClaims(), map[string]any{
					"sub": "auth0|12345", "uid": "bob", "display_name": "Bob Dylan", "mail": "bob@example.com",
				}))
			},
			config: func(c *auth.TokenConfig) { c.UserClaim, c.NameClaim, c.EmailClaim = "uid", "display_name", "mail" },
			want:   auth.Identity{UserID: "bob", Method: "jwt", Name: "Bob Dylan", Email: "bob@example.com"},
		},
		{
			name:   "a PS256 token is accepted when PS256 is configured and the key published without alg",
			token:  func(t *testing.T) string { return p.second.withMethod(jwt.SigningMethodPS256).sign(t, goodClaims()) },
			config: func(c *auth.TokenConfig) { c.Algorithms = []string{"PS256"} },
			want:   alice,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tokenConfig(p.jwks...)
			if tc.config != nil {
				tc.config(&cfg)
			}
			tokens := newTokens(t, cfg)
			token := tc.token(t)
			got := mustVerify(t, tokens, token)
			if got.UserID != tc.want.UserID || got.Method != tc.want.Method || got.Name != tc.want.Name || got.Email != tc.want.Email {
				t.Errorf("Verify = {UserID: %q, Method: %q, Name: %q, Email: %q}, want {UserID: %q, Method: %q, Name: %q, Email: %q}",
					got.UserID, got.Method, got.Name, got.Email, tc.want.UserID, tc.want.Method, tc.want.Name, tc.want.Email)
			}
			if got.Claims == nil {
				t.Fatal("Claims = nil, want the token's claims")
			}
			if got.Claims[cfg.UserClaim] != tc.want.UserID {
				t.Errorf("Claims[%q] = %v, want %q", cfg.UserClaim, got.Claims[cfg.UserClaim], tc.want.UserID)
			}
			if _, ok := got.Claims["exp"]; !ok {
				t.Errorf("Claims = %v, want exp among them", got.Claims)
			}

			viaRequest, err := (&auth.Authenticator{Tokens: tokens}).Authenticate(bearer(token))
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if !reflect.DeepEqual(viaRequest, got) {
				t.Errorf("Authenticate = %+v, want what Verify gave: %+v", viaRequest, got)
			}
		})
	}
}

func TestVerifyRefusesBadTokens(t *testing.T) {
	p := newIDP(t)
	pemOf := func(t *testing.T) []byte {
		der, err := x509.MarshalPKIXPublicKey(p.rsa.public)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	derOf := func(t *testing.T) []byte {
		der, err := x509.MarshalPKIXPublicKey(p.rsa.public)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	tests := []struct {
		name      string
		token     func(t *testing.T) string
		config    func(*auth.TokenConfig)
		reason    string // in the description
		refetches int64  // fetches of the JWKSs that Verify may make
	}{
		{
			name:   "a token signed by another key under a known kid is refused",
			token:  func(t *testing.T) string { return p.stranger.withKID(p.rsa.kid).sign(t, goodClaims()) },
			reason: "signature",
		},
		{
			name:   "a token signed by a key of the second JWKS under a kid of the first is refused",
			token:  func(t *testing.T) string { return p.second.withKID(p.rsa.kid).sign(t, goodClaims()) },
			reason: "signature",
		},
		{
			name:   "a token without kid signed by a key of no JWKS is refused",
			token:  func(t *testing.T) string { return p.stranger.withKID("").sign(t, goodClaims()) },
			reason: "signature",
		},
		{
			name: "an expired token is refused",
			token: func(t *testing.T) string {
				return p.rsa.sign(t, withClaims(goodClaims(), map[string]any{"exp": time.Now().Add(-5 * time.Minute).Unix()}))
			},
			reason: "expired",
		},
		{
			name: "a token whose nbf is in the future beyond the leeway is refused",
			token: func(t *testing.T) string {
				return p.ec.sign(t, withClaims(goodClaims(), map[string]any{"nbf": time.Now().Add(5 * time.Minute).Unix()}))
			},
			reason: "nbf",
		},
		{
			name: "a token issued in the future beyond the leeway is refused",
			token: func(t *testing.T) string {
				return p.ed.sign(t, withClaims(goodClaims(), map[string]any{"iat": time.Now().Add(5 * time.Minute).Unix()}))
			},
			reason: "iat",
		},
		{
			name: "a token from an issuer not configured is refused",
			token: func(t *testing.T) string {
				return p.rsa.sign(t, withClaims(goodClaims(), map[string]any{"iss": "https://evil.example/"}))
			},
			reason: "issuer",
		},
		{
			name: "a token without iss is refused when issuers are configured",
			token: func(t *testing.T) string {
				return p.rsa.sign(t, withClaims(goodClaims(), map[string]any{"iss": absent}))
			},
			reason: "issuer",
		},
		{
			name: "a token for another audience is refused",
			token: func(t *testing.T) string {
				return p.rsa.sign(t, withClaims(goodClaims(), map[string]any{"aud": "billing"}))
			},
			reason: "aud",
		},
		{
			name: "a token whose aud array names no configured audience is refused",
			token: func(t *testing.T) string {
				return p.rsa.sign(t, withClaims(goodClaims(), map[string]any{"aud": []string{"billing", "shipping"}}))
			},
			reason: "aud",
		},
		{
			name: "a token without aud is refused when audiences are configured",
			token: func(t *testing.T) string {
				return p.rsa.sign(t, withClaims(goodClaims(), map[string]any{"aud": absent}))
			},
			reason: "aud",
		},
		{
			name:   "an RS384 token is refused when only RS256 is accepted",
			token:  func(t *testing.T) string { return p.second.withMethod(jwt.SigningMethodRS384).sign(t, goodClaims()) },
			config: func(c *auth.TokenConfig) { c.Algorithms = []string{"RS256"} },
			reason: "algorithm is not accepted",
		},
		{
			name: "an unsigned token (alg none) is refused",
			token: func(t *testing.T) string {
				return testKey{kid: p.rsa.kid, method: jwt.SigningMethodNone, private: jwt.UnsafeAllowNoneSignatureType}.sign(t, goodClaims())
			},
			reason: "algorithm is not accepted",
		},
		{
			name: "an HS256 token keyed with the PEM of the RSA public key under its kid is refused",
			token: func(t *testing.T) string {
				return testKey{kid: p.rsa.kid, method: jwt.SigningMethodHS256, private: pemOf(t)}.sign(t, goodClaims())
			},
			reason: "algorithm is not accepted",
		},
		{
			name: "an HS256 token keyed with the DER of the RSA public key under its kid is refused",
			token: func(t *testing.T) string {
				return testKey{kid: p.rsa.kid, method: jwt.SigningMethodHS256, private: derOf(t)}.sign(t, goodClaims())
			},
			reason: "algorithm is not accepted",
		},
		{
			name:   "a PS256 token under a kid published for RS256 is refused even when PS256 is accepted",
			token:  func(t *testing.T) string { return p.rsa.withMethod(jwt.SigningMethodPS256).sign(t, goodClaims()) },
			config: func(c *auth.TokenConfig) { c.Algorithms = []string{"RS256", "PS256"} },
			reason: "does not match its key",
		},
		{
			name:      "a token with a kid no JWKS has is refused after one refetch of each",
			token:     func(t *testing.T) string { return p.stranger.sign(t, goodClaims()) },
			reason:    "kid",
			refetches: 2,
		},
		{
			name: "a token whose kid is not a string is refused",
			token: func(t *testing.T) string {
				token := jwt.NewWithClaims(jwt.SigningMethodRS256, goodClaims())
				token.Header["kid"] = 1
				s, err := token.SignedString(p.rsa.private)
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			reason: "not a string",
		},
		{
			name: "a token without the user claim is refused",
			token: func(t *testing.T) string {
				return p.rsa.sign(t, withClaims(goodClaims(), map[string]any{"sub": absent}))
			},
			reason: "user id",
		},
		{
			name:   "a token whose user claim is not a string is refused",
			token:  func(t *testing.T) string { return p.rsa.sign(t, withClaims(goodClaims(), map[string]any{"sub": 42})) },
			reason: "user id",
		},
		{
			name:   "a token whose user claim is empty is refused",
			token:  func(t *testing.T) string { return p.rsa.sign(t, withClaims(goodClaims(), map[string]any{"sub": ""})) },
			reason: "user id",
		},
		{
			name: "a token whose configured user claim is missing is refused even with a sub",
			token: func(t *testing.T) string {
				return p.rsa.sign(t, goodClaims())
			},
			config: func(c *auth.TokenConfig) { c.UserClaim = "uid" },
			reason: "user id",
		},
		{
			name: "a token without exp is refused",
			token: func(t *testing.T) string {
				return p.ec.sign(t, withClaims(goodClaims(), map[string]any{"exp": absent}))
			},
			reason: "expiry",
		},
		{
			name: "a token whose exp is not a number is refused",
			token: func(t *testing.T) string {
				return p.ec.sign(t, withClaims(goodClaims(), map[string]any{"exp": "tomorrow"}))
			},
			reason: "wrong type",
		},
		{
			name: "a token cut short is refused",
			token: func(t *testing.T) string {
				token := p.rsa.sign(t, goodClaims())
				return token[:len(token)-3]
			},
			reason: "signature",
		},
		{
			name: "a token with a claim changed after signing is refused",
			token: func(t *testing.T) string {
				parts := strings.Split(p.rsa.sign(t, goodClaims()), ".")
				payload, _ := json.Marshal(withClaims(goodClaims(), map[string]any{"sub": "mallory"}))
				parts[1] = base64.RawURLEncoding.EncodeToString(payload)
				return strings.Join(parts, ".")
			},
			reason: "signature",
		},
		{
			name:   "a string that is not a JWT is refused",
			token:  func(t *testing.T) string { return "not-a-jwt" },
			reason: "well-formed",
		},
		{
			name:   "three segments of garbage are refused",
			token:  func(t *testing.T) string { return "abc.def.ghi" },
			reason: "well-formed",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tokenConfig(p.jwks...)
			if tc.config != nil {
				tc.config(&cfg)
			}
			tokens := newTokens(t, cfg)
			token := tc.token(t)

			hits := p.hits()
			id, err := tokens.Verify(context.Background(), token)
			wantInvalidToken(t, err, token, tc.reason)
			if !reflect.DeepEqual(id, auth.Identity{}) {
				t.Errorf("Verify returned %+v with its error, want the zero Identity", id)
			}
			if got := p.hits() - hits; got != tc.refetches {
				t.Errorf("Verify fetched the JWKSs %d times, want %d", got, tc.refetches)
			}

			id, err = (&auth.Authenticator{Tokens: tokens}).Authenticate(bearer(token))
			wantInvalidToken(t, err, token, tc.reason)
			if !id.Anonymous() {
				t.Errorf("Authenticate returned %+v with its error, want the anonymous Identity", id)
			}
		})
	}
}

func TestVerifyLeeway(t *testing.T) {
	p := newIDP(t)
	t0 := time.Date(2030, time.January, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return t0 }
	tests := []struct {
		name     string
		leeway   time.Duration
		changes  map[string]any
		accepted bool
	}{
		{"a token expired 10s ago is accepted with a leeway of 30s", 30 * time.Second, map[string]any{"exp": t0.Add(-10 * time.Second).Unix()}, true},
		{"a token expired 10s ago is refused without leeway", 0, map[string]any{"exp": t0.Add(-10 * time.Second).Unix()}, false},
		{"a token expired 40s ago is refused with a leeway of 30s", 30 * time.Second, map[string]any{"exp": t0.Add(-40 * time.Second).Unix()}, false},
		{"a token that expires now is refused without leeway", 0, map[string]any{"exp": t0.Unix()}, false},
		{"a token whose nbf is 10s ahead is accepted with a leeway of 30s", 30 * time.Second, map[string]any{"nbf": t0.Add(10 * time.Second).Unix()}, true},
		{"a token whose nbf is 10s ahead is refused without leeway", 0, map[string]any{"nbf": t0.Add(10 * time.Second).Unix()}, false},
		{"a token issued 10s ahead is accepted with a leeway of 30s", 30 * time.Second, map[string]any{"iat": t0.Add(10 * time.Second).Unix()}, true},
		{"a token issued 10s ahead is refused without leeway", 0, map[string]any{"iat": t0.Add(10 * time.Second).Unix()}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tokenConfig(p.jwks...)
			cfg.Leeway = tc.leeway
			tokens := newTokensWithClock(t, cfg, clock)
			token := p.rsa.sign(t, withClaims(goodClaimsAt(t0), tc.changes))
			_, err := tokens.Verify(context.Background(), token)
			if tc.accepted && err != nil {
				t.Errorf("Verify: %v, want the token accepted", err)
			}
			if !tc.accepted {
				wantInvalidToken(t, err, token, "")
			}
		})
	}
}

func TestAuthenticateWithBearerTokens(t *testing.T) {
	p := newIDP(t)
	tokens := newTokens(t, tokenConfig(p.jwks...))
	aliceAPIKey := mustParseAPIKey(t, aliceKey, "alice")
	aliceAPIKey.Name, aliceAPIKey.Email = "Alice (API key)", "alice@keys.example"
	authn := func(upstream string) *auth.Authenticator {
		a := &auth.Authenticator{
			Tokens:       tokens,
			APIKeyHeader: "X-API-Key",
			APIKeys:      []auth.APIKey{aliceAPIKey, mustParseAPIKey(t, bobKey, "bob")},
		}
		if upstream != "" {
			a.Upstream = func(*http.Request) string { return upstream }
		}
		return a
	}
	aliceToken := p.rsa.sign(t, goodClaims())
	bareAliceToken := p.ec.sign(t, withClaims(goodClaims(), map[string]any{"name": absent, "email": absent}))
	expired := p.rsa.sign(t, withClaims(goodClaims(), map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}))

	accepted := []struct {
		name     string
		upstream string
		header   http.Header
		want     auth.Identity // Claims aside
	}{
		{
			name:   "a good bearer token identifies its user",
			header: http.Header{"Authorization": {"Bearer " + aliceToken}},
			want:   auth.Identity{UserID: "alice", Method: "jwt", Name: "Alice Liddell", Email: "alice@example.com"},
		},
		{
			name:   "the scheme is recognised whatever its case",
			header: http.Header{"Authorization": {"bEARER " + aliceToken}},
			want:   auth.Identity{UserID: "alice", Method: "jwt", Name: "Alice Liddell", Email: "alice@example.com"},
		},
		{
			name:   "a bearer token is found behind a Basic authorization in another header",
			header: http.Header{"Authorization": {"Basic YWxpY2U6c2VjcmV0", "Bearer " + aliceToken}},
			want:   auth.Identity{UserID: "alice", Method: "jwt", Name: "Alice Liddell", Email: "alice@example.com"},
		},
		{
			name:   "a token and an API key of the same user are accepted, the key filling in the profile",
			header: http.Header{"Authorization": {"Bearer " + bareAliceToken}, "X-Api-Key": {aliceKey}},
			want:   auth.Identity{UserID: "alice", Method: "jwt", Name: "Alice (API key)", Email: "alice@keys.example"},
		},
		{
			name:   "a token's own profile wins over the API key's",
			header: http.Header{"Authorization": {"Bearer " + aliceToken}, "X-Api-Key": {aliceKey}},
			want:   auth.Identity{UserID: "alice", Method: "jwt", Name: "Alice Liddell", Email: "alice@example.com"},
		},
		{
			name:     "a token and an upstream handler naming the same user are accepted",
			upstream: "alice",
			header:   http.Header{"Authorization": {"Bearer " + aliceToken}},
			want:     auth.Identity{UserID: "alice", Method: "jwt", Name: "Alice Liddell", Email: "alice@example.com"},
		},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			got, err := authn(tc.upstream).Authenticate(newRequest(tc.header))
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			claims := got.Claims
			// A token's identity expires when Verify stops accepting it: exp plus the leeway.
			exp, _ := claims["exp"].(json.Number).Int64()
			if want := time.Unix(exp, 0).Add(30 * time.Second); !got.Expires.Equal(want) {
				t.Errorf("Expires = %v; want exp + 30s = %v", got.Expires, want)
			}
			got.Claims, got.Expires = nil, time.Time{}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Authenticate = %+v, want %+v", got, tc.want)
			}
			if claims["sub"] != "alice" {
				t.Errorf("Claims = %v, want the token's claims", claims)
			}
		})
	}

	badRequests := []struct {
		name     string
		upstream string
		header   http.Header
	}{
		{"the Bearer scheme without a token is an invalid request", "", http.Header{"Authorization": {"Bearer"}}},
		{"the Bearer scheme followed by spaces only is an invalid request", "", http.Header{"Authorization": {"Bearer    "}}},
		{"a token with a comma is an invalid request", "", http.Header{"Authorization": {"Bearer " + aliceToken[:20] + "," + aliceToken[20:]}}},
		{"a token in quotes is an invalid request", "", http.Header{"Authorization": {`Bearer "` + aliceToken + `"`}}},
		{"a token followed by another word is an invalid request", "", http.Header{"Authorization": {"Bearer " + aliceToken + " extra"}}},
		{"a token with a padding sign in its middle is an invalid request", "", http.Header{"Authorization": {"Bearer abc=def"}}},
		{"two bearer headers are an invalid request", "", http.Header{"Authorization": {"Bearer " + aliceToken, "Bearer " + aliceToken}}},
		{"a token and an API key of different users are an invalid request", "", http.Header{"Authorization": {"Bearer " + aliceToken}, "X-Api-Key": {bobKey}}},
		{"a token and an upstream handler naming another user are an invalid request", "bob", http.Header{"Authorization": {"Bearer " + aliceToken}}},
		{"a token, the same user's API key and an upstream handler naming another user are an invalid request", "bob", http.Header{"Authorization": {"Bearer " + aliceToken}, "X-Api-Key": {aliceKey}}},
	}
	for _, tc := range badRequests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := authn(tc.upstream).Authenticate(newRequest(tc.header))
			wantInvalidRequest(t, err)
			if !got.Anonymous() {
				t.Errorf("Authenticate returned %+v with its error, want the anonymous Identity", got)
			}
		})
	}

	refused := []struct {
		name   string
		header http.Header
		token  string
	}{
		{"an expired token is refused even alongside a valid API key", http.Header{"Authorization": {"Bearer " + expired}, "X-Api-Key": {aliceKey}}, expired},
		{"an unknown API key is refused alongside a good token", http.Header{"Authorization": {"Bearer " + aliceToken}, "X-Api-Key": {"not-a-key"}}, aliceToken},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			got, err := authn("").Authenticate(newRequest(tc.header))
			wantInvalidToken(t, err, tc.token, "")
			if !got.Anonymous() {
				t.Errorf("Authenticate returned %+v with its error, want the anonymous Identity", got)
			}
		})
	}
}

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

func TestValidAlgorithm(t *testing.T) {
	for _, alg := range []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"} {
		t.Run(alg+" is accepted", func(t *testing.T) {
			if err := auth.ValidAlgorithm(alg); err != nil {
				t.Errorf("ValidAlgorithm(%q) = %v, want nil", alg, err)
			}
		})
	}
	for _, alg := range []string{"none", "None", "HS256", "HS384", "HS512", "", "rs256", "RS256 ", "ES256K", "Ed25519"} {
		t.Run(fmt.Sprintf("%q is refused", alg), func(t *testing.T) {
			if err := auth.ValidAlgorithm(alg); err == nil {
				t.Errorf("ValidAlgorithm(%q) = nil, want an error", alg)
			}
		})
	}
	for _, alg := range auth.DefaultAlgorithms {
		t.Run("the default algorithm "+alg+" is valid", func(t *testing.T) {
			if err := auth.ValidAlgorithm(alg); err != nil {
				t.Errorf("ValidAlgorithm(%q) = %v, want nil", alg, err)
			}
		})
	}
}

func TestNewTokensRefusesBadConfigurations(t *testing.T) {
	srv := newKeyServer(t)
	jwks, _ := startJWKS(t, srv, time.Hour)
	tests := []struct {
		name string
		cfg  func(*auth.TokenConfig)
	}{
		{"a configuration without JWKS is refused", func(c *auth.TokenConfig) { c.Keys = nil }},
		{"HS256 among the algorithms is refused", func(c *auth.TokenConfig) { c.Algorithms = []string{"RS256", "HS256"} }},
		{"none among the algorithms is refused", func(c *auth.TokenConfig) { c.Algorithms = []string{"none"} }},
		{"an algorithm in the wrong case is refused", func(c *auth.TokenConfig) { c.Algorithms = []string{"es256"} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tokenConfig(jwks)
			tc.cfg(&cfg)
			if tokens, err := auth.NewTokens(cfg); err == nil {
				t.Errorf("NewTokens = %v, nil; want an error", tokens)
			}
		})
	}
}

// DefaultAlgorithms are documented as "the signing algorithms accepted when none are configured".
func TestTokensWithoutConfiguredAlgorithms(t *testing.T) {
	rsaKey, ecKey, edKey := newRSAKey(t, 0, "rsa-1"), newECKey(t, "ec-1"), newEdKey(t, "ed-1")
	p521, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	es512 := testKey{kid: "ec-521", method: jwt.SigningMethodES512, private: p521, public: &p521.PublicKey} // published without alg
	secret := []byte("a shared secret that has no place in a JWKS")
	set := jwksJSON(t, rsaKey, ecKey, edKey, es512)
	oct := fmt.Sprintf(`{"kty":"oct","kid":"hmac","k":%q},`, base64.RawURLEncoding.EncodeToString(secret))
	body := strings.Replace(string(set), `"keys":[`, `"keys":[`+oct, 1)
	srv := newKeyServer(t)
	srv.serveBody([]byte(body))
	jwks, _ := startJWKS(t, srv, time.Hour)
	cfg := tokenConfig(jwks)
	cfg.Algorithms = nil
	tokens := newTokens(t, cfg)
	waitFetched(t, jwks)

	for _, key := range []testKey{rsaKey, ecKey, edKey} {
		t.Run("a "+key.method.Alg()+" token is accepted", func(t *testing.T) {
			mustVerify(t, tokens, key.sign(t, goodClaims()))
		})
	}
	der, err := x509.MarshalPKIXPublicKey(&rsaPrivateKey(t, 0).PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name   string
		token  string
		reason string
	}{
		{
			name:   "an ES512 token, ES512 not being a default algorithm, is refused",
			token:  es512.sign(t, goodClaims()),
			reason: "algorithm is not accepted",
		},
		{
			name:   "an expired token is refused as expired, not for its algorithm",
			token:  ecKey.sign(t, withClaims(goodClaims(), map[string]any{"exp": time.Now().Add(-time.Hour).Unix()})),
			reason: "expired",
		},
		{
			name:  "an unsigned token (alg none) is refused",
			token: testKey{kid: rsaKey.kid, method: jwt.SigningMethodNone, private: jwt.UnsafeAllowNoneSignatureType}.sign(t, goodClaims()),
		},
		{
			name:  "an HS256 token keyed with the RSA public key under its kid is refused",
			token: testKey{kid: rsaKey.kid, method: jwt.SigningMethodHS256, private: der}.sign(t, goodClaims()),
		},
		{
			name:  "an HS256 token signed with a shared secret the JWKS publishes is refused",
			token: testKey{kid: "hmac", method: jwt.SigningMethodHS256, private: secret}.sign(t, goodClaims()),
		},
		{
			name:  "an HS256 token without kid signed with a shared secret the JWKS publishes is refused",
			token: testKey{method: jwt.SigningMethodHS256, private: secret}.sign(t, goodClaims()),
		},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tokens.Verify(context.Background(), tc.token)
			wantInvalidToken(t, err, tc.token, tc.reason)
		})
	}
}
