// Tests of several credentials: an upstream user, bearer tokens beside an API key or upstream user.

package auth_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
)

func TestAuthenticateUpstream(t *testing.T) {
	authn := func(upstream string) *auth.Authenticator {
		return &auth.Authenticator{
			APIKeyHeader: "X-API-Key",
			APIKeys:      []auth.APIKey{mustParseAPIKey(t, aliceKey, "alice")},
			Upstream:     func(*http.Request) string { return upstream },
		}
	}
	t.Run("the user of an earlier handler is the caller", func(t *testing.T) {
		got, err := authn("alice").Authenticate(newRequest(nil))
		if err != nil {
			t.Fatalf("Authenticate: %v", err)
		}
		if want := (auth.Identity{UserID: "alice", Method: "caddy"}); !reflect.DeepEqual(got, want) {
			t.Errorf("Authenticate = %+v, want %+v", got, want)
		}
	})
	t.Run("no user from an earlier handler leaves the request anonymous", func(t *testing.T) {
		got, err := authn("").Authenticate(newRequest(nil))
		if err != nil || !got.Anonymous() {
			t.Errorf("Authenticate = %+v, %v; want the anonymous Identity", got, err)
		}
	})
	refused := []struct {
		name   string
		userID string
		header http.Header
	}{
		{"an upstream user id with a control character is refused", "mallory\u0001", nil},
		{"an upstream user id with a NUL is refused", "mallory\x00", nil},
		{"an upstream user id with a zero-width joiner is refused", "mallory\u200d", nil},
		{"an upstream user id with a line separator is refused", "mallory\u2028root", nil},
		{"an upstream user id of invalid UTF-8 is refused", "mallory\xc3", nil},
		{"an upstream user id longer than 256 bytes is refused", "mallory" + strings.Repeat("y", 250), nil},
		{"an upstream user id with a control character is refused even alongside a good API key", "mallory\u0001", http.Header{"X-Api-Key": {aliceKey}}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			got, err := authn(tc.userID).Authenticate(newRequest(tc.header))
			var authErr *auth.Error
			if !errors.As(err, &authErr) {
				t.Fatalf("Authenticate = %+v, %v; want an *auth.Error", got, err)
			}
			if status := errcode.Of(err).Code.Status; status != http.StatusUnauthorized || authErr.Code != "invalid_token" {
				t.Errorf("error = {Status: %d, Code: %q}, want {Status: 401, Code: \"invalid_token\"}", status, authErr.Code)
			}
			if strings.Contains(authErr.Description, "mallory") {
				t.Errorf("the description %q echoes the user id", authErr.Description)
			}
			if !got.Anonymous() {
				t.Errorf("Authenticate returned %+v with its error, want the anonymous Identity", got)
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
