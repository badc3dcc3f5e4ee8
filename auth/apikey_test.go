// Tests of API keys: ParseAPIKey, and Authenticate with a key header or an ApiKey authorization.

package auth_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
)

// The keys the tests configure. aliceKey is configured in clear, bobKey as its SHA-256 digest.
const (
	aliceKey = "alice-secret-key"
	bobKey   = "bob-secret-key"
)

func digestHex(key string) string {
	d := sha256.Sum256([]byte(key))
	return hex.EncodeToString(d[:])
}

func mustParseAPIKey(t testing.TB, key, userID string) auth.APIKey {
	t.Helper()
	k, err := auth.ParseAPIKey(key, userID)
	if err != nil {
		t.Fatalf("ParseAPIKey(%q, %q): %v", key, userID, err)
	}
	return k
}

func TestParseAPIKey(t *testing.T) {
	bobDigest := digestHex(bobKey)
	valid := []struct {
		name string
		key  string
	}{
		{"a clear key is stored as its digest", bobKey},
		{"a sha256 digest in lower-case hex is stored as given", "sha256:" + bobDigest},
		{"a sha256 digest in upper-case hex is stored as given", "sha256:" + strings.ToUpper(bobDigest)},
	}
	for _, tc := range valid {
		t.Run(tc.name, func(t *testing.T) {
			k, err := auth.ParseAPIKey(tc.key, "bob")
			if err != nil {
				t.Fatalf("ParseAPIKey(%q): %v", tc.key, err)
			}
			if want := sha256.Sum256([]byte(bobKey)); k.Digest != want {
				t.Errorf("Digest = %x, want %x", k.Digest, want)
			}
			if k.UserID != "bob" {
				t.Errorf("UserID = %q, want %q", k.UserID, "bob")
			}
		})
	}

	invalid := []struct {
		name   string
		key    string
		userID string
	}{
		{"a digest with a non-hex digit is refused", "sha256:" + bobDigest[:63] + "g", "bob"},
		{"a digest with an odd number of hex digits is refused", "sha256:" + bobDigest[:63], "bob"},
		{"a digest one byte short is refused", "sha256:" + bobDigest[:62], "bob"},
		{"a digest one byte long is refused", "sha256:" + bobDigest + "00", "bob"},
		{"the sha256 prefix with no digest is refused", "sha256:", "bob"},
		{"an empty key is refused", "", "bob"},
		{"an empty user id is refused", bobKey, ""},
		{"an empty user id is refused for a digest too", "sha256:" + bobDigest, ""},
		{"a user id with a control character is refused", bobKey, "eve\u0001"},
		{"a user id with a newline is refused", bobKey, "eve\nroot"},
		{"a user id with a zero-width space is refused", bobKey, "b\u200bob"},
		{"a user id with a right-to-left override is refused", bobKey, "bob\u202egpj.exe"},
		{"a user id of invalid UTF-8 is refused", bobKey, "bob\xff"},
		{"a user id longer than 256 bytes is refused", bobKey, strings.Repeat("b", 257)},
		{"a user id with a control character is refused for a digest too", "sha256:" + bobDigest, "eve\u0001"},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			k, err := auth.ParseAPIKey(tc.key, tc.userID)
			if err == nil {
				t.Fatalf("ParseAPIKey(%q, %q) = %+v, want an error", tc.key, tc.userID, k)
			}
			if k != (auth.APIKey{}) {
				t.Errorf("ParseAPIKey returned %+v with its error, want the zero APIKey", k)
			}
		})
	}
}

// aliceOtherKey is a second key of alice's.
const aliceOtherKey = "alice-laptop-key"

