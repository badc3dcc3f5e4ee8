// The keys the tests sign tokens with, and the JWKs and key sets that publish them.

package auth_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"sync"
	"testing"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// testKey is a key the tests sign tokens with, and what a JWKS publishes for it.
type testKey struct {
	kid     string // the kid of the tokens and of the published key; "" signs tokens without one
	method  jwt.SigningMethod
	private any
	public  any
	alg     jwkset.ALG // the "alg" published with the key, if any
}

// rsaKeys are generated once for the whole package: RSA key generation is slow, the more so
// under the race detector.
var rsaKeys struct {
	sync.Mutex
	keys []*rsa.PrivateKey
}

// rsaPrivateKey returns the i-th RSA key of the package.
func rsaPrivateKey(t testing.TB, i int) *rsa.PrivateKey {
	t.Helper()
	rsaKeys.Lock()
	defer rsaKeys.Unlock()
	for len(rsaKeys.keys) <= i {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatalf("generating an RSA key: %v", err)
		}
		rsaKeys.keys = append(rsaKeys.keys, k)
	}
	return rsaKeys.keys[i]
}

// newRSAKey is the i-th RSA key of the package, signing RS256 and published for RS256.
func newRSAKey(t testing.TB, i int, kid string) testKey {
	k := rsaPrivateKey(t, i)
	return testKey{kid: kid, method: jwt.SigningMethodRS256, private: k, public: &k.PublicKey, alg: jwkset.AlgRS256}
}

// newECKey is a new P-256 key, signing ES256 and published for ES256.
func newECKey(t testing.TB, kid string) testKey {
	t.Helper()
	return newECKeyOn(t, kid, elliptic.P256(), jwt.SigningMethodES256)
}

// newECKeyOn is a new key on the curve, signing with the method and published for its alg.
func newECKeyOn(t testing.TB, kid string, curve elliptic.Curve, method jwt.SigningMethod) testKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatalf("generating an ECDSA key: %v", err)
	}
	return testKey{kid: kid, method: method, private: k, public: &k.PublicKey, alg: jwkset.ALG(method.Alg())}
}

// newEdKey is a new Ed25519 key, signing EdDSA.
func newEdKey(t testing.TB, kid string) testKey {
	t.Helper()
	public, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("generating an Ed25519 key: %v", err)
	}
	return testKey{kid: kid, method: jwt.SigningMethodEdDSA, private: private, public: public, alg: jwkset.AlgEdDSA}
}

// withKID is the same key under another kid ("" for tokens without a kid).
func (k testKey) withKID(kid string) testKey {
	k.kid = kid
	return k
}

// withMethod is the same key signing with another algorithm; what the JWKS publishes is unchanged.
func (k testKey) withMethod(m jwt.SigningMethod) testKey {
	k.method = m
	return k
}

// sign returns a token with the claims, signed by the key.
func (k testKey) sign(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	token := jwt.NewWithClaims(k.method, claims)
	if k.kid != "" {
		token.Header["kid"] = k.kid
	}
	s, err := token.SignedString(k.private)
	if err != nil {
		t.Fatalf("signing a %s token: %v", k.method.Alg(), err)
	}
	return s
}

// jwk is the JSON member a JWKS publishes for the key.
func (k testKey) jwk(t testing.TB) jwkset.JWKMarshal {
	t.Helper()
	jwk, err := jwkset.NewJWKFromKey(k.public, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: k.kid, ALG: k.alg}})
	if err != nil {
		t.Fatalf("making the JWK of %q: %v", k.kid, err)
	}
	return jwk.Marshal()
}

// jwksJSON is the key set that publishes the keys.
func jwksJSON(t testing.TB, keys ...testKey) []byte {
	t.Helper()
	set := jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{}}
	for _, k := range keys {
		set.Keys = append(set.Keys, k.jwk(t))
	}
	body, err := json.Marshal(set)
	if err != nil {
		t.Fatalf("marshalling a key set: %v", err)
	}
	return body
}
