// Bearer tokens end to end: checks, stored profiles, JWKS outage, key sets across reloads.
package caddymodule

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/golang-jwt/jwt/v5"
	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/auth/authtest"
)

func TestBearerTokens(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	aliceToken := idp.Token(authtest.Claims("alice"), "RS256")

	t.Run("a post created with a token belongs to the token's subject", func(t *testing.T) {
		res := c.do("POST", site+"/posts", `{"title": "by token"}`, bearer(idp.Token(authtest.Claims("carol"), "ES256")), jsonBody)
		var p postOut
		res.decode(t, &p)
		if res.status != 201 || p.UserID != "carol" {
			t.Fatalf("got %d %+v; want 201 by carol", res.status, p)
		}
		if doc, _ := storedPost(t, p.ID); doc["userId"] != "carol" {
			t.Errorf("stored userId %v", doc["userId"])
		}
	})

	refused := []struct {
		name        string
		mutate      func(jwt.MapClaims)
		description string
	}{
		{"an expired token", func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() }, "the token has expired"},
		{"a token for another audience", func(c jwt.MapClaims) { c["aud"] = "another-api" }, "audience"},
		{"a token from another issuer", func(c jwt.MapClaims) { c["iss"] = "https://evil.example.test/" }, "issuer"},
		{"a token without exp", func(c jwt.MapClaims) { delete(c, "exp") }, "no expiry"},
		{"a token without sub", func(c jwt.MapClaims) { delete(c, "sub") }, "no sub claim"},
		{"a token not valid yet", func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Hour).Unix() }, "not valid yet"},
	}
	for _, tc := range refused {
		c1 := authtest.Claims("alice")
		tc.mutate(c1)
		token := idp.Token(c1, "RS256")
		t.Run(tc.name+" gets 401 invalid_token on a write and changes nothing", func(t *testing.T) {
			before := stored(t)
			res := c.do("POST", site+"/posts", `{"title": "refused"}`, bearer(token), jsonBody)
			res.wantError(t, 401, tc.description)
			wantChallenge(t, res, "invalid_token", tc.description)
			unchanged(t, before)
		})
		t.Run(tc.name+" gets 401 on a public GET too", func(t *testing.T) {
			c.do("GET", site+"/posts", "", bearer(token)).wantError(t, 401, tc.description)
		})
	}

	t.Run("a truncated token gets 401", func(t *testing.T) {
		res := c.do("GET", site+"/posts", "", bearer(aliceToken[:len(aliceToken)-10]))
		res.wantError(t, 401, "signature")
		wantChallenge(t, res, "invalid_token", "signature")
	})
	malformed := []struct{ name, header, description string }{
		{"a Bearer header without a token", "Authorization: Bearer", "no token"},
		{"a token with a character no token has", "Authorization: Bearer abc,def", "characters"},
	}
	for _, tc := range malformed {
		t.Run(tc.name+" gets 400 invalid_request", func(t *testing.T) {
			res := c.do("GET", site+"/posts", "", tc.header)
			res.wantError(t, 400, tc.description)
			wantChallenge(t, res, "invalid_request", tc.description)
		})
	}
	t.Run("two bearer tokens get 400 invalid_request", func(t *testing.T) {
		c.do("GET", site+"/posts", "", bearer(aliceToken), bearer(aliceToken)).wantError(t, 400, "more than one bearer token")
	})
	t.Run("a token and an API key of different users get 400 and change nothing", func(t *testing.T) {
		before := stored(t)
		res := c.do("POST", site+"/posts", `{"title": "two users"}`, bearer(aliceToken), asBob, jsonBody)
		res.wantError(t, 400, "different users")
		wantChallenge(t, res, "invalid_request", "different users")
		unchanged(t, before)
	})
	t.Run("a token and an API key of the same user are accepted", func(t *testing.T) {
		res := c.do("POST", site+"/posts", `{"title": "same user"}`, bearer(aliceToken), asAlice, jsonBody)
		if res.status != 201 {
			t.Errorf("status = %d; want 201 (body %s)", res.status, res.body)
		}
	})

	t.Run("the caller and the token's claims are in the placeholders", func(t *testing.T) {
		res := c.do("GET", site+"/posts", "", bearer(aliceToken))
		want := map[string]string{"X-Auth-User": "alice", "X-Auth-Name": "Name of alice", "X-Auth-Iss": authtest.Issuer}
		for name, value := range want {
			if got := res.header.Get(name); got != value {
				t.Errorf("%s = %q; want %q", name, got, value)
			}
		}
	})
	t.Run("an API key's configured profile is in the placeholders", func(t *testing.T) {
		res := c.do("GET", site+"/posts", "", asAlice)
		if got := res.header.Get("X-Auth-Name"); got != "Alice Liddell" {
			t.Errorf("X-Auth-Name = %q; want Alice Liddell", got)
		}
	})
	t.Run("an anonymous request sets no user placeholder", func(t *testing.T) {
		// Caddy leaves a placeholder that is not set as it is.
		if got := c.do("GET", site+"/posts", "").header.Get("X-Auth-User"); got != "{http.auth.user.id}" {
			t.Errorf("X-Auth-User = %q; want the placeholder unset", got)
		}
	})

	t.Run("a write saves the caller's profile from the token, or from the API key's config", func(t *testing.T) {
		erin := authtest.Claims("erin")
		erin["name"], erin["email"] = "Erin Example", "erin@example.com"
		c.create(bearer(idp.Token(erin, "RS256")), "erin writes")
		c.create(asAlice, "alice writes")
		c.create(asBob, "bob writes")
		want := map[string]string{
			"erin":  `{"name": "Erin Example", "email": "erin@example.com"}`,
			"alice": `{"name": "Alice Liddell", "email": "alice@example.com"}`,
			"bob":   `{}`,
		}
		for id, profile := range want {
			if got := storedUser(t, id); got != profile {
				t.Errorf("users holds %s for %s; want %s", got, id, profile)
			}
		}
	})

	t.Run("the access log names the user and holds no token or key", func(t *testing.T) {
		c.do("GET", site+"/posts?log=check", "", bearer(aliceToken))
		c.do("GET", site+"/posts?log=check-key", "", asAlice)
		var log []byte
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if log, _ = os.ReadFile(accessLog()); strings.Contains(string(log), "log=check-key") {
				break
			}
		}
		var sawUser bool
		for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
			var entry struct {
				UserID  string `json:"user_id"`
				Request struct {
					URI string `json:"uri"`
				} `json:"request"`
			}
			if err := json.Unmarshal([]byte(line), &entry); err != nil {
				t.Fatalf("access log line %q: %v", line, err)
			}
			if strings.HasPrefix(entry.Request.URI, "/posts?log=check") {
				sawUser = true
				if entry.UserID != "alice" {
					t.Errorf("user_id = %q in %s; want alice", entry.UserID, line)
				}
			}
		}
		if !sawUser {
			t.Errorf("the access log has no entry for the checked requests:\n%s", log)
		}
		for _, secret := range []string{aliceToken, strings.Split(aliceToken, ".")[2], aliceKey, bobKey} {
			if strings.Contains(string(log), secret) {
				t.Errorf("the access log contains a credential")
			}
		}
	})
}

