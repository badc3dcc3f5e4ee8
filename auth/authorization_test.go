// Tests of the Authorization header: malformed values, and the challenge of a refused request.

package auth_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
)

// TestAuthenticateRefusesMalformedAuthorization: a value that names the Bearer or ApiKey scheme
// must be exactly the scheme, one space and the credential; anything else is a 400 rather than
// a request silently served as anonymous.
func TestAuthenticateRefusesMalformedAuthorization(t *testing.T) {
	authn := &auth.Authenticator{APIKeyHeader: "X-API-Key", APIKeys: []auth.APIKey{mustParseAPIKey(t, aliceKey, "alice")}}
	const token = "eyJhbGciOi.eyJzdWIi.c2lnbmF0dXJl" // the credential must not come back in a description
	tests := []struct {
		name  string
		value []string
	}{
		{"a TAB between Bearer and the token is an invalid request", []string{"Bearer\t" + token}},
		{"two spaces between Bearer and the token are an invalid request", []string{"Bearer  " + token}},
		{"a space and a TAB between Bearer and the token are an invalid request", []string{"Bearer \t" + token}},
		{"Bearer alone is an invalid request", []string{"Bearer"}},
		{"Bearer and a space alone is an invalid request", []string{"Bearer "}},
		{"Bearer and a TAB alone is an invalid request", []string{"Bearer\t"}},
		{"a space after the token is an invalid request", []string{"Bearer " + token + " "}},
		{"a TAB after the token is an invalid request", []string{"Bearer " + token + "\t"}},
		{"a space before the scheme is an invalid request", []string{" Bearer " + token}},
		{"a comma straight after Bearer is an invalid request", []string{"Bearer," + token}},
		{"an equals sign straight after Bearer is an invalid request", []string{"Bearer=" + token}},
		{"a no-break space after Bearer is an invalid request", []string{"Bearer\u00a0" + token}},
		{"a lower-case bearer with a TAB is an invalid request", []string{"bearer\t" + token}},
		{"a TAB between ApiKey and the key is an invalid request", []string{"ApiKey\t" + aliceKey}},
		{"two spaces between ApiKey and the key are an invalid request", []string{"ApiKey  " + aliceKey}},
		{"ApiKey alone is an invalid request", []string{"ApiKey"}},
		{"ApiKey and a space alone is an invalid request", []string{"ApiKey "}},
		{"a space after the key is an invalid request", []string{"ApiKey " + aliceKey + " "}},
		{"a space before the ApiKey scheme is an invalid request", []string{"\tApiKey " + aliceKey}},
		{"two ApiKey authorizations are an invalid request, even of the same key", []string{"ApiKey " + aliceKey, "ApiKey " + aliceKey}},
		{"two bearer authorizations are an invalid request", []string{"Bearer " + token, "bearer " + token}},
		{"a malformed bearer authorization behind a Basic one is an invalid request", []string{"Basic YTpi", "Bearer\t" + token}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := authn.Authenticate(newRequest(http.Header{"Authorization": tc.value}))
			var authErr *auth.Error
			if !errors.As(err, &authErr) {
				t.Fatalf("Authenticate = %+v, %v; want an *auth.Error", got, err)
			}
			if status := errcode.Of(err).Code.Status; status != http.StatusBadRequest || authErr.Code != "invalid_request" {
				t.Errorf("error = {Status: %d, Code: %q, Description: %q}, want {Status: 400, Code: \"invalid_request\"}",
					status, authErr.Code, authErr.Description)
			}
			if !got.Anonymous() {
				t.Errorf("Authenticate returned %+v with its error, want the anonymous Identity", got)
			}
			for _, secret := range []string{token, aliceKey, "eyJhbGciOi", "c2lnbmF0dXJl"} {
				if strings.Contains(authErr.Description, secret) {
					t.Errorf("the description %q echoes the credential", authErr.Description)
				}
			}
		})
	}
}

func TestErrorChallenge(t *testing.T) {
	tests := []struct {
		name string
		err  *auth.Error
		want string
	}{
		{
			name: "an invalid token names the realm, the code and the description",
			err:  &auth.Error{Code: "invalid_token", Description: "unknown API key"},
			want: `Bearer realm="posts", error="invalid_token", error_description="unknown API key"`,
		},
		{
			name: "an invalid request names its own code",
			err:  &auth.Error{Code: "invalid_request", Description: "the X-Api-Key header is empty"},
			want: `Bearer realm="posts", error="invalid_request", error_description="the X-Api-Key header is empty"`,
		},
		{
			name: "characters RFC 6750 does not allow in a description are replaced so the header stays well formed",
			err:  &auth.Error{Code: "invalid_token", Description: `say "hi" \ né` + "\t"},
			want: `Bearer realm="posts", error="invalid_token", error_description="say 'hi' / n???"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Challenge(); got != tc.want {
				t.Errorf("Challenge() = %s, want %s", got, tc.want)
			}
			if got := tc.err.Error(); got != tc.err.Description {
				t.Errorf("Error() = %q, want the description %q", got, tc.err.Description)
			}
		})
	}

	t.Run("the challenge of a refused request is the one Authenticate's error gives", func(t *testing.T) {
		a := &auth.Authenticator{APIKeyHeader: "X-API-Key"}
		_, err := a.Authenticate(newRequest(http.Header{"Authorization": {"Bearer x"}}))
		var authErr *auth.Error
		if !errors.As(err, &authErr) {
			t.Fatalf("Authenticate error = %v, want an *auth.Error", err)
		}
		want := auth.Challenge + `, error="invalid_token", error_description="` + authErr.Description + `"`
		if got := authErr.Challenge(); got != want {
			t.Errorf("Challenge() = %s, want %s", got, want)
		}
	})
}
