//go:build integration

// Hostile GraphQL: documents refused small and fast, huge responses cut off.
package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth/authtest"
)

// TestHostileGraphQLDocumentsAreRefusedSmallAndFast replays the documents of issue 14 that made
// the server work, allocate and answer without bound: each is refused before it runs, in less
// than 50 ms and 16 MB, with one error that names the limit, while a normal client is served.
func TestHostileGraphQLDocumentsAreRefusedSmallAndFast(t *testing.T) {
	h := startHostile(t)
	h.startNormalClient()
	defer h.checkNormalClient()

	// Fills 16 KiB (max_query_length) with repetitions of item(i).
	filled := func(prefix string, item func(i int) string, suffix string) string {
		var b strings.Builder
		b.WriteString(prefix)
		for i := 0; ; i++ {
			next := item(i)
			if b.Len()+len(next)+len(suffix) > 16<<10 {
				break
			}
			b.WriteString(next)
		}
		return b.String() + suffix
	}
	attacks := []struct {
		name, query, code string
	}{
		{"conflicting aliases of post fill the document", filled("{", func(i int) string { return fmt.Sprintf("a%d:post(id:\"%d\"){id} ", i%950, i) }, "}"), "MAX_ALIASES_LIMIT"},
		{"a list root field aliased 300 times", "{" + aliased("posts(limit:100){id}", 300) + "}", "MAX_ALIASES_LIMIT"},
		{"the user root field aliased 300 times", "{" + aliased(`user(id:"alice"){id}`, 300) + "}", "MAX_ALIASES_LIMIT"},
		{"one field repeated 1,998 times", "{posts{" + strings.Repeat("id ", 1998) + "}}", "MAX_FIELDS_LIMIT"},
		{"eleven root fields", "{" + strings.Repeat("posts(limit:1){id} ", 11) + "}", "MAX_ROOT_FIELDS_LIMIT"},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			if len(a.query) > 16<<10 {
				t.Fatalf("the attack is %d bytes, over max_query_length", len(a.query))
			}
			var best answer
			growth := h.peakGrowth(func() { best = fastest(func() answer { return h.graphql("198.51.100.1", a.query) }) })
			refusedWith(t, best, a.code)
			t.Logf("%d-byte document: refused in %v with %d bytes; resident memory grew %d KiB at its peak", len(a.query), best.took, len(best.body), growth>>10)
			if best.took > 50*time.Millisecond {
				t.Errorf("the refusal took %v at best of three; want under 50ms", best.took)
			}
			if growth > 16<<20 {
				t.Errorf("resident memory grew %d MiB; want under 16 MiB", growth>>20)
			}
			if len(best.body) > 4<<10 {
				t.Errorf("the refusal is %d bytes; want a small one", len(best.body))
			}
		})
	}

	t.Run("a token whose subject holds a control character is refused", func(t *testing.T) {
		a := h.send("POST", "/posts", "198.51.100.1", []byte(`{"title":"from eve"}`), "Content-Type", "application/json",
			"Authorization", "Bearer "+idp().Token(authtest.Claims("eve\u0001"), "RS256"))
		if a.status != http.StatusUnauthorized || !strings.Contains(a.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("got %d %q %s; want 401 invalid_token", a.status, a.header.Get("WWW-Authenticate"), a.body)
		}
	})

	t.Run("430 createPost aliases in one mutation write nothing", func(t *testing.T) {
		before := h.send("GET", "/posts?userId=alice&limit=100", "198.51.100.1", nil)
		flood := "mutation($i:PostInput!){" + aliased(`createPost(input:$i){id}`, 430) + "}"
		if len(flood) > 16<<10 {
			t.Fatalf("the mutation is %d bytes", len(flood))
		}
		a := h.graphql("198.51.100.1", flood, "Authorization", "ApiKey process-key")
		refusedWith(t, a, "MAX_ALIASES_LIMIT")
		a = h.graphql("198.51.100.1", "mutation{"+strings.Repeat(`createPost(input:{title:"f"}){id} `, 11)+"}", "Authorization", "ApiKey process-key")
		refusedWith(t, a, "MAX_ROOT_FIELDS_LIMIT")
		if after := h.send("GET", "/posts?userId=alice&limit=100", "198.51.100.1", nil); bytes.Count(after.body, []byte(`"title":"f"`)) != bytes.Count(before.body, []byte(`"title":"f"`)) {
			t.Errorf("a refused mutation wrote posts: %.300s", after.body)
		}
	})
}

// aliased is n copies of field, each under its own alias.
func aliased(field string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "a%d:%s ", i, field)
	}
	return b.String()
}

