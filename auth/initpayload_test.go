package auth_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
)

// initSecret is a credential value of the payloads below; no description may quote it.
const initSecret = "s3cret-credential-value"

func TestInitHeaders(t *testing.T) {
	accepted := []struct {
		name         string
		payload      string
		apiKeyHeader string // "" means X-API-Key
		want         http.Header
	}{
		{name: "an absent payload gives no credentials", payload: "", want: http.Header{}},
		{name: "a null payload gives no credentials", payload: "null", want: http.Header{}},
		{name: "a null payload among white space gives no credentials", payload: " \n null \t", want: http.Header{}},
		{name: "an empty object gives no credentials", payload: "{}", want: http.Header{}},
		{name: "an object of other members gives no credentials", payload: `{"locale":"fr","retries":3}`, want: http.Header{}},
		{
			name:    "an Authorization member becomes the Authorization header",
			payload: `{"Authorization":"Bearer ` + initSecret + `"}`,
			want:    http.Header{"Authorization": {"Bearer " + initSecret}},
		},
		{
			name:    "an authorization member in lower case becomes the Authorization header",
			payload: `{"authorization":"Bearer ` + initSecret + `"}`,
			want:    http.Header{"Authorization": {"Bearer " + initSecret}},
		},
		{
			name:    "an AUTHORIZATION member in upper case becomes the Authorization header",
			payload: `{"AUTHORIZATION":"ApiKey ` + initSecret + `"}`,
			want:    http.Header{"Authorization": {"ApiKey " + initSecret}},
		},
		{
			name:    "a member name written with escapes is read as the name it spells",
			payload: `{"\u0041uthorization":"Bearer ` + initSecret + `"}`,
			want:    http.Header{"Authorization": {"Bearer " + initSecret}},
		},
		{
			name:    "the API key header member becomes the API key header, in any case",
			payload: `{"x-api-key":"` + initSecret + `"}`,
			want:    http.Header{"X-Api-Key": {initSecret}},
		},
		{
			name:         "a custom API key header is honoured",
			payload:      `{"X-POSTS-TOKEN":"` + initSecret + `","X-API-Key":"ignored"}`,
			apiKeyHeader: "X-Posts-Token",
			want:         http.Header{"X-Posts-Token": {initSecret}},
		},
		{
			name:    "both credentials are read",
			payload: `{"Authorization":"Bearer abc","X-API-Key":"` + initSecret + `"}`,
			want:    http.Header{"Authorization": {"Bearer abc"}, "X-Api-Key": {initSecret}},
		},
		{
			name:    "other members are ignored whatever they hold, duplicates and nesting included",
			payload: `{"a":{"Authorization":1,"authorization":[2]},"b":[{"c":null}],"a":true,"n":1e999,"Authorization":"Bearer abc","s":"x"}`,
			want:    http.Header{"Authorization": {"Bearer abc"}},
		},
		{
			name:    "a member whose name folds to Authorization only in Unicode (the Kelvin sign, the long s) is ignored",
			payload: `{"X-API-\u212Aey":"k","Authoriz\u017fation":"x"}`,
			want:    http.Header{},
		},
		{
			name:    "an empty credential string is passed on for Authenticate to judge",
			payload: `{"Authorization":""}`,
			want:    http.Header{"Authorization": {""}},
		},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			header := tc.apiKeyHeader
			if header == "" {
				header = "X-API-Key"
			}
			got, err := auth.InitHeaders(json.RawMessage(tc.payload), header)
			if err != nil {
				t.Fatalf("InitHeaders(%s) = %v", tc.payload, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("InitHeaders(%s) = %v, want %v", tc.payload, got, tc.want)
			}
		})
	}

	refused := []struct {
		name    string
		payload string
	}{
		{"a payload that is not JSON is refused", `not json`},
		{"a payload cut short is refused", `{"Authorization":"Bearer ` + initSecret},
		{"an object without its closing brace is refused", `{"Authorization":"Bearer abc"`},
		{"an object with a trailing comma is refused", `{"Authorization":"Bearer abc",}`},
		{"an object with a comma missing is refused", `{"a":1 "Authorization":"Bearer abc"}`},
		{"an object followed by another value is refused", `{}{"Authorization":"Bearer abc"}`},
		{"an object followed by garbage is refused", `{"Authorization":"Bearer abc"} x`},
		{"null followed by garbage is refused", `null x`},
		{"white space alone is refused", ` `},
		{"an array is refused", `[{"Authorization":"Bearer abc"}]`},
		{"a string is refused", `"Bearer abc"`},
		{"a number is refused", `42`},
		{"true is refused", `true`},
		{"Authorization given twice in different cases is refused", `{"authorization":"Bearer abc","Authorization":"Bearer ` + initSecret + `"}`},
		{"Authorization given twice in the same case is refused", `{"Authorization":"Bearer abc","Authorization":"Bearer abc"}`},
		{"Authorization given twice, once spelled with escapes, is refused", `{"Authorization":"Bearer abc","\u0061uthorization":"Bearer ` + initSecret + `"}`},
		{"the API key header given twice in different cases is refused", `{"X-API-Key":"` + initSecret + `","x-api-key":"other"}`},
		{"a duplicate credential is refused even after other members", `{"X-Api-Key":"a","n":1,"X-API-KEY":"b","Authorization":"Bearer abc"}`},
		{"an Authorization that is a number is refused", `{"Authorization":1}`},
		{"an Authorization that is null is refused", `{"Authorization":null}`},
		{"an Authorization that is true is refused", `{"Authorization":true}`},
		{"an Authorization that is an object is refused", `{"Authorization":{"Bearer":"` + initSecret + `"}}`},
		{"an Authorization that is an array is refused", `{"Authorization":["Bearer ` + initSecret + `"]}`},
		{"an API key that is a number is refused", `{"x-api-key":12345678}`},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			got, err := auth.InitHeaders(json.RawMessage(tc.payload), "X-API-Key")
			var authErr *auth.Error
			if !errors.As(err, &authErr) {
				t.Fatalf("InitHeaders(%s) = %v, %v; want an *auth.Error", tc.payload, got, err)
			}
			if status := errcode.Of(err).Code.Status; status != http.StatusBadRequest || authErr.Code != "invalid_request" {
				t.Errorf("error = {Status: %d, Code: %q}, want {Status: 400, Code: \"invalid_request\"}", status, authErr.Code)
			}
			if got != nil {
				t.Errorf("InitHeaders returned %v with its error, want nil", got)
			}
			for _, secret := range []string{initSecret, "Bearer abc", "12345678"} {
				if strings.Contains(authErr.Description, secret) {
					t.Errorf("the description %q quotes the payload", authErr.Description)
				}
			}
		})
	}

	t.Run("the headers of a payload authenticate its caller", func(t *testing.T) {
		authn := &auth.Authenticator{APIKeyHeader: "X-Api-Key", APIKeys: []auth.APIKey{mustParseAPIKey(t, aliceKey, "alice")}}
		for _, payload := range []string{`{"x-api-key":"` + aliceKey + `"}`, `{"authorization":"apikey ` + aliceKey + `"}`} {
			header, err := auth.InitHeaders(json.RawMessage(payload), authn.APIKeyHeader)
			if err != nil {
				t.Fatalf("InitHeaders: %v", err)
			}
			id, err := authn.Authenticate(newRequest(header))
			if err != nil || id.UserID != "alice" {
				t.Errorf("Authenticate of the headers of %s = %+v, %v; want alice", payload, id, err)
			}
		}
	})
}
