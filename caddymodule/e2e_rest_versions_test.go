// REST versions end to end: ETag and Last-Modified, 304 answers, If-Match on writes, through
// Caddy's encode as well, and a race of conditional PATCHes where exactly one wins.
package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// startVersionsCaddy loads config() with extraSite serving the posts of dataDir behind Caddy's
// encode, which compresses every answer and appends the coding to an ETag ("1-gzip").
func startVersionsCaddy(t *testing.T) *client {
	t.Helper()
	return loadGraphQLConfig(t, config()+fmt.Sprintf(`
%s {
	encode gzip {
		minimum_length 1
	}
	posts {
		data_dir %s
		api_key %s alice
	}
}
`, extraSite, dataDir, aliceKey))
}

// version is the version stored for the post with the id in dataDir's store.
func version(t *testing.T, id string) any {
	t.Helper()
	doc, ok := storedPost(t, id)
	if !ok {
		return "none"
	}
	return doc["version"]
}

func TestVersionsAndConditionalRequests(t *testing.T) {
	inProcess(t)
	c := startVersionsCaddy(t)

	t.Run("GET answers the version, its ETag and Last-Modified; HEAD the same headers", func(t *testing.T) {
		p := c.create(asAlice, "validated")
		for _, method := range []string{"GET", "HEAD"} {
			res := c.do(method, site+"/posts/"+p.ID, "")
			updated, _ := time.Parse(time.RFC3339, p.UpdatedAt)
			if res.status != 200 || res.header.Get("ETag") != `"1"` || res.header.Get("Last-Modified") != updated.UTC().Format(http.TimeFormat) {
				t.Errorf("%s: %d ETag %q Last-Modified %q; want 200, \"1\", %s", method, res.status, res.header.Get("ETag"), res.header.Get("Last-Modified"), updated.UTC().Format(http.TimeFormat))
			}
		}
		if p.Version != 1 || version(t, p.ID) != int64(1) {
			t.Errorf("created at version %d, stored %v; want 1", p.Version, version(t, p.ID))
		}
	})

	t.Run("If-None-Match of the ETag is a 304 without a body; of another, the post", func(t *testing.T) {
		p := c.create(asAlice, "cached")
		res := c.do("GET", site+"/posts/"+p.ID, "", `If-None-Match: "1"`)
		if res.status != 304 || len(res.body) != 0 || res.header.Get("ETag") != `"1"` {
			t.Errorf("got %d %q ETag %q; want 304, no body, ETag \"1\"", res.status, res.body, res.header.Get("ETag"))
		}
		if res := c.do("GET", site+"/posts/"+p.ID, "", `If-None-Match: "7"`); res.status != 200 {
			t.Errorf("another tag: %d; want 200", res.status)
		}
	})

	t.Run("PATCH with If-Match of the ETag writes and answers the next ETag; with the old one, 412 and nothing changes", func(t *testing.T) {
		p := c.create(asAlice, "edited twice")
		res := c.do("PATCH", site+"/posts/"+p.ID, `{"title": "first edit"}`, asAlice, jsonBody, `If-Match: "1"`)
		var got postOut
		res.decode(t, &got)
		if res.status != 200 || res.header.Get("ETag") != `"2"` || got.Version != 2 || got.Title != "first edit" {
			t.Fatalf("got %d ETag %q %+v; want 200, \"2\", the title at version 2", res.status, res.header.Get("ETag"), got)
		}
		if doc, _ := storedPost(t, p.ID); doc["version"] != int64(2) || doc["title"] != "first edit" {
			t.Errorf("stored %v", doc)
		}
		before := stored(t)
		c.do("PATCH", site+"/posts/"+p.ID, `{"title": "a lost update"}`, asAlice, jsonBody, `If-Match: "1"`).wantError(t, 412, "it is at version 2")
		unchanged(t, before)
	})

	refusals := []struct {
		name   string
		header string
		status int
		want   string
	}{
		{"a malformed If-Match is a 400", "If-Match: 1", 400, "If-Match must be * or a list of entity tags"},
		{"a weak tag never matches a write: 412", `If-Match: W/"1"`, 412, "it is at version 1"},
		{"If-None-Match: * on a post that exists is a 412", "If-None-Match: *", 412, "it is at version 1"},
		{"a malformed If-None-Match is a 400", `If-None-Match: "1`, 400, "closing quote"},
	}
	for _, method := range []string{"PATCH", "DELETE"} {
		for _, tc := range refusals {
			t.Run(method+": "+tc.name+", and nothing changes", func(t *testing.T) {
				p := c.create(asAlice, "guarded by a precondition")
				before := stored(t)
				c.do(method, site+"/posts/"+p.ID, `{"title": "x"}`, asAlice, jsonBody, tc.header).wantError(t, tc.status, tc.want)
				unchanged(t, before)
			})
		}
		t.Run(method+": If-Match on a missing post is a 404", func(t *testing.T) {
			before := stored(t)
			c.do(method, site+"/posts/6b011fa03aa928307595aeda", `{"title": "x"}`, asAlice, jsonBody, `If-Match: "1"`).wantError(t, 404, "post not found")
			unchanged(t, before)
		})
		t.Run(method+": If-Match on someone else's post is a 403, not a 412", func(t *testing.T) {
			p := c.create(asBob, "bob's")
			before := stored(t)
			c.do(method, site+"/posts/"+p.ID, `{"title": "x"}`, asAlice, jsonBody, `If-Match: "9"`).wantError(t, 403, "another user")
			unchanged(t, before)
		})
	}

	t.Run("DELETE with If-Match of the ETag deletes", func(t *testing.T) {
		p := c.create(asAlice, "deleted at 1")
		if res := c.do("DELETE", site+"/posts/"+p.ID, "", asAlice, `If-Match: "1"`); res.status != 204 {
			t.Fatalf("got %d %s", res.status, res.body)
		}
		if _, ok := storedPost(t, p.ID); ok {
			t.Error("the post is still stored")
		}
	})

	t.Run("behind encode, the ETag of a compressed answer validates GETs and writes", func(t *testing.T) {
		p := c.create(asAlice, "compressed")
		gzip := "Accept-Encoding: gzip"
		res := c.do("GET", extraSite+"/posts/"+p.ID, "", gzip)
		if res.header.Get("Content-Encoding") != "gzip" || res.header.Get("ETag") != `"1-gzip"` {
			t.Fatalf("Content-Encoding %q, ETag %q; want gzip and \"1-gzip\"", res.header.Get("Content-Encoding"), res.header.Get("ETag"))
		}
		if res := c.do("GET", extraSite+"/posts/"+p.ID, "", gzip, `If-None-Match: "1-gzip"`); res.status != 304 {
			t.Errorf("If-None-Match of the compressed ETag: %d; want 304", res.status)
		}
		res = c.do("PATCH", extraSite+"/posts/"+p.ID, `{"title": "still compressed"}`, asAlice, jsonBody, gzip, `If-Match: "1-gzip"`)
		if res.status != 200 || res.header.Get("ETag") != `"2-gzip"` || version(t, p.ID) != int64(2) {
			t.Errorf("PATCH with If-Match of the compressed ETag: %d ETag %q, stored version %v; want 200, \"2-gzip\", 2", res.status, res.header.Get("ETag"), version(t, p.ID))
		}
	})

	t.Run("on MongoDB, a PATCH with If-Match writes once and stores the version", func(t *testing.T) {
		p := c.createOn(stalledSite, asAlice, "on mongodb")
		if res := c.do("PATCH", stalledSite+"/posts/"+p.ID, `{"title": "edited"}`, asAlice, jsonBody, `If-Match: "1"`); res.status != 200 || res.header.Get("ETag") != `"2"` {
			t.Fatalf("got %d ETag %q %s; want 200, \"2\"", res.status, res.header.Get("ETag"), res.body)
		}
		before := stored(t)
		c.do("PATCH", stalledSite+"/posts/"+p.ID, `{"title": "again"}`, asAlice, jsonBody, `If-Match: "1"`).wantError(t, 412, "it is at version 2")
		unchanged(t, before)
		oid, _ := bson.ObjectIDFromHex(p.ID)
		var doc bson.M
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := ferretCollection("posts").FindOne(ctx, bson.D{{Key: "_id", Value: oid}}).Decode(&doc); err != nil || doc["version"] != int64(2) || doc["title"] != "edited" {
			t.Errorf("stored %v (%v); want the title edited at version 2", doc, err)
		}
	})
}