// TestAResponseThatWouldBeHugeStops selects body under 19 aliases in a page of 100 posts whose
// bodies are 50,000 characters that JSON escapes: the cost is exactly max_cost, so it runs, and
// its answer would be 570 MB. It stops at max_response_size instead, and the process grows by
// less than 64 MB. A page of such posts over REST is cut at the same size, its Link resuming.
func TestAResponseThatWouldBeHugeStops(t *testing.T) {
	h := startHostile(t)
	body, _ := json.Marshal(map[string]string{"title": "escaped", "body": strings.Repeat("<", 50_000)})
	for range 100 {
		if a := h.send("POST", "/posts", "198.51.100.2", body, "Content-Type", "application/json", "Authorization", "ApiKey process-key"); a.status != http.StatusCreated {
			t.Fatalf("seeding: %d %.200s", a.status, a.body)
		}
	}
	h.startNormalClient()
	defer h.checkNormalClient()

	// A server in service has read its posts before: the store's page cache holds them.
	if a := h.graphql("198.51.100.3", "{posts(limit:100){id title}}"); a.status != http.StatusOK {
		t.Fatalf("reading the posts: %d %.200s", a.status, a.body)
	}
	// A list whose posts cannot fit is stopped before any of it is encoded: the attack of the
	// issue and its variants cost a few MiB. A document that makes graphql-go encode nearly
	// max_response_size before the budget runs out (the last case: another list of posts that
	// selects no body hides how many bodies the second writes) costs what any answer of 8 MiB
	// costs in graphql-go, which copies it up through a buffer per field, object and list:
	// 40 to 64 MiB measured, so its bound is wider.
	for _, tt := range []struct {
		name, query string
		bound       int64
	}{
		{"body under 19 aliases in a page of 100", "{posts(limit:100){" + aliased("body", 19) + "}}", 64 << 20},
		// 27 bodies fit in 8 MiB once, not 19 times over.
		{"body under 19 aliases in a page of 27", "{posts(limit:27){" + aliased("body", 19) + "}}", 64 << 20},
		{"the aliases in a fragment", "{posts(limit:27){...F}} fragment F on Post{" + aliased("body", 19) + "}", 64 << 20},
		{"the aliases in a connection", "{postsConnection(first:27){edges{node{" + aliased("body", 19) + "}}}}", 64 << 20},
		{"a few aliases in pages of two lists", "{a:posts(limit:27){" + aliased("body", 9) + "} b:posts(limit:27){" + aliased("body", 9) + "}}", 64 << 20},
		{"the aliases in a user's posts", "{posts(limit:1){author{posts(limit:27){" + aliased("body", 19) + "}}}}", 128 << 20},
	} {
		t.Run("GraphQL answers RESPONSE_TOO_LARGE to "+tt.name, func(t *testing.T) {
			var a answer
			growth := h.peakGrowth(func() { a = h.graphql("198.51.100.3", tt.query) })
			t.Logf("answered %d with %d bytes in %v; resident memory grew %d MiB at its peak", a.status, len(a.body), a.took, growth>>20)
			var res struct {
				Data   json.RawMessage
				Errors []struct{ Extensions struct{ Code string } }
			}
			if err := json.Unmarshal(a.body, &res); err != nil || len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "RESPONSE_TOO_LARGE" || (len(res.Data) > 0 && string(res.Data) != "null") {
				t.Fatalf("got %d %.300s; want one error RESPONSE_TOO_LARGE and no data", a.status, a.body)
			}
			if growth > tt.bound {
				t.Errorf("resident memory grew %d MiB; want under %d MiB", growth>>20, tt.bound>>20)
			}
			if a.took > 5*time.Second {
				t.Errorf("the answer took %v", a.took)
			}
		})
	}

	t.Run("a REST page ends at max_response_size and its Link resumes", func(t *testing.T) {
		// Four bytes a character: a page of 100 such posts would be 20 MB.
		wide, _ := json.Marshal(map[string]string{"title": "wide", "body": strings.Repeat("😀", 50_000)})
		for range 60 {
			if a := h.send("POST", "/posts", "198.51.100.2", wide, "Content-Type", "application/json", "Authorization", "ApiKey process-key"); a.status != http.StatusCreated {
				t.Fatalf("seeding: %d %.200s", a.status, a.body)
			}
		}
		var a answer
		growth := h.peakGrowth(func() { a = h.send("GET", "/posts?limit=100", "198.51.100.3", nil) })
		var page []struct{ ID string }
		if err := json.Unmarshal(a.body, &page); err != nil || a.status != http.StatusOK {
			t.Fatalf("got %d, %d bytes: %v", a.status, len(a.body), err)
		}
		t.Logf("a page of %d posts, %d bytes; resident memory grew %d MiB at its peak", len(page), len(a.body), growth>>20)
		if len(a.body) > 8<<20 || len(page) >= 100 || len(page) == 0 {
			t.Errorf("the page has %d posts in %d bytes; want fewer than 100 in at most 8 MiB", len(page), len(a.body))
		}
		if !strings.Contains(a.header.Get("Link"), `rel="next"`) {
			t.Errorf("the cut page has no Link to the rest: %q", a.header.Get("Link"))
		}
	})
}
