// REST writes end to end: create, update, delete, their credentials, bad input.
package caddymodule

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

func TestCreatingAPost(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)

	t.Run("201 with the post, its Location, and the caller as author", func(t *testing.T) {
		res := c.do("POST", site+"/posts", `{"title": "  Hello  ", "body": "world"}`, asAlice, jsonBody)
		if res.status != http.StatusCreated {
			t.Fatalf("status = %d; body %s", res.status, res.body)
		}
		var p postOut
		res.decode(t, &p)
		if loc := res.header.Get("Location"); loc != "/posts/"+p.ID {
			t.Errorf("Location = %q; want /posts/%s", loc, p.ID)
		}
		if !regexp.MustCompile(`^[0-9a-f]{24}$`).MatchString(p.ID) {
			t.Errorf("id = %q; want 24 hex digits", p.ID)
		}
		if p.UserID != "alice" || p.Title != "Hello" || p.Body == nil || *p.Body != "world" {
			t.Errorf("post = %+v; want alice's, title trimmed to Hello, body world", p)
		}
		if !timestampRE.MatchString(p.CreatedAt) || p.UpdatedAt != p.CreatedAt {
			t.Errorf("createdAt = %q, updatedAt = %q; want equal RFC 3339 UTC timestamps with ms", p.CreatedAt, p.UpdatedAt)
		}
		doc, ok := storedPost(t, p.ID)
		if !ok || doc["userId"] != "alice" || doc["title"] != "Hello" || doc["body"] != "world" {
			t.Errorf("stored %v", doc)
		}
		created, _ := time.Parse(time.RFC3339, p.CreatedAt)
		if got, _ := doc["createdAt"].(time.Time); !got.Equal(created) {
			t.Errorf("stored createdAt %v; answered %v", got, created)
		}
	})

	t.Run("a key configured as a sha256 digest authenticates its user", func(t *testing.T) {
		if p := c.create(asBob, "by bob"); p.UserID != "bob" {
			t.Errorf("userId = %q; want bob", p.UserID)
		}
	})

	t.Run("a post without a body has no body member and none stored", func(t *testing.T) {
		res := c.do("POST", site+"/posts", `{"title": "no body"}`, asAlice, jsonBody)
		var p postOut
		res.decode(t, &p)
		if res.status != 201 || p.Body != nil || bytes.Contains(res.body, []byte(`"body"`)) {
			t.Errorf("got %d %s; want 201 without body", res.status, res.body)
		}
		if doc, _ := storedPost(t, p.ID); doc["body"] != nil {
			t.Errorf("stored body %v", doc["body"])
		}
	})

	t.Run("a null body is no body", func(t *testing.T) {
		res := c.do("POST", site+"/posts", `{"title": "null body", "body": null}`, asAlice, jsonBody)
		if res.status != 201 || bytes.Contains(res.body, []byte(`"body"`)) {
			t.Errorf("got %d %s; want 201 without body", res.status, res.body)
		}
	})

	t.Run("the largest title and body are accepted", func(t *testing.T) {
		body := fmt.Sprintf(`{"title": %q, "body": %q}`, strings.Repeat("é", 300), strings.Repeat("b", 50_000))
		if res := c.do("POST", site+"/posts", body, asAlice, jsonBody); res.status != 201 {
			t.Errorf("status = %d, body %s", res.status, res.body)
		}
	})
}

func TestUpdatingAPost(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)

	t.Run("200 with the post re-read, updatedAt advanced, createdAt kept", func(t *testing.T) {
		p := c.create(asAlice, "before")
		time.Sleep(5 * time.Millisecond) // so the update lands in a later millisecond
		res := c.do("PATCH", site+"/posts/"+p.ID, `{"title": "after"}`, asAlice, jsonBody)
		var got postOut
		res.decode(t, &got)
		if res.status != 200 || got.Title != "after" || *got.Body != *p.Body || got.CreatedAt != p.CreatedAt || got.UserID != "alice" {
			t.Fatalf("got %d %+v", res.status, got)
		}
		if got.UpdatedAt <= p.UpdatedAt {
			t.Errorf("updatedAt %s did not advance from %s", got.UpdatedAt, p.UpdatedAt)
		}
		if doc, _ := storedPost(t, p.ID); doc["title"] != "after" {
			t.Errorf("stored title %v", doc["title"])
		}
	})

	t.Run("a merge patch with a null body removes the body", func(t *testing.T) {
		p := c.create(asAlice, "with body")
		res := c.do("PATCH", site+"/posts/"+p.ID, `{"body": null}`, asAlice, "Content-Type: application/merge-patch+json")
		if res.status != 200 || bytes.Contains(res.body, []byte(`"body"`)) {
			t.Errorf("got %d %s; want 200 without body", res.status, res.body)
		}
		if doc, _ := storedPost(t, p.ID); doc["body"] != nil || doc["title"] != "with body" {
			t.Errorf("stored %v; want the title kept and no body", doc)
		}
	})

	t.Run("404 when no post has the id", func(t *testing.T) {
		before := stored(t)
		c.do("PATCH", site+"/posts/"+store.NewID(time.Now()), `{"title": "x"}`, asAlice, jsonBody).wantError(t, 404, "post not found")
		unchanged(t, before)
	})

	t.Run("404 for a malformed id", func(t *testing.T) {
		before := stored(t)
		c.do("PATCH", site+"/posts/nope", `{"title": "x"}`, asAlice, jsonBody).wantError(t, 404, "post not found")
		unchanged(t, before)
	})

	t.Run("403 when the post is someone else's", func(t *testing.T) {
		p := c.create(asAlice, "alice's")
		before := stored(t)
		c.do("PATCH", site+"/posts/"+p.ID, `{"title": "bob was here"}`, asBob, jsonBody).wantError(t, 403, "another user")
		unchanged(t, before)
	})
}

