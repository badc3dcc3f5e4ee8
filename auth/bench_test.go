package auth_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/postsedge/caddy-posts/auth"
)

// BenchmarkAuthenticate finds the caller of a request without credentials, and of one with an
// API key among keys configured ones: the key's SHA-256 and a constant-time comparison with
// every configured digest. Bearer tokens are measured in bench (BenchmarkVerify), against a
// JWKS.
func BenchmarkAuthenticate(b *testing.B) {
	run := func(b *testing.B, authn *auth.Authenticator, r *http.Request, want string) {
		b.ReportAllocs()
		for b.Loop() {
			if id, err := authn.Authenticate(r); err != nil || id.UserID != want {
				b.Fatalf("Authenticate = %+v, %v; want %q", id, err, want)
			}
		}
	}
	header := http.CanonicalHeaderKey("X-API-Key") // as caddymodule configures it
	b.Run("anonymous", func(b *testing.B) {
		authn := &auth.Authenticator{APIKeyHeader: header, APIKeys: []auth.APIKey{mustParseAPIKey(b, aliceKey, "alice")}}
		run(b, authn, httptest.NewRequest(http.MethodGet, "/posts", nil), "")
	})
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("api_key/keys=%d", n), func(b *testing.B) {
			authn := &auth.Authenticator{APIKeyHeader: header}
			for i := range n - 1 {
				authn.APIKeys = append(authn.APIKeys, mustParseAPIKey(b, fmt.Sprintf("key-%d", i), fmt.Sprintf("user-%d", i)))
			}
			authn.APIKeys = append(authn.APIKeys, mustParseAPIKey(b, aliceKey, "alice"))
			r := httptest.NewRequest(http.MethodGet, "/posts", nil)
			r.Header.Set(header, aliceKey)
			run(b, authn, r, "alice")
		})
	}
}
