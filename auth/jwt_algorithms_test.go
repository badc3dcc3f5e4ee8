// Tests of the signing algorithms: the valid ones, configurations refused, the defaults.

package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/postsedge/caddy-posts/auth"
)

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