func TestDeletingAPost(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)

	t.Run("204 with an empty body, and the post is gone", func(t *testing.T) {
		p := c.create(asAlice, "doomed")
		res := c.do("DELETE", site+"/posts/"+p.ID, "", asAlice)
		if res.status != 204 || len(res.body) != 0 {
			t.Errorf("got %d %q; want 204 and no body", res.status, res.body)
		}
		if _, ok := storedPost(t, p.ID); ok {
			t.Error("the post is still stored")
		}
		c.do("GET", site+"/posts/"+p.ID, "").wantError(t, 404, "post not found")
	})
	t.Run("404 when no post has the id", func(t *testing.T) {
		before := stored(t)
		c.do("DELETE", site+"/posts/"+store.NewID(time.Now()), "", asAlice).wantError(t, 404, "post not found")
		unchanged(t, before)
	})
	t.Run("403 when the post is someone else's", func(t *testing.T) {
		p := c.create(asAlice, "alice keeps this")
		before := stored(t)
		c.do("DELETE", site+"/posts/"+p.ID, "", asBob).wantError(t, 403, "another user")
		unchanged(t, before)
	})
}

func TestAuthentication(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	p := c.create(asAlice, "guarded")
	writes := []struct{ method, path, body string }{
		{"POST", "/posts", `{"title": "anonymous"}`},
		{"PATCH", "/posts/" + p.ID, `{"title": "anonymous"}`},
		{"DELETE", "/posts/" + p.ID, ""},
	}
	for _, w := range writes {
		t.Run(w.method+" without credentials gets 401 with a Bearer challenge", func(t *testing.T) {
			before := stored(t)
			res := c.do(w.method, site+w.path, w.body, jsonBody)
			res.wantError(t, 401, "authentication required")
			if got := res.header.Get("WWW-Authenticate"); got != `Bearer realm="posts"` {
				t.Errorf("WWW-Authenticate = %q", got)
			}
			unchanged(t, before)
		})
		t.Run(w.method+" with an unknown key gets 401", func(t *testing.T) {
			before := stored(t)
			res := c.do(w.method, site+w.path, w.body, jsonBody, "Authorization: ApiKey not-a-key")
			res.wantError(t, 401, "unknown API key")
			if got := res.header.Get("WWW-Authenticate"); !strings.Contains(got, `error="invalid_token"`) {
				t.Errorf("WWW-Authenticate = %q", got)
			}
			unchanged(t, before)
		})
	}
	t.Run("GET needs no credentials", func(t *testing.T) {
		if res := c.do("GET", site+"/posts/"+p.ID, ""); res.status != 200 {
			t.Errorf("status = %d", res.status)
		}
	})
	t.Run("GET with an unknown key is refused, not served as anonymous", func(t *testing.T) {
		c.do("GET", site+"/posts", "", "Authorization: ApiKey not-a-key").wantError(t, 401, "unknown API key")
	})
	t.Run("a bearer token is refused where no jwks_url is configured", func(t *testing.T) {
		c.do("GET", deadSite+"/posts", "", "Authorization: Bearer abc.def.ghi").wantError(t, 401, "bearer tokens are not accepted")
	})
	t.Run("two ApiKey authorizations are a malformed request", func(t *testing.T) {
		before := stored(t)
		c.do("POST", site+"/posts", `{"title": "twice"}`, jsonBody, asAlice, asBob).wantError(t, 400, "more than one ApiKey authorization")
		unchanged(t, before)
	})
	t.Run("a key in X-API-Key, which api_key_header does not name, is refused saying where the key goes", func(t *testing.T) {
		before := stored(t)
		c.do("POST", site+"/posts", `{"title": "in the header"}`, jsonBody, "X-API-Key: "+aliceKey).wantError(t, 400, "Authorization: ApiKey <key>")
		unchanged(t, before)
	})
}

