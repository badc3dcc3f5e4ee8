package auth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
)

// fuzzDescriptions maps the descriptions the seeds give to the seed that gave each first.
type fuzzDescriptions map[string]string

// wantRefusal checks the invariants of every refusal: an *Error, invalid_request with 400 or
// invalid_token with 401, a challenge that is a well-formed header value.
func wantRefusal(t *testing.T, err error) *auth.Error {
	t.Helper()
	var authErr *auth.Error
	if !errors.As(err, &authErr) {
		t.Fatalf("error %v (%T) is not an *auth.Error", err, err)
	}
	switch status := errcode.Of(err).Code.Status; {
	case authErr.Code == "invalid_request" && status == http.StatusBadRequest:
	case authErr.Code == "invalid_token" && status == http.StatusUnauthorized:
	default:
		t.Fatalf("error = {Status: %d, Code: %q}, want 400 invalid_request or 401 invalid_token", status, authErr.Code)
	}
	if authErr.Description == "" {
		t.Fatal("the description is empty")
	}
	for _, c := range []byte(authErr.Challenge()) {
		if c < 0x20 || c > 0x7e {
			t.Fatalf("the challenge %q has a byte a header value cannot", authErr.Challenge())
		}
	}
	return authErr
}

// wantNoEcho checks that the description quotes no credential-looking part of the input: no
// run of 8 bytes or more, between separators, with a digit or one of "+/=~" (characters the
// fixed descriptions never have, so that their own words are not taken for an echo).
func wantNoEcho(t *testing.T, description, input string) {
	t.Helper()
	parts := strings.FieldsFunc(input, func(r rune) bool { return strings.ContainsRune(" \t\n.,:\"'{}[]", r) })
	for _, part := range append(parts, input) {
		if len(part) >= 8 && strings.ContainsAny(part, "0123456789+/=~") && strings.Contains(description, part) {
			t.Fatalf("the description %q quotes the input", description)
		}
	}
}

