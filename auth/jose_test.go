package auth_test

import (
	"context"
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/postsedge/caddy-posts/auth"
)

// newP384Key is a new P-384 key, signing ES384 and published for ES384.
func newP384Key(t testing.TB, kid string) testKey {
	t.Helper()
	return newECKeyOn(t, kid, elliptic.P384(), jwt.SigningMethodES384)
}

// signWithHeader signs the claims with the key, with the header members added (a nil value
// still adds the member, as JSON null).
func (k testKey) signWithHeader(t testing.TB, claims jwt.MapClaims, header map[string]any) string {
	t.Helper()
	token := jwt.NewWithClaims(k.method, claims)
	if k.kid != "" {
		token.Header["kid"] = k.kid
	}
	for name, v := range header {
		token.Header[name] = v
	}
	s, err := token.SignedString(k.private)
	if err != nil {
		t.Fatalf("signing a %s token: %v", k.method.Alg(), err)
	}
	return s
}

// publishedAs is the JWK of the key with members changed; absent removes one.
func publishedAs(t testing.TB, k testKey, changes map[string]any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(k.jwk(t))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for name, v := range changes {
		if v == absent {
			delete(m, name)
		} else {
			m[name] = v
		}
	}
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	return b
}

// keySetOf is a JWKS body with the members.
func keySetOf(t testing.TB, members ...json.RawMessage) []byte {
	t.Helper()
	body, err := json.Marshal(map[string]any{"keys": members})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// tokensFor verifies tokens against one JWKS serving body.
func tokensFor(t *testing.T, body []byte, configure func(*auth.TokenConfig)) *auth.Tokens {
	t.Helper()
	srv := newKeyServer(t)
	srv.serveBody(body)
	jwks, _ := startJWKS(t, srv, time.Hour)
	cfg := tokenConfig(jwks)
	if configure != nil {
		configure(&cfg)
	}
	tokens := newTokens(t, cfg)
	waitFetched(t, jwks)
	return tokens
}

// TestVerifyRefusesCriticalHeaders: RFC 7515 §4.1.11 has a recipient refuse a token whose crit
// lists an extension it does not understand. None is understood here, so crit in any form, even
// an empty list or a value that is no list at all, refuses the token.
func TestVerifyRefusesCriticalHeaders(t *testing.T) {
	p := newIDP(t)
	tokens := newTokens(t, tokenConfig(p.jwks...))
	tests := []struct {
		name   string
		key    testKey
		header map[string]any
	}{
		{"a token whose crit lists an extension it uses is refused", p.rsa, map[string]any{"crit": []string{"b64"}, "b64": true}},
		{"a token whose crit lists a registered claim is refused", p.ec, map[string]any{"crit": []string{"exp"}}},
		{"a token whose crit lists an extension it does not use is refused", p.ed, map[string]any{"crit": []string{"http://example.com/ext"}}},
		{"a token whose crit is an empty list is refused", p.rsa, map[string]any{"crit": []string{}}},
		{"a token whose crit is a string is refused", p.rsa, map[string]any{"crit": "b64"}},
		{"a token whose crit is null is refused", p.rsa, map[string]any{"crit": nil}},
		{"a token whose crit is an object is refused", p.rsa, map[string]any{"crit": map[string]any{}}},
		{"a token whose crit is a number is refused", p.rsa, map[string]any{"crit": 1}},
		{"a token without kid whose crit is an empty list is refused", p.ec.withKID(""), map[string]any{"crit": []string{}}},
		{"a token without kid whose crit lists an extension is refused", p.second.withKID(""), map[string]any{"crit": []string{"b64"}, "b64": false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			token := tc.key.signWithHeader(t, goodClaims(), tc.header)
			_, err := tokens.Verify(context.Background(), token)
			wantInvalidToken(t, err, token, "crit")
			_, err = (&auth.Authenticator{Tokens: tokens}).Authenticate(bearer(token))
			wantInvalidToken(t, err, token, "crit")
		})
	}

	t.Run("a token with crit and a kid no JWKS has is refused without a refetch", func(t *testing.T) {
		hits := p.hits()
		token := p.stranger.signWithHeader(t, goodClaims(), map[string]any{"crit": []string{"exp"}})
		_, err := tokens.Verify(context.Background(), token)
		wantInvalidToken(t, err, token, "crit")
		if got := p.hits() - hits; got != 0 {
			t.Errorf("Verify fetched the JWKSs %d times, want none", got)
		}
	})
}

// TestVerifyHonoursKeyUseAndOperations: a key is used only if its use is absent or "sig" and its
// key_ops, if present, include "verify" (RFC 7517 §4.2, §4.3), for tokens with a kid and without.
func TestVerifyHonoursKeyUseAndOperations(t *testing.T) {
	key := newRSAKey(t, 0, "rsa-published")
	tests := []struct {
		name     string
		changes  map[string]any
		accepted bool
		reason   string // of a refusal of a token with a kid
	}{
		{name: "a key without use or key_ops verifies", changes: map[string]any{}, accepted: true},
		{name: "a key for use sig verifies", changes: map[string]any{"use": "sig"}, accepted: true},
		{name: "a key whose key_ops are verify verifies", changes: map[string]any{"key_ops": []string{"verify"}}, accepted: true},
		{name: "a key whose key_ops include verify among others verifies", changes: map[string]any{"key_ops": []string{"sign", "verify"}}, accepted: true},
		{name: "a key for use sig whose key_ops include verify verifies", changes: map[string]any{"use": "sig", "key_ops": []string{"verify"}}, accepted: true},
		{name: "a key for use enc does not verify", changes: map[string]any{"use": "enc"}, reason: "use, key_ops"},
		{name: "a key whose key_ops are sign only does not verify", changes: map[string]any{"key_ops": []string{"sign"}}, reason: "use, key_ops"},
		{name: "a key whose key_ops are encrypt only does not verify", changes: map[string]any{"key_ops": []string{"encrypt"}}, reason: "use, key_ops"},
		{name: "a key whose key_ops are an empty list does not verify", changes: map[string]any{"key_ops": []string{}}, reason: "use, key_ops"},
		{name: "a key for use sig whose key_ops lack verify does not verify", changes: map[string]any{"use": "sig", "key_ops": []string{"sign"}}, reason: "use, key_ops"},
		{name: "a key for use enc whose key_ops include verify does not verify", changes: map[string]any{"use": "enc", "key_ops": []string{"verify"}}, reason: "use, key_ops"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tokens := tokensFor(t, keySetOf(t, publishedAs(t, key, tc.changes)), nil)
			withKID, withoutKID := key.sign(t, goodClaims()), key.withKID("").sign(t, goodClaims())
			if tc.accepted {
				mustVerify(t, tokens, withKID)
				mustVerify(t, tokens, withoutKID)
				return
			}
			_, err := tokens.Verify(context.Background(), withKID)
			wantInvalidToken(t, err, withKID, tc.reason)
			_, err = tokens.Verify(context.Background(), withoutKID)
			wantInvalidToken(t, err, withoutKID, "no key")
		})
	}

	t.Run("a token without kid is verified by the signing key when the set also has the same key for encryption", func(t *testing.T) {
		tokens := tokensFor(t, keySetOf(t,
			publishedAs(t, key.withKID("rsa-enc"), map[string]any{"use": "enc"}),
			publishedAs(t, key.withKID("rsa-sig"), map[string]any{"use": "sig"}),
		), nil)
		mustVerify(t, tokens, key.withKID("").sign(t, goodClaims()))
		mustVerify(t, tokens, key.withKID("rsa-sig").sign(t, goodClaims()))
		token := key.withKID("rsa-enc").sign(t, goodClaims())
		_, err := tokens.Verify(context.Background(), token)
		wantInvalidToken(t, err, token, "use, key_ops")
	})

	t.Run("a token is verified by the key for signatures of two that share its kid", func(t *testing.T) {
		other := newRSAKey(t, 1, "shared")
		tokens := tokensFor(t, keySetOf(t,
			publishedAs(t, other, map[string]any{"use": "enc"}),
			publishedAs(t, key.withKID("shared"), map[string]any{"use": "sig"}),
		), nil)
		mustVerify(t, tokens, key.withKID("shared").sign(t, goodClaims()))
	})
}

