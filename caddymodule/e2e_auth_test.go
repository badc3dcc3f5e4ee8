// Ownership and trust_caddy_auth end to end; the identity provider is auth/authtest.
package caddymodule

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth/authtest"
	"github.com/postsedge/caddy-posts/store"
	"golang.org/x/crypto/bcrypt"
)

// davePassword is dave's basic_auth password.
const davePassword = "dave-password"

// daveHash is the bcrypt hash of dave's basic_auth password.
var daveHash = func() string {
	h, err := bcrypt.GenerateFromPassword([]byte(davePassword), bcrypt.MinCost)
	if err != nil {
		panic(err)
	}
	return string(h)
}()

func bearer(token string) string { return "Authorization: Bearer " + token }

func accessLog() string { return filepath.Join(dataDir, "access.log") }

// TestOwnership runs every kind of caller against PATCH and DELETE of a post that exists and of
// one that does not: each cell has one status, and a caller who is not the owner writes nothing.
func TestOwnership(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	aliceToken := idp.Token(authtest.Claims("alice"), "RS256")
	carolToken := idp.Token(authtest.Claims("carol"), "ES256")
	expired := authtest.Claims("alice")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	expiredToken := idp.Token(expired, "RS256")

	callers := []struct {
		name       string
		credential string // a header line, or "" for none
		owner      bool
		status     int // for a post that exists but belongs to someone else, or 401s
	}{
		{"the owner with a bearer token", bearer(aliceToken), true, 0},
		{"another user with a bearer token", bearer(carolToken), false, 403},
		{"an anonymous caller", "", false, 401},
		{"a caller with a bad (expired) token of the owner", bearer(expiredToken), false, 401},
		{"the owner with an API key", asAlice, true, 0},
		{"another user with an API key", asBob, false, 403},
	}
	for _, op := range []struct {
		method, body string
		done         int
	}{{"PATCH", `{"title": "changed"}`, 200}, {"DELETE", "", 204}} {
		for _, caller := range callers {
			t.Run(op.method+" of an existing post by "+caller.name, func(t *testing.T) {
				p := c.create(asAlice, "owned by alice")
				before := stored(t)
				res := c.do(op.method, site+"/posts/"+p.ID, op.body, caller.credential, jsonBody)
				switch {
				case caller.owner:
					if res.status != op.done {
						t.Fatalf("status = %d; want %d (body %s)", res.status, op.done, res.body)
					}
					doc, ok := storedPost(t, p.ID)
					if op.method == "PATCH" && (!ok || doc["title"] != "changed") {
						t.Errorf("stored %v; want the title changed", doc)
					}
					if op.method == "DELETE" && ok {
						t.Errorf("the post is still stored: %v", doc)
					}
				default:
					res.wantError(t, caller.status, "")
					unchanged(t, before)
				}
			})
			t.Run(op.method+" of a missing post by "+caller.name, func(t *testing.T) {
				before := stored(t)
				res := c.do(op.method, site+"/posts/"+store.NewID(time.Now()), op.body, caller.credential, jsonBody)
				want := 404
				if caller.status == 401 {
					want = 401
				}
				res.wantError(t, want, "")
				unchanged(t, before)
			})
		}
	}
}

func TestTrustCaddyAuth(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	dave := "Authorization: Basic " + basic("dave", davePassword)

	t.Run("a post written after basic_auth belongs to the basic_auth user", func(t *testing.T) {
		res := c.do("POST", basicSite+"/posts", `{"title": "by dave"}`, dave, jsonBody)
		var p postOut
		res.decode(t, &p)
		if res.status != 201 || p.UserID != "dave" {
			t.Fatalf("got %d %+v; want 201 by dave", res.status, p)
		}
	})
	t.Run("the basic_auth user and an API key of another user get 400 and change nothing", func(t *testing.T) {
		before := stored(t)
		c.do("POST", basicSite+"/posts", `{"title": "two users"}`, dave, asAlice, jsonBody).wantError(t, 400, "different users")
		unchanged(t, before)
	})
	t.Run("the basic_auth user and a token of another user get 400", func(t *testing.T) {
		c.do("GET", basicSite+"/posts", "", dave, bearer(idp.Token(authtest.Claims("alice"), "RS256"))).wantError(t, 400, "different users")
	})
	t.Run("without trust_caddy_auth a Basic header is no credential", func(t *testing.T) {
		c.do("POST", site+"/posts", `{"title": "not dave"}`, dave, jsonBody).wantError(t, 401, "authentication required")
	})
}

func basic(user, password string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, password)
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
}
