package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"slices"
	"strings"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/postsedge/caddy-posts/spans"
)

// keyRing is the keys of every configured JWKS.
type keyRing struct {
	sets []*JWKS
}

func newKeyRing(sets []*JWKS) keyRing {
	return keyRing{sets: sets}
}

// tracedBy has every set keep the provider of ctx's span, when the request is traced, for its
// timed refreshes (JWKS.tracedBy): one look at ctx for all of them.
func (k keyRing) tracedBy(ctx context.Context) {
	p := spans.Provider(ctx)
	if p == nil {
		return
	}
	for _, s := range k.sets {
		s.tracedBy(p)
	}
}

// awaitFirstAttempts starts every set and waits, no longer than ctx, until each has tried once.
func (k keyRing) awaitFirstAttempts(ctx context.Context) {
	for _, s := range k.sets {
		s.awaitFirstAttempt(ctx)
	}
}

// The reasons a token's keys are refused, which Tokens.refusal turns into descriptions.
var (
	errCritical      = errors.New("the token's header has crit")
	errKIDNotString  = errors.New("the token's kid is not a string")
	errUnknownKID    = errors.New("no key set has the token's kid")
	errKeyNotForSig  = errors.New("the token's key is not for verifying signatures")
	errKeyNotForAlg  = errors.New("the token's key is not for its algorithm")
	errNoKeyForToken = errors.New("no key of the key sets can verify the token")
)

// keyfunc returns the jwt.Keyfunc that gives the keys which may verify a token. It replaces
// keyfunc/v3's KeyfuncCtx, which checks a key's alg (and its use, against a whitelist that
// cannot say "absent or sig") only for a token with a kid, and gives a token without kid every
// key of the storage (VerificationKeySet), so that a key published for RS256 verified a PS256
// token, and an encryption key a signature. A jwkset.Storage cannot filter either: KeyReadAll is
// not told the token's alg. Here every key tried, for a token with a kid or without, must be for
// signatures (use absent or "sig", key_ops absent or including "verify"), be published for the
// token's alg or for none, and be of a type that can verify that alg. The jwt parser has checked
// the alg against the accepted ones before it calls this.
func (k keyRing) keyfunc(ctx context.Context) jwt.Keyfunc {
	return func(token *jwt.Token) (any, error) {
		// RFC 7515 §4.1.11: a recipient that does not understand every extension crit lists must
		// refuse the token. No extension is understood here, so crit in any form refuses it.
		if _, ok := token.Header["crit"]; ok {
			return nil, errCritical
		}
		alg := token.Method.Alg()
		var (
			keys []jwkset.JWK
			err  error
		)
		kid, hasKID := token.Header[jwkset.HeaderKID]
		if hasKID {
			s, ok := kid.(string)
			if !ok {
				return nil, errKIDNotString
			}
			keys, err = k.withKID(ctx, s)
		} else {
			keys, err = k.all(ctx)
		}
		if err != nil {
			return nil, err
		}
		set := jwt.VerificationKeySet{Keys: make([]jwt.VerificationKey, 0, len(keys))}
		refusal := errKeyNotForSig
		for _, jwk := range keys {
			switch err := usable(jwk, alg); {
			case err == nil:
				set.Keys = append(set.Keys, publicKey(jwk.Key()))
			case errors.Is(err, errKeyNotForAlg):
				refusal = err // the key was for signatures: the more telling reason
			}
		}
		switch {
		case len(set.Keys) > 0:
			return set, nil
		case hasKID:
			return nil, refusal
		case !k.fetched():
			return nil, ErrKeysUnavailable // the token's key may be in a set not fetched yet
		}
		return nil, errNoKeyForToken
	}
}

// usable checks that a key may verify a token signed with alg.
func usable(jwk jwkset.JWK, alg string) error {
	m := jwk.Marshal()
	switch {
	case m.USE != "" && m.USE != jwkset.UseSig:
		return errKeyNotForSig
	case m.KEYOPS != nil && !slices.Contains(m.KEYOPS, jwkset.KeyOpsVerify): // present, even empty
		return errKeyNotForSig
	case m.ALG != "" && m.ALG.String() != alg:
		return errKeyNotForAlg
	case !verifies(publicKey(jwk.Key()), alg):
		return errKeyNotForAlg
	}
	return nil
}

// verifies reports whether a key of this type can verify signatures made with alg.
func verifies(key any, alg string) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		var bits int
		switch alg {
		case "ES256":
			bits = 256
		case "ES384":
			bits = 384
		case "ES512":
			bits = 521
		}
		return bits != 0 && k.Curve != nil && k.Curve.Params().BitSize == bits
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// publicKey is the public half of a key that came with its private half.
func publicKey(key any) any {
	if k, ok := key.(interface{ Public() crypto.PublicKey }); ok {
		return k.Public()
	}
	return key
}

// withKID finds the keys with the kid. When no set has one, each set may refetch once (rate
// limited); if it is still missing the answer is ErrKeysUnavailable while some set has never been
// fetched, and errUnknownKID otherwise.
func (k keyRing) withKID(ctx context.Context, kid string) ([]jwkset.JWK, error) {
	var found []jwkset.JWK
	for _, s := range k.sets {
		found = s.withKID(ctx, kid, found)
	}
	if len(found) > 0 {
		return found, nil
	}
	for _, s := range k.sets {
		if s.refetchForUnknownKID(ctx) {
			if found = s.withKID(ctx, kid, found); len(found) > 0 {
				return found, nil
			}
		}
	}
	if !k.fetched() {
		return nil, ErrKeysUnavailable
	}
	return nil, errUnknownKID
}

// withKID appends the set's keys with the kid to found. A set may have several (RFC 7517 §4.5
// allows keys of different types to share one).
func (s *JWKS) withKID(ctx context.Context, kid string, found []jwkset.JWK) []jwkset.JWK {
	keys, _ := s.keys.KeyReadAll(ctx)
	for _, jwk := range keys {
		if jwk.Marshal().KID == kid {
			found = append(found, jwk)
		}
	}
	return found
}

// all returns every key, for a token without a kid.
func (k keyRing) all(ctx context.Context) ([]jwkset.JWK, error) {
	var all []jwkset.JWK
	for _, s := range k.sets {
		keys, _ := s.keys.KeyReadAll(ctx)
		all = append(all, keys...)
	}
	if len(all) == 0 && !k.fetched() {
		return nil, ErrKeysUnavailable
	}
	return all, nil
}

// fetched reports whether every set has been fetched at least once.
func (k keyRing) fetched() bool {
	for _, s := range k.sets {
		if !s.Fetched() {
			return false
		}
	}
	return true
}

// version changes whenever any set's keys change.
func (k keyRing) version() uint64 {
	var v uint64
	for _, s := range k.sets {
		v += s.version.Load()
	}
	return v
}