// wantChallenge checks the RFC 6750 challenge of a refused credential.
func wantChallenge(t *testing.T, res response, code, description string) {
	t.Helper()
	got := res.header.Get("WWW-Authenticate")
	prefix := fmt.Sprintf(`Bearer realm="posts", error=%q, error_description="`, code)
	if !strings.HasPrefix(got, prefix) || !strings.Contains(got, description) {
		t.Errorf("WWW-Authenticate = %s; want %s...%s...", got, prefix, description)
	}
}

// storedUser returns the name and email stored for a user in dataDir/posts.db as JSON, or ""
// when there is none.
func storedUser(t *testing.T, id string) string {
	t.Helper()
	db := readStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var name, email sql.NullString
	err := db.QueryRowContext(ctx, `SELECT name, email FROM users WHERE id = ?`, id).Scan(&name, &email)
	if errors.Is(err, sql.ErrNoRows) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	u := struct {
		Name  string `json:"name,omitempty"`
		Email string `json:"email,omitempty"`
	}{name.String, email.String}
	b, _ := json.Marshal(u)
	return strings.ReplaceAll(strings.ReplaceAll(string(b), `,"`, `, "`), `":`, `": `)
}

// TestJWKSOutage: with no keys fetched yet a token gets 503 with Retry-After (an anonymous read
// still works), the service recovers on its own once the JWKS answers, and a JWKS that fails
// after that never costs a valid token its access.
func TestJWKSOutage(t *testing.T) {
	inProcess(t)
	startCaddy(t)
	idp.Failing.Store(true)
	t.Cleanup(func() { idp.Failing.Store(false) })
	// A URL of its own, so a new key set is pooled; refreshed every second to see the outage.
	outageSite := extraSite
	outage := fmt.Sprintf("\n%s {\n\tposts {\n\t\tdata_dir %s\n\t\tjwks_url %s/jwks.json?outage\n\t\tjwks_refresh 1s\n\t}\n}\n", outageSite, dataDir, idp.URL)
	tc := caddytest.NewTester(t)
	tc.InitServer(config()+outage, "caddyfile")
	c := &client{t: t, http: tc.Client}

	t.Run("a token before any key is fetched gets 503 with Retry-After", func(t *testing.T) {
		res := c.do("POST", outageSite+"/posts", `{"title": "too early"}`, bearer(idp.Token(authtest.Claims("alice"), "RS256")), jsonBody)
		res.wantError(t, 503, "keys have not been fetched")
		if got := res.header.Get("Retry-After"); got == "" {
			t.Error("no Retry-After")
		}
	})
	t.Run("an anonymous read is served meanwhile", func(t *testing.T) {
		if res := c.do("GET", outageSite+"/posts", ""); res.status != 200 {
			t.Errorf("status = %d", res.status)
		}
	})
	t.Run("once the JWKS answers, tokens are accepted without a restart", func(t *testing.T) {
		idp.Failing.Store(false)
		token := idp.Token(authtest.Claims("alice"), "RS256")
		var res response
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if res = c.do("GET", outageSite+"/posts", "", bearer(token)); res.status == 200 {
				return
			}
		}
		t.Fatalf("status = %d (body %s) 10s after the JWKS came back; want 200", res.status, res.body)
	})
	t.Run("a JWKS that fails after the first fetch keeps valid tokens working", func(t *testing.T) {
		refused := idp.Refusals("outage")
		idp.Failing.Store(true)
		// A refresh fails meanwhile: they come every second. The provider counts its answer
		// before it sends it, so the wait goes on a little for the key set to take it in.
		for deadline := time.Now().Add(10 * time.Second); idp.Refusals("outage") == refused; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no refresh of the JWKS was refused in 10s")
			}
		}
		time.Sleep(200 * time.Millisecond)
		fresh := authtest.Claims("alice")
		fresh["jti"] = "never seen before" // not in the token cache
		res := c.do("GET", outageSite+"/posts", "", bearer(idp.Token(fresh, "ES256")))
		if res.status != 200 {
			t.Errorf("status = %d (body %s); want 200", res.status, res.body)
		}
	})
}