// TestVerifyChecksEveryKeysAlgorithm: a key published with an alg verifies tokens of that alg
// only, and a key of a type that cannot verify the token's alg is not tried, whether the token
// names the key by its kid or, without kid, every key is tried.
func TestVerifyChecksEveryKeysAlgorithm(t *testing.T) {
	rsaKey, ecKey, edKey := newRSAKey(t, 0, "rsa-1"), newECKey(t, "ec-1"), newEdKey(t, "ed-1")
	psAccepted := func(c *auth.TokenConfig) { c.Algorithms = []string{"RS256", "PS256", "ES256", "EdDSA"} }
	tests := []struct {
		name   string
		keys   []json.RawMessage
		token  func(t *testing.T) string
		reason string
	}{
		{
			name: "a PS256 token without kid signed by a key published for RS256 is refused",
			keys: []json.RawMessage{publishedAs(t, rsaKey, nil)},
			token: func(t *testing.T) string {
				return rsaKey.withKID("").withMethod(jwt.SigningMethodPS256).sign(t, goodClaims())
			},
			reason: "no key",
		},
		{
			name:   "a PS256 token with the kid of a key published for RS256 is refused",
			keys:   []json.RawMessage{publishedAs(t, rsaKey, nil)},
			token:  func(t *testing.T) string { return rsaKey.withMethod(jwt.SigningMethodPS256).sign(t, goodClaims()) },
			reason: "does not match its key",
		},
		{
			name: "a PS256 token without kid is refused when every key is published for another algorithm",
			keys: []json.RawMessage{publishedAs(t, rsaKey, nil), publishedAs(t, ecKey, nil), publishedAs(t, edKey, nil)},
			token: func(t *testing.T) string {
				return rsaKey.withKID("").withMethod(jwt.SigningMethodPS256).sign(t, goodClaims())
			},
			reason: "no key",
		},
		{
			name:   "an RS256 token with the kid of an EC key published without alg is refused",
			keys:   []json.RawMessage{publishedAs(t, ecKey, map[string]any{"alg": absent}), publishedAs(t, rsaKey, nil)},
			token:  func(t *testing.T) string { return rsaKey.withKID(ecKey.kid).sign(t, goodClaims()) },
			reason: "does not match its key",
		},
		{
			name:   "an ES256 token without kid is refused when the only EC key, published without alg, is on another curve",
			keys:   []json.RawMessage{publishedAs(t, newP384Key(t, "ec-384"), map[string]any{"alg": absent}), publishedAs(t, rsaKey, nil)},
			token:  func(t *testing.T) string { return ecKey.withKID("").sign(t, goodClaims()) },
			reason: "no key",
		},
		{
			name:   "an EdDSA token with the kid of an RSA key published without alg is refused",
			keys:   []json.RawMessage{publishedAs(t, rsaKey, map[string]any{"alg": absent}), publishedAs(t, edKey, nil)},
			token:  func(t *testing.T) string { return edKey.withKID(rsaKey.kid).sign(t, goodClaims()) },
			reason: "does not match its key",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tokens := tokensFor(t, keySetOf(t, tc.keys...), psAccepted)
			token := tc.token(t)
			_, err := tokens.Verify(context.Background(), token)
			wantInvalidToken(t, err, token, tc.reason)
		})
	}

	accepted := []struct {
		name  string
		keys  []json.RawMessage
		token func(t *testing.T) string
	}{
		{
			name: "a PS256 token without kid is verified by its key published without alg, the same key published for RS256 being skipped",
			keys: []json.RawMessage{publishedAs(t, rsaKey, nil), publishedAs(t, rsaKey.withKID("rsa-any"), map[string]any{"alg": absent})},
			token: func(t *testing.T) string {
				return rsaKey.withKID("").withMethod(jwt.SigningMethodPS256).sign(t, goodClaims())
			},
		},
		{
			name:  "an RS256 token without kid is verified by its key published for RS256 among keys of other types",
			keys:  []json.RawMessage{publishedAs(t, ecKey, map[string]any{"alg": absent}), publishedAs(t, edKey, nil), publishedAs(t, rsaKey, nil)},
			token: func(t *testing.T) string { return rsaKey.withKID("").sign(t, goodClaims()) },
		},
		{
			name:  "an ES256 token without kid is verified by its P-256 key published without alg",
			keys:  []json.RawMessage{publishedAs(t, newP384Key(t, "ec-384"), map[string]any{"alg": absent}), publishedAs(t, ecKey, map[string]any{"alg": absent})},
			token: func(t *testing.T) string { return ecKey.withKID("").sign(t, goodClaims()) },
		},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			tokens := tokensFor(t, keySetOf(t, tc.keys...), psAccepted)
			mustVerify(t, tokens, tc.token(t))
		})
	}
}