// FuzzAuthorization authenticates requests whose Authorization headers (the input, one value a
// line) are anything, against API keys and bearer tokens verified with a real JWKS. Every
// refusal must be an *Error with a code and a 400 or 401 that quotes nothing of the input; a
// 400 (the syntax of the header) must give one of the descriptions the seeds give, so that each
// malformed shape has its seed and a description that depends on the input shows up.
func FuzzAuthorization(f *testing.F) {
	rsaKey, ecKey, edKey := newRSAKey(f, 0, "rsa-1"), newECKey(f, "ec-1"), newEdKey(f, "ed-1")
	srv := newKeyServer(f, rsaKey, ecKey, edKey)
	jwks := auth.NewJWKS(srv.URL, time.Hour, srv.Client(), zap.NewNop()) // no test logger: fetches may outlive a fuzz input
	f.Cleanup(jwks.Close)
	jwks.Start()
	waitFetched(f, jwks)
	tokens := newTokens(f, tokenConfig(jwks))
	authn := &auth.Authenticator{
		Tokens:       tokens,
		APIKeyHeader: "X-Api-Key",
		APIKeys:      []auth.APIKey{mustParseAPIKey(f, aliceKey, "alice"), mustParseAPIKey(f, bobKey, "bob")},
	}

	good := rsaKey.sign(f, goodClaims())
	noKID := ecKey.withKID("").sign(f, goodClaims())
	seeds := []string{
		"",
		"Basic YWxpY2U6c2VjcmV0",
		"Bearer " + good,
		"bEaReR " + good,
		"Bearer " + noKID,
		"ApiKey " + aliceKey,
		"apikey " + bobKey,
		"Digest username=\"alice\"",
		"BearerToken abc123456",
		"ApiKeys abc123456",
		// Bearer, malformed.
		"Bearer\t" + good,
		"Bearer  " + good,
		"Bearer \t" + good,
		"Bearer",
		"Bearer ",
		"Bearer\t",
		"Bearer    ",
		"Bearer " + good + " ",
		"Bearer " + good + "\t",
		" Bearer " + good,
		"\tBearer " + good,
		"Bearer," + good,
		"Bearer=" + good,
		"Bearer\u00a0" + good,
		"Bearer \"" + good + "\"",
		"Bearer " + good + " extra",
		"Bearer abc=def",
		"Bearer abc,def123",
		"Bearer " + good + "\nBearer " + good,
		"Basic YTpi\nBearer\t" + good,
		// ApiKey, malformed, unknown, or naming another user.
		"ApiKey\t" + aliceKey,
		"ApiKey  " + aliceKey,
		"ApiKey",
		"ApiKey ",
		"ApiKey " + aliceKey + " ",
		"ApiKey " + aliceKey + "\t",
		" ApiKey " + aliceKey,
		"ApiKey " + aliceKey + "\nApiKey " + aliceKey,
		"ApiKey not-a-key-0123456789",
		"Bearer " + good + "\nApiKey " + bobKey,
		"Bearer " + good + "\nApiKey " + aliceKey,
		// Tokens refused.
		"Bearer not-a-jwt-0123456789",
		"Bearer abc.def.ghi",
		"Bearer " + good[:len(good)-4],
		"Bearer " + newRSAKey(f, 2, "rsa-unknown").sign(f, goodClaims()),
		"Bearer " + rsaKey.signWithHeader(f, goodClaims(), map[string]any{"crit": []string{}}),
		"Bearer " + rsaKey.withKID("").signWithHeader(f, goodClaims(), map[string]any{"crit": "b64"}),
		"Bearer " + rsaKey.signWithHeader(f, goodClaims(), map[string]any{"kid": 7}),
		"Bearer " + rsaKey.withMethod(jwt.SigningMethodPS256).sign(f, goodClaims()),
		"Bearer " + rsaKey.withKID(ecKey.kid).sign(f, goodClaims()),
		"Bearer " + rsaKey.sign(f, withClaims(goodClaims(), map[string]any{"sub": "eve\u0001"})),
		"Bearer " + rsaKey.sign(f, withClaims(goodClaims(), map[string]any{"exp": time.Now().Add(-time.Hour).Unix()})),
		"Bearer " + testKey{kid: rsaKey.kid, method: jwt.SigningMethodHS256, private: []byte("secret")}.sign(f, goodClaims()),
	}
	syntax := fuzzDescriptions{} // the descriptions of 400s
	for _, seed := range seeds {
		f.Add(seed)
		if _, err := authn.Authenticate(authorizationRequest(seed)); err != nil {
			var authErr *auth.Error
			if errors.As(err, &authErr) && authErr.Code == "invalid_request" {
				if _, ok := syntax[authErr.Description]; !ok {
					syntax[authErr.Description] = seed
				}
			}
		}
	}

	f.Fuzz(func(t *testing.T, header string) {
		id, err := authn.Authenticate(authorizationRequest(header))
		if err == nil {
			if !id.Anonymous() {
				if verr := auth.ValidUserID(id.UserID); verr != nil {
					t.Fatalf("Authenticate accepted a user id that ValidUserID refuses: %v", verr)
				}
			}
			return
		}
		authErr := wantRefusal(t, err)
		if !id.Anonymous() {
			t.Fatalf("Authenticate returned %+v with its error, want the anonymous Identity", id)
		}
		if _, ok := syntax[authErr.Description]; authErr.Code == "invalid_request" && !ok {
			t.Fatalf("the invalid request description %q is given by no seed: add one, or make it a fixed sentence", authErr.Description)
		}
		wantNoEcho(t, authErr.Description, header)
	})
}

// authorizationRequest is a request with one Authorization header per line of header.
func authorizationRequest(header string) *http.Request {
	r := newRequest(nil)
	if header != "" {
		r.Header["Authorization"] = strings.Split(header, "\n")
	}
	return r.WithContext(context.Background())
}

