// GraphQL queries end to end: posts, pages, connections, users and their profiles.
package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth/authtest"
	"github.com/postsedge/caddy-posts/store"
)

func TestGraphQLQueries(t *testing.T) {
	inProcess(t)
	c := startGraphQLCaddy(t)
	clearPosts(t)
	a1 := c.create(asAlice, "first")
	b1 := c.create(asBob, "bob's")
	a2 := c.create(asAlice, "second")
	a3 := c.create(asAlice, "third")
	newest := []string{a3.ID, a2.ID, b1.ID, a1.ID}

	rest := c.do("GET", site+"/posts?limit=2", "")
	link, _ := url.Parse(nextLink(t, rest.header.Get("Link")))
	restAfter := link.Query().Get("after")
	var conn struct {
		PostsConnection struct {
			PageInfo struct{ EndCursor string }
		}
	}
	res := check(t, c.graphql(site, `{ postsConnection(first: 2) { pageInfo { endCursor } } }`, nil), gqlWant{data: anyData})
	if err := json.Unmarshal(res.Data, &conn); err != nil {
		t.Fatal(err)
	}
	endCursor := conn.PostsConnection.PageInfo.EndCursor

	t.Run("postsConnection's endCursor is the after of REST's next link for the same page", func(t *testing.T) {
		if endCursor == "" || endCursor != restAfter {
			t.Errorf("endCursor = %q; REST's after = %q", endCursor, restAfter)
		}
	})

	postByID := `query($id: ID!) { post(id: $id) { id userId title body createdAt updatedAt version } }`
	list := `query($userId: ID, $limit: Int, $after: String) { posts(userId: $userId, limit: $limit, after: $after) { id } }`
	connection := `query($first: Int, $after: String) { postsConnection(first: $first, after: $after) { edges { node { id } } } }`
	runCases(t, c, []gqlCase{
		{name: "post returns every field as GET /posts/{id} does", query: postByID, vars: map[string]any{"id": a1.ID},
			want: dataOnly(`{"post": %s}`, asJSON(t, a1))},
		{name: "post is null for an id no post has", query: postByID, vars: map[string]any{"id": store.NewID(time.Now())},
			want: dataOnly(`{"post": null}`)},
		{name: "post is null for a malformed id, where REST answers 404", query: postByID, vars: map[string]any{"id": "not-an-id"},
			want: dataOnly(`{"post": null}`)},
		{name: "posts come newest first", query: `{ posts { id } }`,
			want: dataOnly(`{"posts": %s}`, idObjects(newest...))},
		{name: "posts with userId keeps only that user's posts", query: list, vars: map[string]any{"userId": "bob"},
			want: dataOnly(`{"posts": %s}`, idObjects(b1.ID))},
		{name: "posts with the userId of a user without posts is an empty list", query: list, vars: map[string]any{"userId": "nobody"},
			want: dataOnly(`{"posts": []}`)},
		{name: "posts with limit returns the newest that many", query: list, vars: map[string]any{"limit": 2},
			want: dataOnly(`{"posts": %s}`, idObjects(newest[:2]...))},
		{name: "posts with limit equal to max_limit is accepted", query: list, vars: map[string]any{"limit": 5},
			want: dataOnly(`{"posts": %s}`, idObjects(newest...))},
		{name: "posts after postsConnection's endCursor continues with the next post", query: list, vars: map[string]any{"after": endCursor},
			want: dataOnly(`{"posts": %s}`, idObjects(newest[2:]...))},
		{name: "posts after the cursor of REST's next link continues with the next post", query: list, vars: map[string]any{"after": restAfter, "limit": 1},
			want: dataOnly(`{"posts": %s}`, idObjects(newest[2]))},
		{name: "posts after a cursor of another list (every user's) is BAD_USER_INPUT naming after", query: list, vars: map[string]any{"after": endCursor, "userId": "alice"},
			want: fieldError(`null`, "BAD_USER_INPUT", "after is a cursor of another list", "after", `["posts"]`)},
		{name: "posts with limit 0 is BAD_USER_INPUT naming limit", query: `{ posts(limit: 0) { id } }`,
			want: fieldError(`null`, "BAD_USER_INPUT", "limit must be from 1 to 5", "limit", `["posts"]`)},
		{name: "posts with a negative limit is BAD_USER_INPUT naming limit", query: `{ posts(limit: -1) { id } }`,
			want: fieldError(`null`, "BAD_USER_INPUT", "limit must be from 1 to 5", "limit", `["posts"]`)},
		{name: "posts with a limit over max_limit is BAD_USER_INPUT naming limit and max_limit", query: `{ posts(limit: 6) { id } }`,
			want: fieldError(`null`, "BAD_USER_INPUT", "limit must be from 1 to 5", "limit", `["posts"]`)},
		{name: "posts after an empty cursor is BAD_USER_INPUT naming after", query: `{ posts(after: "") { id } }`,
			want: fieldError(`null`, "BAD_USER_INPUT", "after cannot be empty", "after", `["posts"]`)},
		{name: "posts after a cursor this API never made is BAD_USER_INPUT naming after", query: `{ posts(after: "not-a-cursor") { id } }`,
			want: fieldError(`null`, "BAD_USER_INPUT", "after is not a cursor", "after", `["posts"]`)},
		{name: "a failing non-null field makes all of data null, its siblings too", query: `query($id: ID!) { post(id: $id) { id } posts(limit: 0) { id } }`, vars: map[string]any{"id": a1.ID},
			want: fieldError(`null`, "BAD_USER_INPUT", "limit must be from 1 to 5", "limit", `["posts"]`)},
		{name: "a failing nullable field is null beside the data of its sibling", query: `query($id: ID!) { post(id: $id) { id } user(id: "alice") { posts(limit: 9) { id } } }`, vars: map[string]any{"id": a1.ID},
			want: fieldError(fmt.Sprintf(`{"post": {"id": %q}, "user": null}`, a1.ID), "BAD_USER_INPUT", "limit must be from 1 to 5", "limit", `["user","posts"]`)},
		{name: "postsConnection with first returns the newest that many", query: connection, vars: map[string]any{"first": 1},
			want: dataOnly(`{"postsConnection": {"edges": [{"node": {"id": %q}}]}}`, a3.ID)},
		{name: "postsConnection with first over max_limit is BAD_USER_INPUT naming first", query: connection, vars: map[string]any{"first": 6},
			want: fieldError(`null`, "BAD_USER_INPUT", "first must be from 1 to 5", "first", `["postsConnection"]`)},
		{name: "postsConnection with first 0 is BAD_USER_INPUT naming first", query: connection, vars: map[string]any{"first": 0},
			want: fieldError(`null`, "BAD_USER_INPUT", "first must be from 1 to 5", "first", `["postsConnection"]`)},
		{name: "postsConnection of a user without posts has no edges, no next page and no endCursor",
			query: `{ postsConnection(userId: "nobody") { edges { cursor } pageInfo { hasNextPage endCursor } } }`,
			want:  dataOnly(`{"postsConnection": {"edges": [], "pageInfo": {"hasNextPage": false, "endCursor": null}}}`)},
		{name: "a limit given as a string is refused by validation", query: `{ posts(limit: "2") { id } }`,
			want: requestError(400, "GRAPHQL_VALIDATION_FAILED", "Int")},
	})

	t.Run("postsConnection pages to the end, where hasNextPage is false", func(t *testing.T) {
		var seen []string
		var after any // nil: the first page
		for pages := 1; ; pages++ {
			if pages > 3 {
				t.Fatal("more pages than posts")
			}
			res := check(t, c.graphql(site, `query($after: String) { postsConnection(first: 2, after: $after) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }`,
				map[string]any{"after": after}), gqlWant{data: anyData})
			var page struct {
				PostsConnection struct {
					Edges []struct {
						Cursor string
						Node   struct{ ID string }
					}
					PageInfo struct {
						HasNextPage bool
						EndCursor   *string
					}
				}
			}
			if err := json.Unmarshal(res.Data, &page); err != nil {
				t.Fatal(err)
			}
			edges, info := page.PostsConnection.Edges, page.PostsConnection.PageInfo
			if len(edges) == 0 || info.EndCursor == nil || *info.EndCursor != edges[len(edges)-1].Cursor {
				t.Fatalf("page %d: endCursor %v is not the cursor of the last edge of %+v", pages, info.EndCursor, edges)
			}
			for _, e := range edges {
				seen = append(seen, e.Node.ID)
			}
			if !info.HasNextPage {
				if pages != 2 {
					t.Errorf("hasNextPage false after %d pages; want 2 pages of 2", pages)
				}
				break
			}
			after = *info.EndCursor
		}
		if !slices.Equal(seen, newest) {
			t.Errorf("paged through %v; want %v", seen, newest)
		}
	})
}