func TestAuthenticate(t *testing.T) {
	keys := []auth.APIKey{
		mustParseAPIKey(t, aliceKey, "alice"),
		mustParseAPIKey(t, "sha256:"+digestHex(bobKey), "bob"),
		mustParseAPIKey(t, aliceOtherKey, "alice"),
	}
	defaultHeader := &auth.Authenticator{APIKeyHeader: "X-API-Key", APIKeys: keys}
	customHeader := &auth.Authenticator{APIKeyHeader: "X-Posts-Token", APIKeys: keys}

	accepted := []struct {
		name   string
		authn  *auth.Authenticator
		header http.Header
		want   auth.Identity
	}{
		{
			name:  "a request without credentials is anonymous",
			authn: defaultHeader,
			want:  auth.Identity{},
		},
		{
			name:   "a key configured in clear identifies its user",
			authn:  defaultHeader,
			header: http.Header{"X-Api-Key": {aliceKey}},
			want:   auth.Identity{UserID: "alice", Method: "api_key"},
		},
		{
			name:   "a key configured as a sha256 digest matches the clear key the client sends",
			authn:  defaultHeader,
			header: http.Header{"X-Api-Key": {bobKey}},
			want:   auth.Identity{UserID: "bob", Method: "api_key"},
		},
		{
			name:   "a custom header name is honoured",
			authn:  customHeader,
			header: http.Header{"X-Posts-Token": {aliceKey}},
			want:   auth.Identity{UserID: "alice", Method: "api_key"},
		},
		{
			name:   "the default header is ignored when a custom one is configured",
			authn:  customHeader,
			header: http.Header{"X-Api-Key": {aliceKey}},
			want:   auth.Identity{},
		},
		{
			name:   "a Basic authorization is left to other handlers and the request stays anonymous",
			authn:  defaultHeader,
			header: http.Header{"Authorization": {"Basic YWxpY2U6c2VjcmV0"}},
			want:   auth.Identity{},
		},
		{
			name:   "a Basic authorization does not stop an API key from identifying its user",
			authn:  defaultHeader,
			header: http.Header{"Authorization": {"Basic YWxpY2U6c2VjcmV0"}, "X-Api-Key": {bobKey}},
			want:   auth.Identity{UserID: "bob", Method: "api_key"},
		},
		{
			name:   "a scheme that only starts with Bearer is another scheme, left to other handlers",
			authn:  defaultHeader,
			header: http.Header{"Authorization": {"BearerToken abc"}},
			want:   auth.Identity{},
		},
		{
			name:   "a scheme that only starts with ApiKey is another scheme, left to other handlers",
			authn:  defaultHeader,
			header: http.Header{"Authorization": {"ApiKeys " + aliceKey}},
			want:   auth.Identity{},
		},
		{
			name:   "an API key in an ApiKey authorization identifies its user",
			authn:  defaultHeader,
			header: http.Header{"Authorization": {"ApiKey " + aliceKey}},
			want:   auth.Identity{UserID: "alice", Method: "api_key"},
		},
		{
			name:   "the ApiKey scheme is recognised whatever its case",
			authn:  defaultHeader,
			header: http.Header{"Authorization": {"aPIKEY " + bobKey}},
			want:   auth.Identity{UserID: "bob", Method: "api_key"},
		},
		{
			name:   "an ApiKey authorization is read whatever the API key header is called",
			authn:  customHeader,
			header: http.Header{"Authorization": {"ApiKey " + bobKey}},
			want:   auth.Identity{UserID: "bob", Method: "api_key"},
		},
		{
			name:   "the same key in an ApiKey authorization and in the key header is accepted",
			authn:  defaultHeader,
			header: http.Header{"Authorization": {"ApiKey " + aliceKey}, "X-Api-Key": {aliceKey}},
			want:   auth.Identity{UserID: "alice", Method: "api_key"},
		},
		{
			name:   "two keys of the same user, one in an ApiKey authorization and one in the key header, are accepted",
			authn:  defaultHeader,
			header: http.Header{"Authorization": {"ApiKey " + aliceOtherKey}, "X-Api-Key": {aliceKey}},
			want:   auth.Identity{UserID: "alice", Method: "api_key"},
		},
		{
			name:   "an ApiKey authorization is found behind a Basic authorization in another header",
			authn:  defaultHeader,
			header: http.Header{"Authorization": {"Basic YWxpY2U6c2VjcmV0", "ApiKey " + aliceKey}},
			want:   auth.Identity{UserID: "alice", Method: "api_key"},
		},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.authn.Authenticate(newRequest(tc.header))
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Authenticate = %+v, want %+v", got, tc.want)
			}
		})
	}

	refused := []struct {
		name       string
		authn      *auth.Authenticator
		header     http.Header
		wantStatus int
		wantCode   string
	}{
		{
			name:       "an unknown key is an invalid token",
			authn:      defaultHeader,
			header:     http.Header{"X-Api-Key": {"not-a-configured-key"}},
			wantStatus: http.StatusUnauthorized,
			wantCode:   "invalid_token",
		},
		{
			name:       "the configured digest sent as the key is an invalid token",
			authn:      defaultHeader,
			header:     http.Header{"X-Api-Key": {"sha256:" + digestHex(bobKey)}},
			wantStatus: http.StatusUnauthorized,
			wantCode:   "invalid_token",
		},
		{
			name:       "a wrong key in the custom header is refused even when the default header holds a valid key",
			authn:      customHeader,
			header:     http.Header{"X-Api-Key": {aliceKey}, "X-Posts-Token": {"wrong"}},
			wantStatus: http.StatusUnauthorized,
			wantCode:   "invalid_token",
		},
		{
			name:       "the key header given twice is an invalid request",
			authn:      defaultHeader,
			header:     http.Header{"X-Api-Key": {aliceKey, aliceKey}},
			wantStatus: http.StatusBadRequest,
			wantCode:   "invalid_request",
		},
		{
			name:       "an empty key header is an invalid request",
			authn:      defaultHeader,
			header:     http.Header{"X-Api-Key": {""}},
			wantStatus: http.StatusBadRequest,
			wantCode:   "invalid_request",
		},
		{
			name:       "a bearer token is an invalid token",
			authn:      defaultHeader,
			header:     http.Header{"Authorization": {"Bearer x"}},
			wantStatus: http.StatusUnauthorized,
			wantCode:   "invalid_token",
		},
		{
			name:       "a bearer token is refused whatever the case of the scheme",
			authn:      defaultHeader,
			header:     http.Header{"Authorization": {"bEaReR x"}},
			wantStatus: http.StatusUnauthorized,
			wantCode:   "invalid_token",
		},
		{
			name:       "a bearer token in a second Authorization header is refused",
			authn:      defaultHeader,
			header:     http.Header{"Authorization": {"Basic YTpi", "Bearer x"}},
			wantStatus: http.StatusUnauthorized,
			wantCode:   "invalid_token",
		},
		{
			name:       "a bearer token is refused even alongside a valid API key",
			authn:      defaultHeader,
			header:     http.Header{"Authorization": {"Bearer x"}, "X-Api-Key": {aliceKey}},
			wantStatus: http.StatusUnauthorized,
			wantCode:   "invalid_token",
		},
		{
			name:       "an unknown key in an ApiKey authorization is an invalid token",
			authn:      defaultHeader,
			header:     http.Header{"Authorization": {"ApiKey not-a-configured-key"}},
			wantStatus: http.StatusUnauthorized,
			wantCode:   "invalid_token",
		},
		{
			name:       "an unknown key in an ApiKey authorization is refused even alongside a valid key header",
			authn:      defaultHeader,
			header:     http.Header{"Authorization": {"ApiKey not-a-configured-key"}, "X-Api-Key": {aliceKey}},
			wantStatus: http.StatusUnauthorized,
			wantCode:   "invalid_token",
		},
		{
			name:       "an unknown key in the key header is refused even alongside a valid ApiKey authorization",
			authn:      defaultHeader,
			header:     http.Header{"Authorization": {"ApiKey " + aliceKey}, "X-Api-Key": {"not-a-configured-key"}},
			wantStatus: http.StatusUnauthorized,
			wantCode:   "invalid_token",
		},
		{
			name:       "keys of different users in an ApiKey authorization and in the key header are an invalid request",
			authn:      defaultHeader,
			header:     http.Header{"Authorization": {"ApiKey " + aliceKey}, "X-Api-Key": {bobKey}},
			wantStatus: http.StatusBadRequest,
			wantCode:   "invalid_request",
		},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.authn.Authenticate(newRequest(tc.header))
			var authErr *auth.Error
			if !errors.As(err, &authErr) {
				t.Fatalf("Authenticate = %+v, %v; want an *auth.Error", got, err)
			}
			if status := errcode.Of(err).Code.Status; status != tc.wantStatus || authErr.Code != tc.wantCode {
				t.Errorf("error = {Status: %d, Code: %q}, want {Status: %d, Code: %q}",
					status, authErr.Code, tc.wantStatus, tc.wantCode)
			}
			if !got.Anonymous() {
				t.Errorf("Authenticate returned %+v with its error, want the anonymous Identity", got)
			}
			for _, secret := range []string{aliceKey, bobKey} {
				if strings.Contains(authErr.Description, secret) {
					t.Errorf("the description %q contains a key", authErr.Description)
				}
			}
		})
	}
}