// TestVerifyChecksTheUserID: the user claim must pass auth.ValidUserID; a GraphQL ID with a
// control character once made the marshaller panic.
func TestVerifyChecksTheUserID(t *testing.T) {
	p := newIDP(t)
	tokens := newTokens(t, tokenConfig(p.jwks...))
	tests := []struct {
		name string
		sub  string
	}{
		{"a token whose user id has a control character is refused", "mallory\u0001"},
		{"a token whose user id has a NUL is refused", "mallory\x00"},
		{"a token whose user id has a newline is refused", "mallory\nroot"},
		{"a token whose user id has a C1 control is refused", "mallory\u009b"},
		{"a token whose user id has a zero-width space is refused", "mallory\u200b"},
		{"a token whose user id has a right-to-left override is refused", "mallory\u202e"},
		{"a token whose user id has a byte order mark is refused", "\ufeffmallory"},
		{"a token whose user id is longer than 256 bytes is refused", "mallory" + strings.Repeat("y", 250)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			token := p.rsa.sign(t, withClaims(goodClaims(), map[string]any{"sub": tc.sub}))
			id, err := tokens.Verify(context.Background(), token)
			wantInvalidToken(t, err, token, "user id")
			if !reflect.DeepEqual(id, auth.Identity{}) {
				t.Errorf("Verify returned %+v with its error, want the zero Identity", id)
			}
			var authErr *auth.Error
			if errors.As(err, &authErr) && strings.Contains(authErr.Description, "mallory") {
				t.Errorf("the description %q echoes the user id", authErr.Description)
			}
			_, err = (&auth.Authenticator{Tokens: tokens}).Authenticate(bearer(token))
			wantInvalidToken(t, err, token, "user id")
		})
	}
	t.Run("a token whose user id is 256 bytes with accents is accepted", func(t *testing.T) {
		sub := strings.Repeat("é", 128)
		id := mustVerify(t, tokens, p.rsa.sign(t, withClaims(goodClaims(), map[string]any{"sub": sub})))
		if id.UserID != sub {
			t.Errorf("UserID = %q, want %q", id.UserID, sub)
		}
	})
}