// FuzzInitHeaders reads any connection_init payload. Every refusal must be a 400 invalid_request
// with one of the descriptions the seeds give; it must agree with encoding/json on what is JSON
// and what is an object; and what it accepts must be credentials the payload holds as strings.
func FuzzInitHeaders(f *testing.F) {
	const apiKeyHeader = "X-Api-Key"
	seeds := []string{
		"",
		"null",
		" null ",
		"{}",
		`{"Authorization":"Bearer abc"}`,
		`{"authorization":"ApiKey k"}`,
		`{"AUTHORIZATION":"Bearer abc","x-api-key":"k"}`,
		`{"\u0041uthorization":"Bearer abc"}`,
		`{"X-API-\u212Aey":"k","Authoriz\u017fation":"x"}`,
		`{"a":{"Authorization":1,"authorization":[2]},"a":true,"n":1e999,"m":-0.5e-3,"Authorization":"Bearer abc"}`,
		`{"Authorization":""}`,
		`{"Authorization":"Bearer \ud800"}`,
		"{\"Authorization\":\"Bearer \xff\"}",
		// Refused.
		`not json`,
		`{"Authorization":"Bearer abc`,
		`{"Authorization":"Bearer abc"`,
		`{"Authorization":"Bearer abc",}`,
		`{"a":1 "Authorization":"Bearer abc"}`,
		`{}{}`,
		`{} x`,
		`null x`,
		` `,
		`[]`,
		`"Bearer abc"`,
		`42`,
		`000`,
		`[1,`,
		`true`,
		`{"authorization":"a","Authorization":"b"}`,
		`{"Authorization":"a","Authorization":"a"}`,
		`{"Authorization":"a","\u0061uthorization":"b"}`,
		`{"X-API-Key":"a","x-api-key":"b"}`,
		`{"Authorization":1}`,
		`{"Authorization":null}`,
		`{"Authorization":true}`,
		`{"Authorization":{}}`,
		`{"Authorization":["Bearer abc"]}`,
		`{"x-api-key":12345678}`,
		`{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
	}
	descriptions := fuzzDescriptions{}
	for _, seed := range seeds {
		f.Add([]byte(seed))
		if _, err := auth.InitHeaders(json.RawMessage(seed), apiKeyHeader); err != nil {
			var authErr *auth.Error
			if errors.As(err, &authErr) {
				if _, ok := descriptions[authErr.Description]; !ok {
					descriptions[authErr.Description] = seed
				}
			}
		}
	}
	refusalOf := func(payload string) string {
		_, err := auth.InitHeaders(json.RawMessage(payload), apiKeyHeader)
		var authErr *auth.Error
		if !errors.As(err, &authErr) {
			f.Fatalf("InitHeaders(%s) = %v, want an *auth.Error", payload, err)
		}
		return authErr.Description
	}
	notJSON, notObject := refusalOf(`not json`), refusalOf(`[]`)

	f.Fuzz(func(t *testing.T, payload []byte) {
		header, err := auth.InitHeaders(json.RawMessage(payload), apiKeyHeader)
		// encoding/json's verdict; numbers as json.Number, so that 1e999 is valid JSON here too.
		var decoded any
		valid := json.Valid(payload)
		if valid {
			dec := json.NewDecoder(bytes.NewReader(payload))
			dec.UseNumber()
			if err := dec.Decode(&decoded); err != nil {
				t.Fatalf("json.Valid accepts %q, which a json.Decoder refuses: %v", payload, err)
			}
		}
		members, isObject := decoded.(map[string]any)
		if err != nil {
			authErr := wantRefusal(t, err)
			if authErr.Code != "invalid_request" {
				t.Fatalf("error code = %q, want invalid_request", authErr.Code)
			}
			if _, ok := descriptions[authErr.Description]; !ok {
				t.Fatalf("the description %q is given by no seed: add one, or make it a fixed sentence", authErr.Description)
			}
			if header != nil {
				t.Fatalf("InitHeaders returned %v with its error, want nil", header)
			}
			switch {
			case authErr.Description == notJSON && valid:
				t.Fatalf("InitHeaders calls %q not JSON, which encoding/json decodes", payload)
			case authErr.Description != notJSON && !valid:
				t.Fatalf("InitHeaders gives %q for %q, which encoding/json does not decode", authErr.Description, payload)
			case valid && !isObject && decoded != nil && authErr.Description != notObject:
				t.Fatalf("InitHeaders gives %q for %q, which is no object", authErr.Description, payload)
			case valid && isObject && !hasCredentialNames(members, apiKeyHeader):
				t.Fatalf("InitHeaders refuses %q, an object without credentials: %v", payload, err)
			}
			return
		}
		if header == nil {
			t.Fatal("InitHeaders returned a nil header without an error")
		}
		if len(payload) > 0 && !valid {
			t.Fatalf("InitHeaders accepted %q, which encoding/json does not decode", payload)
		}
		if len(payload) > 0 && decoded != nil && !isObject {
			t.Fatalf("InitHeaders accepted %q, which is no object", payload)
		}
		for name, values := range header {
			if name != "Authorization" && name != apiKeyHeader {
				t.Fatalf("InitHeaders gave the header %q", name)
			}
			if len(values) != 1 {
				t.Fatalf("InitHeaders gave %d values of %s", len(values), name)
			}
			matches := 0
			for member, v := range members {
				if asciiFold(member, name) {
					matches++
					if v != values[0] {
						t.Fatalf("InitHeaders gave %s %q, the payload has %v", name, values[0], v)
					}
				}
			}
			if matches != 1 {
				t.Fatalf("InitHeaders gave %s from a payload with %d members of that name", name, matches)
			}
		}
	})
}

// hasCredentialNames reports whether an object has a member named as a credential, in any case.
func hasCredentialNames(members map[string]any, apiKeyHeader string) bool {
	for name := range members {
		if asciiFold(name, "Authorization") || asciiFold(name, apiKeyHeader) {
			return true
		}
	}
	return false
}

// asciiFold is strings.EqualFold of ASCII strings only.
func asciiFold(a, b string) bool {
	for _, c := range []byte(a + b) {
		if c >= 0x80 {
			return false
		}
	}
	return strings.EqualFold(a, b)
}