func TestGraphQLUsers(t *testing.T) {
	inProcess(t)
	c := startGraphQLCaddy(t)
	clearPosts(t)
	frankToken := idp.Token(authtest.Claims("frank"), "RS256")
	var franks []string // newest first
	for i := range 12 {
		franks = append([]string{c.create(bearer(frankToken), fmt.Sprint("frank ", i)).ID}, franks...)
	}
	alices := c.create(asAlice, "by alice")
	aliceToken := idp.Token(authtest.Claims("alice"), "RS256")
	carolToken := idp.Token(authtest.Claims("carol"), "ES256")
	carols := c.create(bearer(carolToken), "by carol")
	// grace has a post but no saved profile, as after a profile write that failed.
	graces := c.create(bearer(idp.Token(authtest.Claims("grace"), "RS256")), "by grace")
	deleteUser(t, "grace")

	userPosts := `query($id: ID!) { user(id: $id) { posts { id } } }`
	runCases(t, c, []gqlCase{
		{name: "user has the profile saved from their API key and their posts", query: `{ user(id: "alice") { id name posts { title } } }`,
			want: dataOnly(`{"user": {"id": "alice", "name": "Alice Liddell", "posts": [{"title": "by alice"}]}}`)},
		{name: "user has the profile saved from their token", query: `{ user(id: "carol") { id name posts { id } } }`,
			want: dataOnly(`{"user": {"id": "carol", "name": "Name of carol", "posts": %s}}`, idObjects(carols.ID))},
		{name: "user with posts but no saved profile has an id and no name", query: `{ user(id: "grace") { id name email posts { id } } }`, header: []string{asAlice},
			want: dataOnly(`{"user": {"id": "grace", "name": null, "email": null, "posts": %s}}`, idObjects(graces.ID))},
		{name: "user with neither a profile nor posts is null", query: `{ user(id: "nobody") { id } }`,
			want: dataOnly(`{"user": null}`)},
		{name: "user's posts are the newest 10 by default", site: defaultsSite, query: userPosts, vars: map[string]any{"id": "frank"},
			want: dataOnly(`{"user": {"posts": %s}}`, idObjects(franks[:10]...))},
		{name: "user's posts are the newest max_limit by default where max_limit is under 10", query: userPosts, vars: map[string]any{"id": "frank"},
			want: dataOnly(`{"user": {"posts": %s}}`, idObjects(franks[:5]...))},
		{name: "user's posts with limit returns that many", site: defaultsSite, query: `{ user(id: "frank") { posts(limit: 12) { id } } }`,
			want: dataOnly(`{"user": {"posts": %s}}`, idObjects(franks...))},
		{name: "user's posts with a limit over max_limit is BAD_USER_INPUT and the user null", query: `{ user(id: "frank") { id posts(limit: 6) { id } } }`,
			want: fieldError(`{"user": null}`, "BAD_USER_INPUT", "limit must be from 1 to 5", "limit", `["user","posts"]`)},
		{name: "user's posts with limit 0 is BAD_USER_INPUT", query: `{ user(id: "frank") { posts(limit: 0) { id } } }`,
			want: fieldError(`{"user": null}`, "BAD_USER_INPUT", "limit must be from 1 to 5", "limit", `["user","posts"]`)},
		{name: "the author of posts has a name and no email for an anonymous caller", query: `{ posts(userId: "alice") { title author { id name email } } }`,
			want: dataOnly(`{"posts": [{"title": "by alice", "author": {"id": "alice", "name": "Alice Liddell", "email": null}}]}`)},
		{name: "the author of posts shows the email to the author", query: `{ posts(userId: "alice") { author { email } } }`, header: []string{asAlice},
			want: dataOnly(`{"posts": [{"author": {"email": "alice@example.com"}}]}`)},
		{name: "the authors of a mixed list are each the post's user", query: `{ posts(limit: 3) { userId author { id } } }`,
			want: dataOnly(`{"posts": [{"userId": "grace", "author": {"id": "grace"}}, {"userId": "carol", "author": {"id": "carol"}}, {"userId": "alice", "author": {"id": "alice"}}]}`)},
		{name: "the author of a post hides the email from another user", query: `query($id: ID!) { post(id: $id) { author { id email } } }`, vars: map[string]any{"id": alices.ID}, header: []string{bearer(carolToken)},
			want: dataOnly(`{"post": {"author": {"id": "alice", "email": null}}}`)},
		{name: "the author of a post without a saved profile has only an id", query: `query($id: ID!) { post(id: $id) { author { id name } } }`, vars: map[string]any{"id": graces.ID},
			want: dataOnly(`{"post": {"author": {"id": "grace", "name": null}}}`)},
		{name: "the author of a postsConnection node shows the email to the author", query: `{ postsConnection(userId: "carol") { edges { node { author { email } } } } }`, header: []string{bearer(carolToken)},
			want: dataOnly(`{"postsConnection": {"edges": [{"node": {"author": {"email": "carol@example.com"}}}]}}`)},
		{name: "the posts of an author are that author's", query: `query($id: ID!) { post(id: $id) { author { posts { title } } } }`, vars: map[string]any{"id": carols.ID},
			want: dataOnly(`{"post": {"author": {"posts": [{"title": "by carol"}]}}}`)},
	})

	email := `query($id: ID!) { user(id: $id) { email } }`
	for _, tt := range []struct {
		user, caller, credential, email string
	}{
		{"alice", "alice with her API key", asAlice, `"alice@example.com"`},
		{"alice", "alice with her bearer token", bearer(aliceToken), `"alice@example.com"`},
		{"alice", "bob with his API key", asBob, `null`},
		{"alice", "carol with her bearer token", bearer(carolToken), `null`},
		{"alice", "an anonymous caller", "", `null`},
		{"carol", "carol with her bearer token", bearer(carolToken), `"carol@example.com"`},
		{"carol", "alice with her API key", asAlice, `null`},
		{"carol", "an anonymous caller", "", `null`},
	} {
		t.Run(fmt.Sprintf("%s's email is %s for %s", tt.user, strings.Trim(tt.email, `"`), tt.caller), func(t *testing.T) {
			check(t, c.graphql(site, email, map[string]any{"id": tt.user}, tt.credential), dataOnly(`{"user": {"email": %s}}`, tt.email))
		})
	}
}

// deleteUser deletes the profile of a user from dataDir/posts.db, if it has one.
func deleteUser(t *testing.T, id string) {
	t.Helper()
	db := openStore(t, true)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, `DELETE FROM users WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
}