// TestTheKeySetsAreSharedAcrossReloads: a reload keeps the key sets it had (and so their keys), and
// the last config that names a JWKS stops its background fetches.
func TestTheKeySetsAreSharedAcrossReloads(t *testing.T) {
	inProcess(t)
	startCaddy(t)
	shared := "jwks " + idp.URL + "/jwks.json every 1h0m0s"
	before := pooledKeys(t, shared)
	if refs, _ := jwksPool.References(shared); refs != 2 {
		t.Errorf("%d references to the key set; want 2 (the two sites that use it)", refs)
	}

	t.Run("a reload that changes the handler keeps the key set", func(t *testing.T) {
		tc := caddytest.NewTester(t)
		tc.InitServer(strings.Replace(config(), "max_limit 5", "max_limit 4", 1), "caddyfile")
		if after := pooledKeys(t, shared); after != before {
			t.Error("the reload made a new key set")
		}
	})

	t.Run("the last config that names a key set releases it", func(t *testing.T) {
		own := fmt.Sprintf("\n%s {\n\tposts {\n\t\tdata_dir %s\n\t\tjwks_url %s/jwks.json?reloads\n\t}\n}\n", extraSite, dataDir, idp.URL)
		tc := caddytest.NewTester(t)
		tc.InitServer(config()+own, "caddyfile")
		key := "jwks " + idp.URL + "/jwks.json?reloads every 1h0m0s"
		pooledKeys(t, key)
		startCaddy(t) // the config without that site
		if _, ok := jwksPool.References(key); ok {
			t.Errorf("%s is still pooled", key)
		}
		if after := pooledKeys(t, shared); after != before {
			t.Error("the key set every config names was replaced")
		}
	})
}

// pooledKeys returns the key set pooled under key.
func pooledKeys(t *testing.T, key string) *auth.JWKS {
	t.Helper()
	return poolValue[pooledJWKS](t, jwksPool, key).JWKS
}
