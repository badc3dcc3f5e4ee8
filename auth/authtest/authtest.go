// Package authtest is the identity provider of the tests that run the module through Caddy
// (caddymodule's end-to-end tests, integration's): an RSA and an EC key, their JWKS served over
// HTTP at any path (503 while Failing), and the tokens they sign. No production code imports it.
package authtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// The issuer and audience of the tokens Claims makes, which the tests' configs accept.
const (
	Issuer   = "https://idp.example.test/"
	Audience = "posts-e2e"
)

// Provider serves its key set (kids rsa-1 and ec-1) and signs tokens with them.
type Provider struct {
	*httptest.Server
	Failing atomic.Bool // the JWKS answers 503 while set
	rsaKey  *rsa.PrivateKey
	ecKey   *ecdsa.PrivateKey
	mu      sync.Mutex
	refused map[string]int // the 503s answered, by the query of the URL
}

// NewProvider makes the keys and starts serving them; Close stops it.
func NewProvider() *Provider {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	p := &Provider{rsaKey: rsaKey, ecKey: ecKey, refused: map[string]int{}}
	var keys []jwkset.JWKMarshal
	for kid, key := range map[string]any{"rsa-1": &rsaKey.PublicKey, "ec-1": &ecKey.PublicKey} {
		jwk, err := jwkset.NewJWKFromKey(key, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, USE: jwkset.UseSig}})
		if err != nil {
			panic(err)
		}
		keys = append(keys, jwk.Marshal())
	}
	jwks, _ := json.Marshal(jwkset.JWKSMarshal{Keys: keys})
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.Failing.Load() {
			p.mu.Lock()
			p.refused[r.URL.RawQuery]++
			p.mu.Unlock()
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(jwks)
	}))
	return p
}

// Claims are the claims of a token for user that the tests accept: Issuer, Audience, a name
// and an email, valid for an hour.
func Claims(user string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"sub": user, "iss": Issuer, "aud": Audience, "name": "Name of " + user, "email": user + "@example.com",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

// Token signs c with the provider's RSA key (RS256), or its EC key when alg is ES256.
func (p *Provider) Token(c jwt.MapClaims, alg string) string {
	var (
		tok *jwt.Token
		key any
	)
	switch alg {
	case "RS256":
		tok, key = jwt.NewWithClaims(jwt.SigningMethodRS256, c), p.rsaKey
		tok.Header["kid"] = "rsa-1"
	case "ES256":
		tok, key = jwt.NewWithClaims(jwt.SigningMethodES256, c), p.ecKey
		tok.Header["kid"] = "ec-1"
	default:
		panic(alg)
	}
	s, err := tok.SignedString(key)
	if err != nil {
		panic(err)
	}
	return s
}

// Refusals is how many fetches of the JWKS URL with query the provider has answered 503.
func (p *Provider) Refusals(query string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused[query]
}

// TokenOfKID signs c with the provider's RSA key (RS256) under kid, a key id its key set may
// not hold: a token that makes a server fetch the key set again.
func (p *Provider) TokenOfKID(c jwt.MapClaims, kid string) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(p.rsaKey)
	if err != nil {
		panic(err)
	}
	return s
}
