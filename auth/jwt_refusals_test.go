// Tests of Verify on the tokens it refuses: signature, claims, algorithm, kid and form.

package auth_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/postsedge/caddy-posts/auth"
)

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
