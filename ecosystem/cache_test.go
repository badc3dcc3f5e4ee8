//go:build ecosystem

package ecosystem

import (
	"net/url"
	"strings"
	"testing"
)

const bobKey = "bob-key-of-the-ecosystem-tests"

func TestCache(t *testing.T) {
	s := start(t, "cache", setup{env: []string{"ALICE_KEY=" + aliceKey, "BOB_KEY=" + bobKey}})
	alice, bob, anonymous := "Authorization: ApiKey "+aliceKey, "Authorization: ApiKey "+bobKey, ""
	created := s.call(t, "POST", "/posts", `{"title": "cached or not"}`, alice)
	if created.status != 201 {
		t.Fatalf("creating a post: %d %s", created.status, created.body)
	}
	id := postOf(t, created).ID
	const (
		aliceSees = `"email":"alice@example.com"`
		othersSee = `"email":null`
	)
	// personal is the URL of a GraphQL GET that selects the author's email, which only the
	// author sees: one of its own per subtest, so that each starts with an empty cache.
	personal := func(name string) string {
		return "/graphql?" + url.Values{"query": {`query ` + name + ` { post(id: "` + id + `") { title author { email } } }`}}.Encode()
	}
	// Each step asks a URL as a caller and says which view the answer must hold.
	type step struct {
		who, caller, view string
	}
	orders := []struct {
		name  string
		steps []step
	}{
		{"alice first: bob and an anonymous client then get their own view, and alice hers again", []step{
			{"alice", alice, aliceSees}, {"bob", bob, othersSee}, {"anonymous", anonymous, othersSee}, {"alice", alice, aliceSees},
		}},
		{"an anonymous client first: alice then gets her view, bob his", []step{
			{"anonymous", anonymous, othersSee}, {"anonymous", anonymous, othersSee}, {"alice", alice, aliceSees}, {"bob", bob, othersSee},
		}},
		{"bob first: alice still gets her view", []step{
			{"bob", bob, othersSee}, {"alice", alice, aliceSees}, {"bob", bob, othersSee},
		}},
	}
	for i, order := range orders {
		t.Run(order.name, func(t *testing.T) {
			target := personal("Order" + string(rune('A'+i)))
			for _, st := range order.steps {
				res := s.call(t, "GET", target, "", st.caller)
				if res.status != 200 || !strings.Contains(res.body, st.view) {
					t.Fatalf("%s got %d %s (Cache-Status %q); want %s", st.who, res.status, res.body, res.header.Get("Cache-Status"), st.view)
				}
				if strings.Contains(res.header.Get("Cache-Status"), "; hit") {
					t.Errorf("%s got an answer from the cache (Cache-Status %q); the API's answers are never fresh", st.who, res.header.Get("Cache-Status"))
				}
			}
		})
	}

	t.Run("a public answer is stored by the cache, and never served stale: a change shows at once", func(t *testing.T) {
		path := "/posts/" + id
		first := s.call(t, "GET", path, "", anonymous)
		if first.status != 200 || first.header.Get("Cache-Control") != "public, max-age=0, must-revalidate" || !strings.Contains(first.header.Get("Cache-Status"), "stored") {
			t.Fatalf("%d, Cache-Control %q, Cache-Status %q; want 200, public, stored", first.status, first.header.Get("Cache-Control"), first.header.Get("Cache-Status"))
		}
		if res := s.call(t, "PATCH", path, `{"title": "changed behind the cache"}`, alice); res.status != 200 {
			t.Fatalf("alice's change: %d %s", res.status, res.body)
		}
		if res := s.call(t, "GET", path, "", anonymous); postOf(t, res).Title != "changed behind the cache" {
			t.Errorf("after the change, the post read through the cache is %s (Cache-Status %q)", res.body, res.header.Get("Cache-Status"))
		}
	})
	t.Run("a request with an unknown key gets its 401, not the public answer the cache holds", func(t *testing.T) {
		s.call(t, "GET", "/posts", "", anonymous)
		if res := s.call(t, "GET", "/posts", "", "Authorization: ApiKey not-a-key"); res.status != 401 {
			t.Errorf("%d %s (Cache-Status %q); want 401", res.status, res.body, res.header.Get("Cache-Status"))
		}
	})
	keepFeedLive(t, s, aliceKey)
	for _, tr := range []transport{sseGET, sseGETTakingJSON, ssePOST, multipartPOST} {
		t.Run(tr.name+" goes around the cache: two, one after the other, each get their own live events at once", func(t *testing.T) {
			for range 2 {
				st := openStream(t, s.url, tr, "", alice)
				if got := st.header.Get("Cache-Status"); got != "" {
					t.Errorf("Cache-Status %q; want none: the cache handled the stream", got)
				}
				eventsOneByOne(t, st, s, aliceKey, 3)
				st.close()
			}
		})
	}
	t.Run("what is public and fresh for a while, the OpenAPI document, is served from the cache", func(t *testing.T) {
		first := s.call(t, "GET", "/openapi.yaml", "")
		second := s.call(t, "GET", "/openapi.yaml", "")
		if first.status != 200 || second.status != 200 || second.body != first.body {
			t.Fatalf("%d then %d, the same document: %v", first.status, second.status, second.body == first.body)
		}
		if got := second.header.Get("Cache-Status"); !strings.HasPrefix(got, "Souin; hit;") {
			t.Errorf("Cache-Status %q; want a hit", got)
		}
	})
}
