package auth_test

import (
	"context"
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

// TestIdentifyWithConnectionInit: a WebSocket's caller is named by the credentials of its upgrade
// request and of its connection_init payload together. Every one of them must be good, and they
// must all name one user.
func TestIdentifyWithConnectionInit(t *testing.T) {
	p := newIDP(t)
	aliceAPIKey := mustParseAPIKey(t, aliceKey, "alice")
	aliceAPIKey.Name, aliceAPIKey.Email = "Alice (API key)", "alice@keys.example"
	authn := &auth.Authenticator{
		Tokens:       newTokens(t, tokenConfig(p.jwks...)),
		APIKeyHeader: "X-Api-Key",
		APIKeys:      []auth.APIKey{aliceAPIKey, mustParseAPIKey(t, bobKey, "bob")},
	}

	at := time.Now()
	later, sooner := at.Add(time.Hour), at.Add(10*time.Minute)
	aliceToken := p.rsa.sign(t, withClaims(goodClaimsAt(at), map[string]any{"exp": later.Unix()}))
	aliceSoonerToken := p.ec.sign(t, withClaims(goodClaimsAt(at), map[string]any{"exp": sooner.Unix(), "name": absent, "email": absent}))
	bobToken := p.ec.sign(t, withClaims(goodClaimsAt(at), map[string]any{"sub": "bob", "name": absent, "email": absent}))
	expired := p.rsa.sign(t, withClaims(goodClaimsAt(at), map[string]any{"exp": at.Add(-time.Hour).Unix()}))
	// As Verify accepts them: exp plus the leeway of 30s.
	laterExpiry, soonerExpiry := time.Unix(later.Unix(), 0).Add(30*time.Second), time.Unix(sooner.Unix(), 0).Add(30*time.Second)

	bearerHeader := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }
	payload := func(members map[string]string) json.RawMessage {
		b, err := json.Marshal(members)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	aliceJWT := auth.Identity{UserID: "alice", Method: auth.MethodJWT, Name: "Alice Liddell", Email: "alice@example.com"}
	aliceByKey := auth.Identity{UserID: "alice", Method: auth.MethodAPIKey, Name: "Alice (API key)", Email: "alice@keys.example"}

	accepted := []struct {
		name  string
		creds auth.Credentials
		want  auth.Identity // Claims aside
	}{
		{
			name:  "a payload's bearer token alone identifies its user",
			creds: auth.Credentials{Init: payload(map[string]string{"Authorization": "Bearer " + aliceToken})},
			want:  withExpiry(aliceJWT, laterExpiry),
		},
		{
			name:  "a payload's API key alone identifies its user",
			creds: auth.Credentials{Init: payload(map[string]string{"x-api-key": aliceKey})},
			want:  aliceByKey,
		},
		{
			name:  "a payload's ApiKey authorization alone identifies its user",
			creds: auth.Credentials{Init: payload(map[string]string{"authorization": "ApiKey " + aliceKey})},
			want:  aliceByKey,
		},
		{
			name:  "the upgrade's token alone identifies its user when the payload has no credentials",
			creds: auth.Credentials{Header: bearerHeader(aliceToken), Init: json.RawMessage(`{"locale":"fr"}`)},
			want:  withExpiry(aliceJWT, laterExpiry),
		},
		{
			name:  "the upgrade's token alone identifies its user when the payload is null",
			creds: auth.Credentials{Header: bearerHeader(aliceToken), Init: json.RawMessage(`null`)},
			want:  withExpiry(aliceJWT, laterExpiry),
		},
		{
			name:  "the upstream user alone is the caller when the payload has no credentials",
			creds: auth.Credentials{Upstream: "alice", Init: json.RawMessage(`{}`)},
			want:  auth.Identity{UserID: "alice", Method: auth.MethodCaddy},
		},
		{
			name:  "neither the upgrade nor the payload having credentials is anonymous",
			creds: auth.Credentials{Header: http.Header{}, Init: json.RawMessage(`{}`)},
			want:  auth.Identity{},
		},
		{
			name:  "the same token in the upgrade and in the payload is accepted",
			creds: auth.Credentials{Header: bearerHeader(aliceToken), Init: payload(map[string]string{"Authorization": "Bearer " + aliceToken})},
			want:  withExpiry(aliceJWT, laterExpiry),
		},
		{
			name:  "the upgrade's API key and the payload's token of the same user are accepted, the payload's first",
			creds: auth.Credentials{Header: http.Header{"X-Api-Key": {aliceKey}}, Init: payload(map[string]string{"Authorization": "Bearer " + aliceToken})},
			want:  withExpiry(aliceJWT, laterExpiry),
		},
		{
			name:  "the upgrade's token and the payload's API key of the same user are accepted, expiring with the token",
			creds: auth.Credentials{Header: bearerHeader(aliceToken), Init: payload(map[string]string{"X-API-KEY": aliceKey})},
			want:  withExpiry(aliceByKey, laterExpiry),
		},
		{
			name:  "two tokens of the same user expire with the sooner, the payload's profile filled in from the upgrade's",
			creds: auth.Credentials{Header: bearerHeader(aliceToken), Init: payload(map[string]string{"Authorization": "Bearer " + aliceSoonerToken})},
			want:  withExpiry(aliceJWT, soonerExpiry),
		},
		{
			name:  "two tokens of the same user expire with the sooner, the upgrade's",
			creds: auth.Credentials{Header: bearerHeader(aliceSoonerToken), Init: payload(map[string]string{"Authorization": "Bearer " + aliceToken})},
			want:  withExpiry(aliceJWT, soonerExpiry),
		},
		{
			name:  "the upstream user and the payload's API key naming the same user are accepted",
			creds: auth.Credentials{Upstream: "alice", Init: payload(map[string]string{"x-api-key": aliceKey})},
			want:  aliceByKey,
		},
		{
			name:  "a payload's token and API key of the same user are accepted",
			creds: auth.Credentials{Init: payload(map[string]string{"Authorization": "Bearer " + aliceSoonerToken, "X-Api-Key": aliceKey})},
			want:  withExpiry(auth.Identity{UserID: "alice", Method: auth.MethodJWT, Name: "Alice (API key)", Email: "alice@keys.example"}, soonerExpiry),
		},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			got, err := authn.Identify(context.Background(), tc.creds)
			if err != nil {
				t.Fatalf("Identify: %v", err)
			}
			if (got.Method == auth.MethodJWT) != (got.Claims != nil) {
				t.Errorf("Method %q with Claims %v, want claims exactly for a token's identity", got.Method, got.Claims)
			}
			got.Claims = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Identify = %+v, want %+v", got, tc.want)
			}
		})
	}

	const (
		upgradeAndInit = "the credentials of the upgrade request and of connection_init name different users"
		withinInit     = "the credentials of the connection_init payload name different users"
		withinUpgrade  = "the request's credentials name different users"
	)
	refused := []struct {
		name        string
		creds       auth.Credentials
		status      int
		description string // a part of it
	}{
		{
			name:        "a payload's token of another user than the upgrade's API key is refused",
			creds:       auth.Credentials{Header: http.Header{"X-Api-Key": {aliceKey}}, Init: payload(map[string]string{"Authorization": "Bearer " + bobToken})},
			status:      http.StatusBadRequest,
			description: upgradeAndInit,
		},
		{
			name:        "a payload's API key of another user than the upgrade's token is refused",
			creds:       auth.Credentials{Header: bearerHeader(aliceToken), Init: payload(map[string]string{"X-Api-Key": bobKey})},
			status:      http.StatusBadRequest,
			description: upgradeAndInit,
		},
		{
			name:        "a payload naming another user than the upstream handler is refused",
			creds:       auth.Credentials{Upstream: "alice", Init: payload(map[string]string{"Authorization": "ApiKey " + bobKey})},
			status:      http.StatusBadRequest,
			description: upgradeAndInit,
		},
		{
			name:        "a payload whose token and API key name different users is refused",
			creds:       auth.Credentials{Init: payload(map[string]string{"Authorization": "Bearer " + aliceToken, "X-Api-Key": bobKey})},
			status:      http.StatusBadRequest,
			description: withinInit,
		},
		{
			name:        "an upgrade whose token and API key name different users is refused whatever the payload",
			creds:       auth.Credentials{Header: http.Header{"Authorization": {"Bearer " + aliceToken}, "X-Api-Key": {bobKey}}, Init: payload(map[string]string{"X-Api-Key": aliceKey})},
			status:      http.StatusBadRequest,
			description: withinUpgrade,
		},
		{
			name:        "a payload's unknown API key is refused even though the upgrade's token is good",
			creds:       auth.Credentials{Header: bearerHeader(aliceToken), Init: payload(map[string]string{"X-Api-Key": "not-a-key"})},
			status:      http.StatusUnauthorized,
			description: "unknown API key",
		},
		{
			name:        "a payload's expired token is refused even though the upgrade's API key is good",
			creds:       auth.Credentials{Header: http.Header{"X-Api-Key": {aliceKey}}, Init: payload(map[string]string{"Authorization": "Bearer " + expired})},
			status:      http.StatusUnauthorized,
			description: "expired",
		},
		{
			name:        "an upgrade's expired token is refused even though the payload's API key is good",
			creds:       auth.Credentials{Header: bearerHeader(expired), Init: payload(map[string]string{"X-Api-Key": aliceKey})},
			status:      http.StatusUnauthorized,
			description: "expired",
		},
		{
			name:        "a payload's malformed bearer authorization is refused even though the upgrade's token is good",
			creds:       auth.Credentials{Header: bearerHeader(aliceToken), Init: payload(map[string]string{"Authorization": "Bearer  " + aliceToken})},
			status:      http.StatusBadRequest,
			description: "exactly one space",
		},
		{
			name:        "a payload's empty API key is refused even though the upgrade's token is good",
			creds:       auth.Credentials{Header: bearerHeader(aliceToken), Init: payload(map[string]string{"x-api-key": ""})},
			status:      http.StatusBadRequest,
			description: "empty",
		},
		{
			name:        "a payload giving Authorization twice in different cases is refused even though the upgrade's token is good",
			creds:       auth.Credentials{Header: bearerHeader(aliceToken), Init: json.RawMessage(`{"authorization":"Bearer ` + aliceToken + `","Authorization":"Bearer ` + bobToken + `"}`)},
			status:      http.StatusBadRequest,
			description: "more than once",
		},
		{
			name:        "a payload giving the API key twice in the same case is refused even though the upgrade's key is good",
			creds:       auth.Credentials{Header: http.Header{"X-Api-Key": {aliceKey}}, Init: json.RawMessage(`{"X-Api-Key":"` + aliceKey + `","X-Api-Key":"` + aliceKey + `"}`)},
			status:      http.StatusBadRequest,
			description: "more than once",
		},
		{
			name:        "a payload whose Authorization is no string is refused even though the upgrade's token is good",
			creds:       auth.Credentials{Header: bearerHeader(aliceToken), Init: json.RawMessage(`{"Authorization":["Bearer ` + aliceToken + `"]}`)},
			status:      http.StatusBadRequest,
			description: "must be a string",
		},
		{
			name:        "a payload that is not JSON is refused even though the upgrade's token is good",
			creds:       auth.Credentials{Header: bearerHeader(aliceToken), Init: json.RawMessage(`{"Authorization":"Bearer ` + aliceToken + `"`)},
			status:      http.StatusBadRequest,
			description: "not valid JSON",
		},
		{
			name:        "a payload that is no object is refused even though the upgrade's token is good",
			creds:       auth.Credentials{Header: bearerHeader(aliceToken), Init: json.RawMessage(`["Bearer ` + aliceToken + `"]`)},
			status:      http.StatusBadRequest,
			description: "must be a JSON object",
		},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			got, err := authn.Identify(context.Background(), tc.creds)
			authErr, ok := errors.AsType[*auth.Error](err)
			if !ok {
				t.Fatalf("Identify = %+v, %v; want an *auth.Error", got, err)
			}
			code := map[int]string{http.StatusBadRequest: "invalid_request", http.StatusUnauthorized: "invalid_token"}[tc.status]
			if status := errcode.Of(err).Code.Status; status != tc.status || authErr.Code != code {
				t.Errorf("error = {Status: %d, Code: %q}, want {Status: %d, Code: %q}", status, authErr.Code, tc.status, code)
			}
			if !strings.Contains(authErr.Description, tc.description) {
				t.Errorf("description %q, want it to say %q", authErr.Description, tc.description)
			}
			if !got.Anonymous() {
				t.Errorf("Identify returned %+v with its error, want the anonymous Identity", got)
			}
			for _, secret := range []string{aliceToken, bobToken, expired, aliceKey, bobKey} {
				if strings.Contains(authErr.Description, secret) {
					t.Errorf("the description %q echoes a credential", authErr.Description)
				}
			}
		})
	}
}

// withExpiry is id expiring at expires.
func withExpiry(id auth.Identity, expires time.Time) auth.Identity {
	id.Expires = expires
	return id
}

func TestCredentialsOf(t *testing.T) {
	r := newRequest(http.Header{"X-Api-Key": {aliceKey}})
	t.Run("the credentials of a request are its headers, not a copy", func(t *testing.T) {
		c := (&auth.Authenticator{APIKeyHeader: "X-Api-Key"}).CredentialsOf(r)
		if reflect.ValueOf(c.Header).UnsafePointer() != reflect.ValueOf(r.Header).UnsafePointer() {
			t.Error("Header is not the request's header")
		}
		if c.Upstream != "" || c.Init != nil {
			t.Errorf("CredentialsOf = %+v, want no upstream user and no payload", c)
		}
	})
	t.Run("the user of an earlier handler is read when Upstream is set", func(t *testing.T) {
		authn := &auth.Authenticator{APIKeyHeader: "X-Api-Key", Upstream: func(got *http.Request) string {
			if got != r {
				t.Error("Upstream was given another request")
			}
			return "alice"
		}}
		if c := authn.CredentialsOf(r); c.Upstream != "alice" {
			t.Errorf("Upstream = %q, want alice", c.Upstream)
		}
	})
}