// TestBadInputChangesNothing sends every kind of bad body to POST and PATCH: each gets its status
// and a message, and the stored posts stay as they were.
func TestBadInputChangesNothing(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	p := c.create(asAlice, "untouched")
	type badInput struct {
		name        string
		contentType string // "" for application/json, "-" for none
		body        string
		status      int
		want        string
		postOnly    bool
		patchOnly   bool
	}
	tests := []badInput{
		{name: "a body that is not JSON", body: `{"title": `, status: 400, want: "not valid JSON"},
		{name: "an empty body", body: ``, status: 400, want: "the body is empty"},
		{name: "a JSON array", body: `[{"title": "x"}]`, status: 400, want: "must be a JSON object"},
		{name: "a JSON string", body: `"title"`, status: 400, want: "must be a JSON object"},
		{name: "two objects", body: `{"title": "a"} {"title": "b"}`, status: 400, want: "nothing after it"},
		{name: "a title that is a number", body: `{"title": 42}`, status: 400, want: "title must be a string"},
		{name: "a body that is a boolean", body: `{"title": "t", "body": true}`, status: 400, want: "body must be a string"},
		{name: "a member given twice", body: `{"title": "a", "title": "b"}`, status: 400, want: `"title" is given more than once`},
		{name: "an operator as the title", body: `{"title": {"$ne": null}}`, status: 400, want: "title must be a string"},
		{name: "a body over max_body_size", body: `{"title": "big", "body": "` + strings.Repeat("x", 65*1024) + `"}`, status: 413, want: "larger than the limit of 64 KiB"},
		{name: "text/plain", contentType: "text/plain", body: `{"title": "x"}`, status: 415, want: "Content-Type must be application/json"},
		{name: "no Content-Type", contentType: "-", body: `{"title": "x"}`, status: 415, want: "Content-Type must be"},
		{name: "form encoding", contentType: "application/x-www-form-urlencoded", body: `title=x`, status: 415, want: "Content-Type must be"},
		{name: "merge-patch+json on POST", contentType: "application/merge-patch+json", body: `{"title": "x"}`, status: 415, want: "Content-Type must be application/json", postOnly: true},
		{name: "no title", body: `{"body": "only a body"}`, status: 422, want: "title is required", postOnly: true},
		{name: "an empty title", body: `{"title": ""}`, status: 422, want: "title is required"},
		{name: "a blank title", body: `{"title": " \t\n "}`, status: 422, want: "title is required"},
		{name: "a title of 301 characters", body: `{"title": "` + strings.Repeat("t", 301) + `"}`, status: 422, want: "title must be 1 to 300 characters"},
		{name: "a body of 50,001 characters", body: `{"title": "t", "body": "` + strings.Repeat("b", 50_001) + `"}`, status: 422, want: "body must be at most 50000 characters"},
		{name: "a null title", body: `{"title": null}`, status: 422, want: "title"},
		{name: "an empty object", body: `{}`, status: 422, want: "the update is empty", patchOnly: true},
		{name: "an unknown member", body: `{"title": "t", "tags": ["a"]}`, status: 422, want: `unknown member "tags"`},
		{name: "an update operator", body: `{"$set": {"userId": "bob"}}`, status: 422, want: `unknown member "$set"`},
		{name: "a dotted key", body: `{"title.en": "t"}`, status: 422, want: `unknown member "title.en"`},
		{name: "a title in another letter case", body: `{"Title": "t"}`, status: 422, want: `unknown member "Title"`},
	}
	for _, owned := range []string{"id", "_id", "userId", "createdAt", "updatedAt", "USERID", "CreatedAt"} {
		tests = append(tests, badInput{name: "the server-owned member " + owned, body: fmt.Sprintf(`{"title": "t", %q: "x"}`, owned), status: 422, want: fmt.Sprintf("%q is set by the server", owned)})
	}
	for _, tt := range tests {
		for _, method := range []string{"POST", "PATCH"} {
			if (tt.postOnly && method != "POST") || (tt.patchOnly && method != "PATCH") {
				continue
			}
			t.Run(fmt.Sprintf("%s with %s gets %d", method, tt.name, tt.status), func(t *testing.T) {
				path := "/posts"
				if method == "PATCH" {
					path += "/" + p.ID
				}
				headers := []string{asAlice}
				switch tt.contentType {
				case "":
					headers = append(headers, jsonBody)
				case "-":
				default:
					headers = append(headers, "Content-Type: "+tt.contentType)
				}
				before := stored(t)
				c.do(method, site+path, tt.body, headers...).wantError(t, tt.status, tt.want)
				unchanged(t, before)
			})
		}
	}
	t.Run("a body over max_body_size without a Content-Length gets 413", func(t *testing.T) {
		before := stored(t)
		big := `{"title": "big", "body": "` + strings.Repeat("x", 65*1024) + `"}`
		req, _ := http.NewRequest("POST", site+"/posts", io.MultiReader(strings.NewReader(big))) // unknown length: chunked
		req.Header.Set("Authorization", "ApiKey "+aliceKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(res.Body)
		response{res.StatusCode, res.Header, data}.wantError(t, 413, "larger than the limit")
		unchanged(t, before)
	})
}