// TestAKeyHeaderIsReadOnlyWhenConfigured: with no APIKeyHeader, a key is read from
// "Authorization: ApiKey <key>" alone, which Caddy's access log redacts; a request, or a
// connection_init payload, whose only credential is X-API-Key, which the log writes in clear,
// is refused with invalid_request saying where the key goes, never served as anonymous.
func TestAKeyHeaderIsReadOnlyWhenConfigured(t *testing.T) {
	keys := []auth.APIKey{mustParseAPIKey(t, aliceKey, "alice")}
	none := &auth.Authenticator{APIKeys: keys}
	configured := &auth.Authenticator{APIKeyHeader: "X-Api-Key", APIKeys: keys}
	for _, tt := range []struct {
		name    string
		a       *auth.Authenticator
		creds   auth.Credentials
		user    string // "" for a refusal
		refusal string
	}{
		{"a key in Authorization: ApiKey is read with no key header", none, auth.Credentials{Header: http.Header{"Authorization": {"ApiKey " + aliceKey}}}, "alice", ""},
		{"a key in X-API-Key alone is refused with no key header", none, auth.Credentials{Header: http.Header{"X-Api-Key": {aliceKey}}}, "", "Authorization: ApiKey <key>"},
		{"an unknown key in X-API-Key alone is refused the same way", none, auth.Credentials{Header: http.Header{"X-Api-Key": {"not-a-key"}}}, "", "Authorization: ApiKey <key>"},
		{"X-API-Key beside a key in Authorization is not read", none, auth.Credentials{Header: http.Header{"Authorization": {"ApiKey " + aliceKey}, "X-Api-Key": {"not-a-key"}}}, "alice", ""},
		{"a key in a connection_init payload's X-API-Key alone is refused with no key header", none, auth.Credentials{Init: []byte(`{"x-api-key": "` + aliceKey + `"}`)}, "", "Authorization: ApiKey <key>"},
		{"a key in a connection_init payload's Authorization is read with no key header", none, auth.Credentials{Init: []byte(`{"Authorization": "ApiKey ` + aliceKey + `"}`)}, "alice", ""},
		{"a key in X-API-Key is read when it is the key header", configured, auth.Credentials{Header: http.Header{"X-Api-Key": {aliceKey}}}, "alice", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id, err := tt.a.Identify(t.Context(), tt.creds)
			if tt.refusal == "" {
				if err != nil || id.UserID != tt.user {
					t.Errorf("Identify = %+v, %v; want %s", id, err, tt.user)
				}
				return
			}
			var refused *auth.Error
			if !errors.As(err, &refused) || refused.Code != auth.CodeInvalidRequest || !strings.Contains(refused.Description, tt.refusal) {
				t.Errorf("Identify = %+v, %v; want invalid_request naming %s", id, err, tt.refusal)
			}
			if e := errcode.Of(err); e.Code.Status != http.StatusBadRequest {
				t.Errorf("status %d; want 400", e.Code.Status)
			}
		})
	}
}