// Two clients PATCH one post with the same If-Match at once, round after round: exactly one
// wins each round (200), the other gets 412, and the post is the winner's.
func TestConditionalPatchesRaceThroughCaddy(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	p := c.create(asAlice, "raced")
	const rounds, clients = 20, 4
	for round := 1; round <= rounds; round++ {
		var requests []request
		for i := range clients {
			requests = append(requests, request{"PATCH", site + "/posts/" + p.ID, fmt.Sprintf(`{"title": "round %d, client %d"}`, round, i),
				[]string{asAlice, jsonBody, fmt.Sprintf(`If-Match: "%d"`, round)}})
		}
		responses, err := c.atOnce(requests)
		if err != nil {
			t.Fatal(err)
		}
		var winners []string
		for i, res := range responses {
			switch res.status {
			case 200:
				winners = append(winners, fmt.Sprintf("round %d, client %d", round, i))
			case 412:
				res.wantError(t, 412, fmt.Sprintf("it is at version %d", round+1))
			default:
				t.Fatalf("round %d, client %d: %d %s", round, i, res.status, res.body)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d of %d PATCHes won (%v); want exactly one", round, len(winners), clients, winners)
		}
		if doc, _ := storedPost(t, p.ID); doc["version"] != int64(round+1) || doc["title"] != winners[0] {
			t.Fatalf("round %d: stored %q at version %v; want %q at %d", round, doc["title"], doc["version"], winners[0], round+1)
		}
	}
	if got := c.do("GET", site+"/posts/"+p.ID, ""); got.header.Get("ETag") != fmt.Sprintf(`"%d"`, rounds+1) || !strings.Contains(string(got.body), fmt.Sprintf(`"version":%d`, rounds+1)) {
		t.Errorf("after the race: ETag %q %s", got.header.Get("ETag"), got.body)
	}
}
