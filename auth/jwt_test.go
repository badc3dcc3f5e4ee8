// Tests of Verify on the tokens it accepts, and of the leeway on exp, nbf and iat.

package auth_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/postsedge/caddy-posts/auth"
)

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
