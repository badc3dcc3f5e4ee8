package caddymodule

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// The GraphQL end-to-end tests run on the sites of config() and three more:
//   - :9085, every GraphQL limit and max_limit at their defaults, on the stored posts of the
//     main site (data_dir dataDir);
//   - :9086, small limits on the same posts: max_body_size 4KiB, max_query_length 2KiB,
//     max_depth 4, max_cost 5, introspection off;
//   - :9087, the defaults too, on the FerretDB of the mongodb_uri sites, reached through
//     commandLog, a proxy that records every command sent to the database, so that a test sees
//     that a refused operation never reached it.
//
// On the main site (:9080) max_limit is 5.
const (
	defaultsSite = "http://localhost:9085"
	strictSite   = "http://localhost:9086"
	mongoSite    = "http://localhost:9087"
)

// graphQLSites is the Caddyfile of the three sites above, to follow config().
func graphQLSites() string {
	return fmt.Sprintf(`
%s {
	posts {
		data_dir %s
		api_key %s alice
	}
}

%s {
	posts {
		data_dir %s
		api_key %s alice
		max_body_size 4KiB
		max_query_length 2KiB
		max_depth 4
		max_cost 5
		introspection off
	}
}

%s {
	posts {
		mongodb_uri mongodb://%s/?directConnection=true
		api_key %s alice
	}
}
`, defaultsSite, dataDir, aliceKey, strictSite, dataDir, aliceKey, mongoSite, commands().addr, aliceKey)
}

// startGraphQLCaddy loads config() with graphQLSites().
func startGraphQLCaddy(t *testing.T) *client {
	t.Helper()
	return loadGraphQLConfig(t, config()+graphQLSites())
}

// loadGraphQLConfig loads caddyfile, which must have the sites of config().
func loadGraphQLConfig(t *testing.T, caddyfile string) *client {
	t.Helper()
	tc := caddytest.NewTester(t)
	tc.InitServer(caddyfile, "caddyfile")
	if t.Failed() {
		t.FailNow()
	}
	return &client{t: t, http: tc.Client}
}

// The media types of GraphQL responses.
const (
	graphQLResponse = "application/graphql-response+json"
	legacyJSON      = "application/json"
	acceptLegacy    = "Accept: " + legacyJSON
	browserAccept   = "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
)

// graphql POSTs query, with vars unless they are nil, to /graphql of siteURL.
func (c *client) graphql(siteURL, query string, vars map[string]any, header ...string) response {
	c.t.Helper()
	r := c.graphqlRequest(siteURL, query, vars, header...)
	return c.do(r.method, r.url, r.body, r.header...)
}

// graphqlRequest is the request of c.graphql.
func (c *client) graphqlRequest(siteURL, query string, vars map[string]any, header ...string) request {
	c.t.Helper()
	body := map[string]any{"query": query}
	if vars != nil {
		body["variables"] = vars
	}
	b, err := json.Marshal(body)
	if err != nil {
		c.t.Fatal(err)
	}
	return request{"POST", siteURL + "/graphql", string(b), append([]string{jsonBody}, header...)}
}

// graphqlGet sends params in the query string of a GET of /graphql of siteURL.
func (c *client) graphqlGet(siteURL string, params url.Values, header ...string) response {
	c.t.Helper()
	return c.do("GET", siteURL+"/graphql?"+params.Encode(), "", header...)
}

// gqlResponse is a GraphQL response; Data is nil when the response has no data member.
type gqlResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
}

type gqlError struct {
	Message    string           `json:"message"`
	Locations  []map[string]int `json:"locations"`
	Path       []any            `json:"path"`
	Extensions map[string]any   `json:"extensions"`
}

// gqlWant is what a GraphQL response must be.
type gqlWant struct {
	status int    // 0 for 200
	media  string // "" for application/graphql-response+json
	// data is the exact data member as JSON; "" when the response must have none, anyData when
	// any data but null will do.
	data   string
	errors []wantError
	header map[string]string // headers and their exact values
}

const anyData = "(any)"

// wantError is one error of a response.
type wantError struct {
	code    string // extensions.code
	message string // a part of the message, which must not be empty in any case
	field   string // extensions.field; "" when there must be none
	path    string // the path as JSON, such as ["updatePost"]; "" when there must be none
}

// check fails t unless res is want, and returns res decoded.
func check(t *testing.T, res response, want gqlWant) gqlResponse {
	t.Helper()
	status, media := cmp.Or(want.status, http.StatusOK), cmp.Or(want.media, graphQLResponse)
	if res.status != status {
		t.Fatalf("status = %d; want %d (body %s)", res.status, status, res.body)
	}
	if got := res.header.Get("Content-Type"); got != media+"; charset=utf-8" {
		t.Errorf("Content-Type = %q; want %s; charset=utf-8", got, media)
	}
	for name, value := range want.header {
		if got := res.header.Get(name); got != value {
			t.Errorf("%s = %q; want %q", name, got, value)
		}
	}
	var out gqlResponse
	dec := json.NewDecoder(bytes.NewReader(res.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("decoding %s: %v", res.body, err)
	}
	switch want.data {
	case "":
		if out.Data != nil {
			t.Errorf("data = %s; want no data member (body %s)", out.Data, res.body)
		}
	case anyData:
		if out.Data == nil || string(out.Data) == "null" {
			t.Errorf("data = %s; want some (body %s)", out.Data, res.body)
		}
	default:
		if got, w := compact(t, out.Data), compact(t, []byte(want.data)); got != w {
			t.Errorf("data = %s\n       want %s", got, w)
		}
	}
	if len(out.Errors) != len(want.errors) {
		t.Fatalf("%d errors; want %d (body %s)", len(out.Errors), len(want.errors), res.body)
	}
	for i, w := range want.errors {
		e := out.Errors[i]
		field, _ := e.Extensions["field"].(string)
		if code := e.Extensions["code"]; code != w.code {
			t.Errorf("errors[%d] code = %v; want %s (%s)", i, code, w.code, e.Message)
		}
		if e.Message == "" || !strings.Contains(e.Message, w.message) {
			t.Errorf("errors[%d] message = %q; want it to contain %q", i, e.Message, w.message)
		}
		if field != w.field {
			t.Errorf("errors[%d] extensions.field = %q; want %q", i, field, w.field)
		}
		path := ""
		if e.Path != nil {
			b, _ := json.Marshal(e.Path)
			path = string(b)
		}
		if path != w.path {
			t.Errorf("errors[%d] path = %s; want %s", i, path, w.path)
		}
	}
	return out
}

func compact(t *testing.T, data []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		t.Fatalf("not JSON: %s: %v", data, err)
	}
	return buf.String()
}

// gqlCase is one GraphQL request over POST and the response it must get.
type gqlCase struct {
	name   string
	site   string // "" for the main site
	query  string
	vars   map[string]any
	header []string
	want   gqlWant
}

// runCases runs each case as a subtest; none of them may change the stored posts.
func runCases(t *testing.T, c *client, cases []gqlCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := stored(t)
			check(t, c.graphql(cmp.Or(tc.site, site), tc.query, tc.vars, tc.header...), tc.want)
			unchanged(t, before)
		})
	}
}

// dataOnly is a want of exactly this data and no errors.
func dataOnly(format string, args ...any) gqlWant { return gqlWant{data: fmt.Sprintf(format, args...)} }

// idObjects is the JSON of a list of posts that show only their ids.
func idObjects(ids ...string) string {
	objects := make([]string, len(ids))
	for i, id := range ids {
		objects[i] = fmt.Sprintf(`{"id":%q}`, id)
	}
	return "[" + strings.Join(objects, ",") + "]"
}

// asJSON is v as JSON.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fieldError is a want of data and one error of an operation that ran.
func fieldError(dataJSON, code, message, field, path string) gqlWant {
	return gqlWant{data: dataJSON, errors: []wantError{{code: code, message: message, field: field, path: path}}}
}

// requestError is a want of a refusal before anything ran: status, one error with code, no data.
func requestError(status int, code, message string) gqlWant {
	return gqlWant{status: status, errors: []wantError{{code: code, message: message}}}
}

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

	postByID := `query($id: ID!) { post(id: $id) { id userId title body createdAt updatedAt } }`
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
		{name: "posts after a cursor keeps the userId filter", query: list, vars: map[string]any{"after": endCursor, "userId": "alice"},
			want: dataOnly(`{"posts": %s}`, idObjects(a1.ID))},
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
	frankToken := idp.token(claims("frank"), "RS256")
	var franks []string // newest first
	for i := range 12 {
		franks = append([]string{c.create(bearer(frankToken), fmt.Sprint("frank ", i)).ID}, franks...)
	}
	alices := c.create(asAlice, "by alice")
	aliceToken := idp.token(claims("alice"), "RS256")
	carolToken := idp.token(claims("carol"), "ES256")
	carols := c.create(bearer(carolToken), "by carol")
	// grace has a post but no saved profile, as after a profile write that failed.
	graces := c.create(bearer(idp.token(claims("grace"), "RS256")), "by grace")
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

func TestGraphQLMutations(t *testing.T) {
	inProcess(t)
	c := startGraphQLCaddy(t)
	const create = `mutation($in: PostInput!) { createPost(input: $in) { id userId title body createdAt updatedAt } }`

	// created checks the data of a createPost and the stored post, and returns the post.
	created := func(t *testing.T, res response, userID, title string, body *string) postOut {
		t.Helper()
		out := check(t, res, gqlWant{data: anyData})
		var got struct{ CreatePost postOut }
		if err := json.Unmarshal(out.Data, &got); err != nil {
			t.Fatal(err)
		}
		p := got.CreatePost
		want := postOut{ID: p.ID, UserID: userID, Title: title, Body: body, CreatedAt: p.CreatedAt, UpdatedAt: p.CreatedAt}
		if p.ID == "" || !timestampRE.MatchString(p.CreatedAt) || asJSON(t, p) != asJSON(t, want) {
			t.Fatalf("createPost = %s; want %s with an id and equal RFC 3339 timestamps", asJSON(t, p), asJSON(t, want))
		}
		doc, ok := storedPost(t, p.ID)
		if !ok || doc["userId"] != userID || doc["title"] != title || (body == nil) != (doc["body"] == nil) {
			t.Errorf("stored %v; want %+v", doc, want)
		}
		return p
	}
	body := func(s string) *string { return &s }

	t.Run("createPost stores a post by the caller of the API key, title trimmed", func(t *testing.T) {
		created(t, c.graphql(site, create, map[string]any{"in": map[string]any{"title": "  Hello  ", "body": "world"}}, asAlice), "alice", "Hello", body("world"))
	})
	t.Run("createPost stores a post by the subject of the bearer token", func(t *testing.T) {
		created(t, c.graphql(site, create, map[string]any{"in": map[string]any{"title": "by token"}}, bearer(idp.token(claims("carol"), "ES256"))), "carol", "by token", nil)
	})
	t.Run("createPost with a null body stores none", func(t *testing.T) {
		created(t, c.graphql(site, `mutation { createPost(input: {title: "no body", body: null}) { id userId title body createdAt updatedAt } }`, nil, asBob), "bob", "no body", nil)
	})
	t.Run("createPost through the defaults site lands in the same store", func(t *testing.T) {
		created(t, c.graphql(defaultsSite, create, map[string]any{"in": map[string]any{"title": "via 9085"}}, asAlice), "alice", "via 9085", nil)
	})

	t.Run("updatePost by the owner changes only the members given and advances updatedAt", func(t *testing.T) {
		p := c.create(asAlice, "before")
		time.Sleep(5 * time.Millisecond) // so the update lands in a later millisecond
		out := check(t, c.graphql(site, `mutation($id: ID!) { updatePost(id: $id, input: {title: "after"}) { id title body createdAt updatedAt } }`,
			map[string]any{"id": p.ID}, asAlice), gqlWant{data: anyData})
		var got struct{ UpdatePost postOut }
		json.Unmarshal(out.Data, &got)
		u := got.UpdatePost
		if u.ID != p.ID || u.Title != "after" || u.Body == nil || *u.Body != *p.Body || u.CreatedAt != p.CreatedAt || u.UpdatedAt <= p.UpdatedAt {
			t.Errorf("updatePost = %+v; want the title changed, the body and createdAt kept, updatedAt after %s", u, p.UpdatedAt)
		}
		if doc, _ := storedPost(t, p.ID); doc["title"] != "after" || doc["body"] != *p.Body {
			t.Errorf("stored %v", doc)
		}
	})
	t.Run("updatePost with a null body removes the body", func(t *testing.T) {
		p := c.create(asAlice, "with body")
		check(t, c.graphql(site, `mutation($id: ID!) { updatePost(id: $id, input: {body: null}) { title body } }`, map[string]any{"id": p.ID}, asAlice),
			dataOnly(`{"updatePost": {"title": "with body", "body": null}}`))
		if doc, _ := storedPost(t, p.ID); doc["body"] != nil || doc["title"] != "with body" {
			t.Errorf("stored %v; want the title kept and no body", doc)
		}
	})
	t.Run("deletePost by the owner returns the id, and the post is gone", func(t *testing.T) {
		p := c.create(asAlice, "doomed")
		check(t, c.graphql(site, `mutation($id: ID!) { deletePost(id: $id) }`, map[string]any{"id": p.ID}, bearer(idp.token(claims("alice"), "RS256"))),
			dataOnly(`{"deletePost": %q}`, p.ID))
		if _, ok := storedPost(t, p.ID); ok {
			t.Error("the post is still stored")
		}
		check(t, c.graphql(site, `query($id: ID!) { post(id: $id) { id } }`, map[string]any{"id": p.ID}), dataOnly(`{"post": null}`))
	})

	p := c.create(asAlice, "alice's")
	id := map[string]any{"id": p.ID}
	missing := map[string]any{"id": store.NewID(time.Now())}
	update := func(input string) string {
		return `mutation($id: ID!) { updatePost(id: $id, input: ` + input + `) { id title } }`
	}
	const remove = `mutation($id: ID!) { deletePost(id: $id) }`
	runCases(t, c, []gqlCase{
		{name: "createPost with a userId in the input is refused by validation", query: `mutation { createPost(input: {title: "t", userId: "bob"}) { id } }`, header: []string{asAlice},
			want: requestError(400, "GRAPHQL_VALIDATION_FAILED", `"userId" is not defined by type "PostInput"`)},
		{name: "createPost without a title is refused by validation", query: `mutation { createPost(input: {body: "b"}) { id } }`, header: []string{asAlice},
			want: requestError(400, "GRAPHQL_VALIDATION_FAILED", "title")},
		{name: "createPost with an input variable holding a userId is refused", query: create, vars: map[string]any{"in": map[string]any{"title": "t", "userId": "bob"}}, header: []string{asAlice},
			want: requestError(400, "BAD_USER_INPUT", `$in has no field "userId"`)},
		{name: "createPost with an empty title is BAD_USER_INPUT naming title", query: `mutation { createPost(input: {title: ""}) { id } }`, header: []string{asAlice},
			want: fieldError(`null`, "BAD_USER_INPUT", "title is required", "title", `["createPost"]`)},
		{name: "createPost with a blank title is BAD_USER_INPUT naming title", query: `mutation { createPost(input: {title: " \t\n "}) { id } }`, header: []string{asAlice},
			want: fieldError(`null`, "BAD_USER_INPUT", "title is required", "title", `["createPost"]`)},
		{name: "createPost with a title of 301 characters is BAD_USER_INPUT naming title", query: create, vars: map[string]any{"in": map[string]any{"title": strings.Repeat("t", 301)}}, header: []string{asAlice},
			want: fieldError(`null`, "BAD_USER_INPUT", "title must be 1 to 300 characters", "title", `["createPost"]`)},
		{name: "createPost with a body of 50,001 characters is BAD_USER_INPUT naming body", query: create, vars: map[string]any{"in": map[string]any{"title": "t", "body": strings.Repeat("b", 50_001)}}, header: []string{asAlice},
			want: fieldError(`null`, "BAD_USER_INPUT", "body must be at most 50000 characters", "body", `["createPost"]`)},
		{name: "updatePost of another user's post is FORBIDDEN and null", query: update(`{title: "bob was here"}`), vars: id, header: []string{asBob},
			want: fieldError(`null`, "FORBIDDEN", "post belongs to another user", "", `["updatePost"]`)},
		{name: "updatePost of another user's post with a bearer token is FORBIDDEN", query: update(`{title: "carol was here"}`), vars: id, header: []string{bearer(idp.token(claims("carol"), "ES256"))},
			want: fieldError(`null`, "FORBIDDEN", "post belongs to another user", "", `["updatePost"]`)},
		{name: "updatePost of a missing post is NOT_FOUND", query: update(`{title: "x"}`), vars: missing, header: []string{asAlice},
			want: fieldError(`null`, "NOT_FOUND", "post not found", "", `["updatePost"]`)},
		{name: "updatePost of a malformed id is NOT_FOUND", query: update(`{title: "x"}`), vars: map[string]any{"id": "nope"}, header: []string{asAlice},
			want: fieldError(`null`, "NOT_FOUND", "post not found", "", `["updatePost"]`)},
		{name: "updatePost with an empty title is BAD_USER_INPUT naming title", query: update(`{title: ""}`), vars: id, header: []string{asAlice},
			want: fieldError(`null`, "BAD_USER_INPUT", "title is required", "title", `["updatePost"]`)},
		{name: "updatePost with a null title is BAD_USER_INPUT naming title", query: update(`{title: null}`), vars: id, header: []string{asAlice},
			want: fieldError(`null`, "BAD_USER_INPUT", "title cannot be null", "title", `["updatePost"]`)},
		{name: "updatePost with an empty input is BAD_USER_INPUT", query: update(`{}`), vars: id, header: []string{asAlice},
			want: fieldError(`null`, "BAD_USER_INPUT", "the update is empty", "", `["updatePost"]`)},
		{name: "updatePost with a userId in the input is refused by validation", query: update(`{title: "t", userId: "bob"}`), vars: id, header: []string{asAlice},
			want: requestError(400, "GRAPHQL_VALIDATION_FAILED", `"userId" is not defined by type "PostPatch"`)},
		{name: "deletePost of another user's post is FORBIDDEN and null", query: remove, vars: id, header: []string{asBob},
			want: fieldError(`null`, "FORBIDDEN", "post belongs to another user", "", `["deletePost"]`)},
		{name: "deletePost of a missing post is NOT_FOUND", query: remove, vars: missing, header: []string{asAlice},
			want: fieldError(`null`, "NOT_FOUND", "post not found", "", `["deletePost"]`)},
		{name: "deletePost of a malformed id is NOT_FOUND", query: remove, vars: map[string]any{"id": "nope"}, header: []string{asAlice},
			want: fieldError(`null`, "NOT_FOUND", "post not found", "", `["deletePost"]`)},
		{name: "a mutation under application/json gets its field errors with 200 too", query: remove, vars: id, header: []string{asBob, acceptLegacy},
			want: gqlWant{media: legacyJSON, data: `null`, errors: []wantError{{code: "FORBIDDEN", message: "another user", path: `["deletePost"]`}}}},
	})
}

func TestGraphQLAuthentication(t *testing.T) {
	inProcess(t)
	c := startGraphQLCaddy(t)
	p := c.create(asAlice, "guarded")
	challenge := map[string]string{"WWW-Authenticate": `Bearer realm="posts"`}
	unauthenticated := gqlWant{status: 401, header: challenge, errors: []wantError{{code: "UNAUTHENTICATED", message: "authentication required"}}}
	legacy := unauthenticated
	legacy.media = legacyJSON

	mutations := map[string]string{
		"createPost": `mutation { createPost(input: {title: "anonymous"}) { id } }`,
		"updatePost": fmt.Sprintf(`mutation { updatePost(id: %q, input: {title: "anonymous"}) { id } }`, p.ID),
		"deletePost": fmt.Sprintf(`mutation { deletePost(id: %q) }`, p.ID),
	}
	var cases []gqlCase
	for _, name := range []string{"createPost", "updatePost", "deletePost"} {
		cases = append(cases,
			gqlCase{name: name + " without credentials gets 401 UNAUTHENTICATED with a Bearer challenge and runs nothing", query: mutations[name], want: unauthenticated},
			gqlCase{name: name + " without credentials gets 401 under application/json too", query: mutations[name], header: []string{acceptLegacy}, want: legacy},
			gqlCase{name: name + " with an unknown API key gets 401 invalid_token", query: mutations[name], header: []string{"X-API-Key: not-a-key"},
				want: gqlWant{status: 401, header: map[string]string{"WWW-Authenticate": `Bearer realm="posts", error="invalid_token", error_description="unknown API key"`},
					errors: []wantError{{code: "UNAUTHENTICATED", message: "unknown API key"}}}},
		)
	}
	cases = append(cases,
		gqlCase{name: "a mutation of two fields without credentials runs neither", query: `mutation { a: createPost(input: {title: "a"}) { id } b: createPost(input: {title: "b"}) { id } }`, want: unauthenticated},
		gqlCase{name: "a query needs no credentials", query: `{ __typename }`, want: dataOnly(`{"__typename": "Query"}`)},
		gqlCase{name: "basic_auth's user is not a credential without trust_caddy_auth", query: mutations["createPost"], header: []string{"Authorization: Basic " + basic("dave", davePassword)},
			want: unauthenticated},
	)
	runCases(t, c, cases)

	expired := claims("alice")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	otherAudience := claims("alice")
	otherAudience["aud"] = "another-api"
	good := idp.token(claims("alice"), "RS256")
	for _, tt := range []struct{ name, header string }{
		{"a token that is not a JWT", bearer("abc.def.ghi")},
		{"an expired token", bearer(idp.token(expired, "RS256"))},
		{"a token for another audience", bearer(idp.token(otherAudience, "ES256"))},
		{"a token with a bad signature", bearer(good[:len(good)-10])},
		{"an unknown API key", "X-API-Key: not-a-key"},
		{"a Bearer header without a token", "Authorization: Bearer"},
		{"a token with a character no token has", "Authorization: Bearer abc,def"},
	} {
		t.Run(tt.name+" on a query is refused exactly as REST refuses it", func(t *testing.T) {
			rest := c.do("GET", site+"/posts", "", tt.header)
			var restErr struct{ Error string }
			rest.decode(t, &restErr)
			if rest.status != 401 && rest.status != 400 {
				t.Fatalf("REST status = %d; want 401 or 400", rest.status)
			}
			code := "UNAUTHENTICATED"
			if rest.status == 400 {
				code = "BAD_REQUEST"
			}
			check(t, c.graphql(site, `{ __typename }`, nil, tt.header), gqlWant{status: rest.status,
				header: map[string]string{"WWW-Authenticate": rest.header.Get("WWW-Authenticate")},
				errors: []wantError{{code: code, message: restErr.Error}}})
			if !strings.HasPrefix(rest.header.Get("WWW-Authenticate"), `Bearer realm="posts", error="invalid_`) {
				t.Errorf("WWW-Authenticate = %q; want an RFC 6750 error", rest.header.Get("WWW-Authenticate"))
			}
		})
	}
	t.Run("a bearer token and an API key of different users are refused before a mutation runs", func(t *testing.T) {
		before := stored(t)
		check(t, c.graphql(site, mutations["createPost"], nil, bearer(good), asBob), gqlWant{status: 400,
			errors: []wantError{{code: "BAD_REQUEST", message: "different users"}}})
		unchanged(t, before)
	})
}

// TestGraphQLServerFaults: a database that is down or too slow makes the fields that need it
// UNAVAILABLE, in a 200 response (the operation ran), without internals; a fault in the server
// is INTERNAL_SERVER_ERROR; keys not fetched yet are a 503 to retry.
func TestGraphQLServerFaults(t *testing.T) {
	inProcess(t)
	c := startGraphQLCaddy(t)
	// The post is in the stalled site's store, so the mutations below would change it if they
	// reached the database.
	p := c.createOn(stalledSite, asAlice, "kept")
	id := map[string]any{"id": p.ID}
	unavailable := func(dataJSON, path string) gqlWant {
		return fieldError(dataJSON, "UNAVAILABLE", "the database is unavailable, try again shortly", "", path)
	}
	requests := []struct {
		name  string
		query string
		want  gqlWant
	}{
		{"posts is UNAVAILABLE and data null", `{ posts { id } }`, unavailable(`null`, `["posts"]`)},
		{"post is UNAVAILABLE and null", `query($id: ID!) { post(id: $id) { id } }`, unavailable(`{"post": null}`, `["post"]`)},
		{"user is UNAVAILABLE and null", `{ user(id: "alice") { id } }`, unavailable(`{"user": null}`, `["user"]`)},
		{"createPost is UNAVAILABLE and stores nothing", `mutation { createPost(input: {title: "lost"}) { id } }`, unavailable(`null`, `["createPost"]`)},
		{"updatePost is UNAVAILABLE and changes nothing", `mutation($id: ID!) { updatePost(id: $id, input: {title: "lost"}) { id } }`, unavailable(`null`, `["updatePost"]`)},
		{"deletePost is UNAVAILABLE and deletes nothing", `mutation($id: ID!) { deletePost(id: $id) }`, unavailable(`null`, `["deletePost"]`)},
	}
	leaks := func(t *testing.T, res response) {
		t.Helper()
		if bytes.Contains(res.body, []byte("127.0.0.1")) || bytes.Contains(bytes.ToLower(res.body), []byte("mongo")) {
			t.Errorf("the response leaks internals: %s", res.body)
		}
	}
	// Each request waits out a timeout (the dead site's server selection, the stalled site's
	// storage timeout): they are made all at once, with the proxy stalled, and nothing stored
	// may have changed after any of them.
	before := stored(t)
	var all []request
	for _, site := range []string{deadSite, stalledSite} {
		for _, r := range requests {
			all = append(all, c.graphqlRequest(site, r.query, id, asAlice))
		}
	}
	all = append(all,
		c.graphqlRequest(deadSite, `{ posts { id } }`, nil, acceptLegacy),
		c.graphqlRequest(deadSite, `query($id: ID!) { __typename post(id: $id) { id } }`, id))
	proxy.stall(true)
	responses, err := c.atOnce(all)
	proxy.stall(false)
	if err != nil {
		t.Fatal(err)
	}
	n := len(requests)
	dead, stalled, legacy, beside := responses[:n], responses[n:2*n], responses[2*n], responses[2*n+1]
	for i, r := range requests {
		t.Run("with no database listening, "+r.name, func(t *testing.T) {
			check(t, dead[i], r.want)
			leaks(t, dead[i])
			unchanged(t, before)
		})
		t.Run("past the storage timeout, "+r.name, func(t *testing.T) {
			check(t, stalled[i], r.want)
			leaks(t, stalled[i])
			unchanged(t, before)
		})
	}
	t.Run("UNAVAILABLE comes with 200 under application/json too", func(t *testing.T) {
		want := unavailable(`null`, `["posts"]`)
		want.media = legacyJSON
		check(t, legacy, want)
	})
	t.Run("a field that needs no database is answered beside an UNAVAILABLE one", func(t *testing.T) {
		check(t, beside, unavailable(`{"__typename": "Query", "post": null}`, `["post"]`))
	})

	t.Run("a stored profile the server cannot read is INTERNAL_SERVER_ERROR without the cause", func(t *testing.T) {
		// A name that is a number: MongoDB stores what it is given, and the server cannot
		// decode it. (The SQLite store's STRICT tables refuse such a row in the first place.)
		users := ferretCollection("users")
		if _, err := users.InsertOne(t.Context(), bson.D{{Key: "_id", Value: "mallory"}, {Key: "name", Value: 42}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			users.DeleteOne(ctx, bson.D{{Key: "_id", Value: "mallory"}})
		})
		res := c.graphql(mongoSite, `{ __typename user(id: "mallory") { id name } }`, nil)
		check(t, res, fieldError(`{"__typename": "Query", "user": null}`, "INTERNAL_SERVER_ERROR", "internal server error", "", `["user"]`))
		if bytes.Contains(res.body, []byte("decode")) || bytes.Contains(res.body, []byte("int32")) {
			t.Errorf("the response leaks the cause: %s", res.body)
		}
	})

	t.Run("a bearer token before the JWKS is first fetched gets 503 UNAVAILABLE with Retry-After", func(t *testing.T) {
		idp.failing.Store(true)
		t.Cleanup(func() { idp.failing.Store(false) })
		const outageSite = "http://localhost:9084"
		outage := fmt.Sprintf("\n%s {\n\tposts {\n\t\tdata_dir %s\n\t\tjwks_url %s/jwks.json?graphql-outage\n\t}\n}\n", outageSite, dataDir, idp.URL)
		c := loadGraphQLConfig(t, config()+graphQLSites()+outage)
		before := stored(t)
		res := c.graphql(outageSite, `mutation { createPost(input: {title: "too early"}) { id } }`, nil, bearer(idp.token(claims("alice"), "RS256")))
		check(t, res, gqlWant{status: 503, errors: []wantError{{code: "UNAVAILABLE", message: "keys"}}})
		if res.header.Get("Retry-After") == "" {
			t.Error("no Retry-After")
		}
		check(t, c.graphql(outageSite, `{ __typename }`, nil), dataOnly(`{"__typename": "Query"}`))
		unchanged(t, before)
	})
}

func TestGraphQLOverHTTP(t *testing.T) {
	inProcess(t)
	c := startGraphQLCaddy(t)
	p := c.create(asAlice, "over HTTP")
	twoOperations := `query A($id: ID!) { post(id: $id) { title } } query B { __typename }`

	t.Run("GET runs a query with variables and the operation operationName names", func(t *testing.T) {
		res := c.graphqlGet(site, url.Values{"query": {twoOperations}, "variables": {fmt.Sprintf(`{"id": %q}`, p.ID)}, "operationName": {"A"}})
		check(t, res, dataOnly(`{"post": {"title": "over HTTP"}}`))
		if got := res.header.Get("Vary"); got != "Accept" {
			t.Errorf("Vary = %q; want Accept", got)
		}
	})
	t.Run("HEAD answers like GET without a body", func(t *testing.T) {
		res := c.do("HEAD", site+"/graphql?"+url.Values{"query": {"{ __typename }"}}.Encode(), "")
		if res.status != 200 || len(res.body) != 0 || res.header.Get("Content-Type") != graphQLResponse+"; charset=utf-8" {
			t.Errorf("HEAD = %d %q %v", res.status, res.body, res.header)
		}
	})
	t.Run("GET of a mutation gets 405 with Allow: POST and changes nothing", func(t *testing.T) {
		before := stored(t)
		res := c.graphqlGet(site, url.Values{"query": {fmt.Sprintf(`mutation { deletePost(id: %q) }`, p.ID)}}, asAlice)
		check(t, res, gqlWant{status: 405, header: map[string]string{"Allow": "POST"}, errors: []wantError{{code: "BAD_REQUEST", message: "a mutation cannot be sent with GET; use POST"}}})
		unchanged(t, before)
	})
	t.Run("GET of a mutation named by operationName gets 405 too", func(t *testing.T) {
		before := stored(t)
		res := c.graphqlGet(site, url.Values{"query": {`query Q { __typename } mutation M { createPost(input: {title: "x"}) { id } }`}, "operationName": {"M"}}, asAlice)
		check(t, res, gqlWant{status: 405, header: map[string]string{"Allow": "POST"}, errors: []wantError{{code: "BAD_REQUEST", message: "use POST"}}})
		unchanged(t, before)
	})
	t.Run("GET cannot run a mutation that block strings hide from one reading of the document", func(t *testing.T) {
		// graphql-go's lexer ends a block string at \""", the spec does not: each reading finds
		// a different operation B. What runs is the document the server checked, never the other.
		before := stored(t)
		query := `query A { post(id: """\""") { id } } mutation B { createPost(input: {title: "via GET"}) { id } } query C { post(id: """) { id } } query B { __typename } query D { post(id: """) { id } } #""") { id } }`
		for _, header := range [][]string{{asAlice}, nil} {
			res := c.graphqlGet(site, url.Values{"query": {query}, "operationName": {"B"}}, header...)
			if bytes.Contains(res.body, []byte("createPost")) {
				t.Errorf("GET ran the mutation: %d %s", res.status, res.body)
			}
		}
		unchanged(t, before)
	})
	t.Run("GET of a query from a document that also has a mutation runs the query", func(t *testing.T) {
		res := c.graphqlGet(site, url.Values{"query": {`query Q { __typename } mutation M { createPost(input: {title: "x"}) { id } }`}, "operationName": {"Q"}})
		check(t, res, dataOnly(`{"__typename": "Query"}`))
	})
	for _, method := range []string{"PUT", "DELETE", "PATCH", "OPTIONS"} {
		t.Run(method+" gets 405 with Allow: GET, HEAD, POST", func(t *testing.T) {
			before := stored(t)
			res := c.do(method, site+"/graphql", `{"query": "mutation { createPost(input: {title: \"x\"}) { id } }"}`, jsonBody, asAlice)
			check(t, res, gqlWant{status: 405, header: map[string]string{"Allow": "GET, HEAD, POST"}, errors: []wantError{{code: "BAD_REQUEST", message: method + " is not allowed"}}})
			unchanged(t, before)
		})
	}

	post := func(body string, header ...string) response {
		return c.do("POST", site+"/graphql", body, append([]string{jsonBody}, header...)...)
	}
	t.Run("POST runs the operation operationName names of two", func(t *testing.T) {
		check(t, post(fmt.Sprintf(`{"query": %q, "operationName": "B", "variables": {"id": %q}}`, twoOperations, p.ID)), dataOnly(`{"__typename": "Query"}`))
		check(t, post(fmt.Sprintf(`{"query": %q, "operationName": "A", "variables": {"id": %q}}`, twoOperations, p.ID)), dataOnly(`{"post": {"title": "over HTTP"}}`))
	})
	t.Run("POST ignores members other clients add, such as Relay's id", func(t *testing.T) {
		check(t, post(`{"id": "q1", "query": "{ __typename }", "operationName": null, "variables": null, "extensions": {"tracing": true}}`), dataOnly(`{"__typename": "Query"}`))
	})

	// Each request error, under each media type: the spec's own answers 400; application/json
	// answers 200 for an operation refused after the body was read, and 400 for a body that
	// holds no GraphQL request.
	requestErrors := []struct {
		name          string
		body          string // a POST body, or "?"+a query string for a GET
		code, message string
		legacyStatus  int
	}{
		{"a syntax error", `{"query": "{ posts { id "}`, "GRAPHQL_PARSE_FAILED", "syntax error", 200},
		{"a syntax error over GET", "?query=" + url.QueryEscape("{ posts { id "), "GRAPHQL_PARSE_FAILED", "syntax error", 200},
		{"a field the schema does not have", `{"query": "{ posts { nope } }"}`, "GRAPHQL_VALIDATION_FAILED", `Cannot query field "nope" on type "Post"`, 200},
		{"a required variable given as null", `{"query": "query($id: ID!) { post(id: $id) { id } }", "variables": {"id": null}}`, "BAD_USER_INPUT", "$id cannot be null", 200},
		{"an input variable with a member its type does not have", `{"query": "mutation($in: PostInput!) { createPost(input: $in) { id } }", "variables": {"in": {"title": "t", "tags": []}}}`, "BAD_USER_INPUT", `$in has no field "tags"`, 200},
		{"a required variable not given", `{"query": "query($id: ID!) { post(id: $id) { id } }"}`, "BAD_USER_INPUT", "$id is required", 200},
		{"two operations and no operationName", `{"query": "query A { __typename } query B { __typename }"}`, "GRAPHQL_VALIDATION_FAILED", "name the one to run in operationName", 200},
		{"an operationName the document does not have", `{"query": "query A { __typename }", "operationName": "C"}`, "GRAPHQL_VALIDATION_FAILED", `no operation named "C"`, 200},
		{"a document without an operation", `{"query": "fragment F on Query { __typename }"}`, "GRAPHQL_VALIDATION_FAILED", "", 200},
		{"a subscription over HTTP", `{"query": "subscription { postCreated { id } }"}`, "BAD_REQUEST", "a subscription runs over a WebSocket", 400},
		{"a body that is not JSON", `{"query": `, "BAD_REQUEST", "the body is not valid JSON", 400},
		{"an empty body", ``, "BAD_REQUEST", "the body is empty", 400},
		{"a JSON array", `[{"query": "{ __typename }"}]`, "BAD_REQUEST", "must be a JSON object", 400},
		{"no query", `{"variables": {}}`, "BAD_REQUEST", "the member query is required", 400},
		{"a null query", `{"query": null}`, "BAD_REQUEST", "the member query is required", 400},
		{"no query over GET", "?variables=%7B%7D", "BAD_REQUEST", "the query parameter query is required", 400},
		{"a query that is not a string", `{"query": 42}`, "BAD_REQUEST", "the member query must be a string", 400},
		{"an operationName that is not a string", `{"query": "{ __typename }", "operationName": 1}`, "BAD_REQUEST", "operationName must be a string", 400},
		{"variables that are an array", `{"query": "{ __typename }", "variables": [1]}`, "BAD_REQUEST", "the member variables must be a JSON object", 400},
		{"variables that are a string", `{"query": "{ __typename }", "variables": "{}"}`, "BAD_REQUEST", "the member variables must be a JSON object", 400},
		{"variables over GET that are not an object", "?query=%7B__typename%7D&variables=%5B1%5D", "BAD_REQUEST", "the query parameter variables must be a JSON object", 400},
		{"variables over GET that are not JSON", "?query=%7B__typename%7D&variables=%7B", "BAD_REQUEST", "the query parameter variables must be a JSON object", 400},
		{"extensions that are not an object", `{"query": "{ __typename }", "extensions": 1}`, "BAD_REQUEST", "the member extensions must be a JSON object", 400},
		{"query given twice over GET", "?query=%7B__typename%7D&query=%7B__typename%7D", "BAD_REQUEST", `"query" is given more than once`, 400},
		{"a member given twice", `{"query": "{ __typename }", "query": "{ posts { id } }"}`, "BAD_REQUEST", `"query" is given more than once`, 400},
		{"a persisted query without its query", `{"extensions": {"persistedQuery": {"version": 1, "sha256Hash": "ecf4edb46db40b5132295c0291d62fb65d6759a9eedfa4d5d612dd5ec54a6b38"}}}`,
			"PERSISTED_QUERY_NOT_SUPPORTED", "PersistedQueryNotSupported", 400},
		{"a persisted query over GET", "?extensions=" + url.QueryEscape(`{"persistedQuery": {"version": 1, "sha256Hash": "abc"}}`),
			"PERSISTED_QUERY_NOT_SUPPORTED", "PersistedQueryNotSupported", 400},
	}
	for _, tt := range requestErrors {
		for _, media := range []string{graphQLResponse, legacyJSON} {
			status := 400
			if media == legacyJSON {
				status = tt.legacyStatus
			}
			t.Run(fmt.Sprintf("%s gets %d %s under %s", tt.name, status, tt.code, media), func(t *testing.T) {
				before := stored(t)
				var res response
				if q, ok := strings.CutPrefix(tt.body, "?"); ok {
					res = c.do("GET", site+"/graphql?"+q, "", "Accept: "+media)
				} else {
					res = post(tt.body, "Accept: "+media, asAlice)
				}
				check(t, res, gqlWant{status: status, media: media, errors: []wantError{{code: tt.code, message: tt.message}}})
				unchanged(t, before)
			})
		}
	}

	// A variable whose value its type cannot take makes the request invalid (GraphQL spec,
	// CoerceVariableValues): nothing runs.
	for _, tt := range []struct{ name, body string }{
		{"a string for an Int variable", `{"query": "query($n: Int) { posts(limit: $n) { id } }", "variables": {"n": "two"}}`},
		{"a fraction for an Int variable", `{"query": "query($n: Int) { __typename posts(limit: $n) { id } }", "variables": {"n": 1.5}}`},
		{"a string for an Int variable of a nested field", `{"query": "query($n: Int) { user(id: \"alice\") { posts(limit: $n) { id } } }", "variables": {"n": "two"}}`},
		{"a number for the String title of an input variable", `{"query": "mutation($in: PostInput!) { createPost(input: $in) { id } }", "variables": {"in": {"title": 42}}}`},
		{"a userId in an input variable", `{"query": "mutation($in: PostInput!) { createPost(input: $in) { id } }", "variables": {"in": {"title": "t", "userId": "bob"}}}`},
		{"an input variable without its required title", `{"query": "mutation($in: PostInput!) { createPost(input: $in) { id } }", "variables": {"in": {"body": "b"}}}`},
		{"a required variable not given", `{"query": "mutation($id: ID!) { deletePost(id: $id) }"}`},
		{"an Int variable over 2^31", `{"query": "query($n: Int) { posts(limit: $n) { id } }", "variables": {"n": 2147483648}}`},
	} {
		for _, media := range []string{graphQLResponse, legacyJSON} {
			status := map[string]int{graphQLResponse: 400, legacyJSON: 200}[media]
			t.Run(fmt.Sprintf("%s gets %d BAD_USER_INPUT under %s and runs nothing", tt.name, status, media), func(t *testing.T) {
				before := stored(t)
				res := post(tt.body, "Accept: "+media, asAlice)
				unchanged(t, before)
				check(t, res, gqlWant{status: status, media: media, errors: []wantError{{code: "BAD_USER_INPUT"}}})
			})
		}
	}

	for _, tt := range []struct{ name, contentType string }{
		{"text/plain", "Content-Type: text/plain"},
		{"application/x-www-form-urlencoded", "Content-Type: application/x-www-form-urlencoded"},
		{"multipart/form-data", "Content-Type: multipart/form-data; boundary=x"},
		{"application/graphql", "Content-Type: application/graphql"},
		{"no Content-Type", ""},
	} {
		for _, media := range []string{graphQLResponse, legacyJSON} {
			t.Run(fmt.Sprintf("a POST with %s gets 415 under %s and runs nothing", tt.name, media), func(t *testing.T) {
				before := stored(t)
				res := c.do("POST", site+"/graphql", `{"query": "mutation { createPost(input: {title: \"x\"}) { id } }"}`, tt.contentType, "Accept: "+media, asAlice)
				check(t, res, gqlWant{status: 415, media: media, errors: []wantError{{code: "BAD_REQUEST", message: "Content-Type must be application/json"}}})
				unchanged(t, before)
			})
		}
	}
	t.Run("a POST with application/json; charset=utf-8 is accepted", func(t *testing.T) {
		check(t, c.do("POST", site+"/graphql", `{"query": "{ __typename }"}`, "Content-Type: application/json; charset=utf-8"), dataOnly(`{"__typename": "Query"}`))
	})

	big := `{"query": "mutation { createPost(input: {title: \"big\"}) { id } }", "variables": {"pad": "` + strings.Repeat("x", 4*1024) + `"}}`
	t.Run("a body over max_body_size gets 413 and runs nothing", func(t *testing.T) {
		before := stored(t)
		check(t, c.do("POST", strictSite+"/graphql", big, jsonBody, asAlice),
			gqlWant{status: 413, errors: []wantError{{code: "BAD_REQUEST", message: "the body is larger than the limit of 4 KiB"}}})
		unchanged(t, before)
	})
	t.Run("a body over max_body_size without a Content-Length gets 413 and runs nothing", func(t *testing.T) {
		before := stored(t)
		req, _ := http.NewRequest("POST", strictSite+"/graphql", io.MultiReader(strings.NewReader(big))) // unknown length: chunked
		req.Header.Set("Content-Type", legacyJSON)
		req.Header.Set("X-API-Key", aliceKey)
		res, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		check(t, response{res.StatusCode, res.Header, b}, gqlWant{status: 413, errors: []wantError{{code: "BAD_REQUEST", message: "larger than the limit"}}})
		unchanged(t, before)
	})

	for _, tt := range []struct{ accept, media string }{
		{"", graphQLResponse},
		{"*/*", graphQLResponse},
		{"application/*", graphQLResponse},
		{"application/graphql-response+json", graphQLResponse},
		{"application/json", legacyJSON},
		{"application/json, application/graphql-response+json", graphQLResponse},
		{"application/json;q=0.9, application/graphql-response+json;q=0.8", legacyJSON},
		{"application/graphql-response+json;q=0.9, application/json;q=0.9", graphQLResponse},
		{"application/graphql-response+json;q=0.5, application/json", legacyJSON},
		{"application/json, */*;q=0.1", legacyJSON},
		{"text/html;q=0.5, application/json", legacyJSON},
	} {
		t.Run(fmt.Sprintf("Accept %q gets %s", tt.accept, tt.media), func(t *testing.T) {
			header := ""
			if tt.accept != "" {
				header = "Accept: " + tt.accept
			}
			check(t, c.graphql(site, `{ __typename }`, nil, header), gqlWant{media: tt.media, data: `{"__typename": "Query"}`})
			check(t, c.graphqlGet(site, url.Values{"query": {"{ __typename }"}}, header), gqlWant{media: tt.media, data: `{"__typename": "Query"}`})
		})
	}
	for _, accept := range []string{"text/xml", "application/xml, text/plain", "application/graphql-response+json;q=0, application/json;q=0", "application/json;q=0"} {
		t.Run(fmt.Sprintf("Accept %q gets 406 and runs nothing", accept), func(t *testing.T) {
			before := stored(t)
			res := c.graphql(site, `mutation { createPost(input: {title: "x"}) { id } }`, nil, "Accept: "+accept, asAlice)
			check(t, res, gqlWant{status: 406, media: legacyJSON, errors: []wantError{{code: "BAD_REQUEST", message: "the response can only be application/graphql-response+json or application/json"}}})
			unchanged(t, before)
		})
	}
}

func TestGraphiQL(t *testing.T) {
	inProcess(t)
	c := startGraphQLCaddy(t)
	page := c.do("GET", site+"/graphql", "", browserAccept)

	t.Run("a browser's GET gets the GraphiQL page under a Content-Security-Policy", func(t *testing.T) {
		if page.status != 200 || page.header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("got %d %q; want 200 text/html", page.status, page.header.Get("Content-Type"))
		}
		csp := page.header.Get("Content-Security-Policy")
		for _, directive := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, directive) {
				t.Errorf("Content-Security-Policy = %q; want %s in it", csp, directive)
			}
		}
		if strings.Contains(csp, "'unsafe-eval'") || strings.Contains(csp, "script-src 'self' 'unsafe-inline'") {
			t.Errorf("Content-Security-Policy = %q allows inline or eval'd scripts", csp)
		}
		if got := page.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("X-Content-Type-Options = %q", got)
		}
		if !slices.Contains(page.header.Values("Vary"), "Accept") {
			t.Errorf("Vary = %q; want Accept", page.header.Values("Vary"))
		}
		if !bytes.Contains(page.body, []byte(`src="graphql/graphiql/3.9.0/graphiql.min.js"`)) {
			t.Errorf("the page does not load GraphiQL 3.9.0:\n%s", page.body)
		}
	})
	t.Run("Accept: text/html alone gets the page too", func(t *testing.T) {
		res := c.do("GET", site+"/graphql", "", "Accept: text/html")
		if res.status != 200 || res.header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("got %d %q", res.status, res.header.Get("Content-Type"))
		}
	})
	t.Run("a browser's GET with a query in the URL gets the page, not the result", func(t *testing.T) {
		res := c.do("GET", site+"/graphql?"+url.Values{"query": {"{ __typename }"}}.Encode(), "", browserAccept)
		if res.header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("Content-Type = %q", res.header.Get("Content-Type"))
		}
	})
	t.Run("a POST with a browser's Accept never gets GraphiQL", func(t *testing.T) {
		check(t, c.graphql(site, `{ __typename }`, nil, browserAccept), dataOnly(`{"__typename": "Query"}`))
	})
	t.Run("a POST with Accept: text/html alone gets 406, not GraphiQL", func(t *testing.T) {
		check(t, c.graphql(site, `{ __typename }`, nil, "Accept: text/html"),
			gqlWant{status: 406, media: legacyJSON, errors: []wantError{{code: "BAD_REQUEST", message: "the response can only be"}}})
	})

	assets := regexp.MustCompile(`(?:src|href)="(graphql/graphiql/[^"]+)"`).FindAllSubmatch(page.body, -1)
	if len(assets) < 5 {
		t.Fatalf("the page names %d assets; want the CSS, React, ReactDOM, GraphiQL and its init script", len(assets))
	}
	for _, m := range assets {
		path := "/" + string(m[1])
		t.Run(path+" is served for good with its content type", func(t *testing.T) {
			res := c.do("GET", site+path, "", "Accept-Encoding: identity")
			want := "text/javascript; charset=utf-8"
			if strings.HasSuffix(path, ".css") {
				want = "text/css; charset=utf-8"
			}
			if res.status != 200 || len(res.body) == 0 || res.header.Get("Content-Type") != want {
				t.Fatalf("got %d %q, %d bytes; want 200 %s", res.status, res.header.Get("Content-Type"), len(res.body), want)
			}
			if got := res.header.Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
				t.Errorf("Cache-Control = %q; want public, max-age=31536000, immutable", got)
			}
			etag := res.header.Get("ETag")
			if again := c.do("GET", site+path, "", "Accept-Encoding: identity", "If-None-Match: "+etag); etag == "" || again.status != 304 {
				t.Errorf("ETag %q; a GET with If-None-Match got %d; want 304", etag, again.status)
			}
			gz := c.do("GET", site+path, "", "Accept-Encoding: gzip")
			if gz.header.Get("Content-Encoding") != "gzip" || gz.header.Get("Cache-Control") != res.header.Get("Cache-Control") {
				t.Fatalf("with Accept-Encoding: gzip, Content-Encoding = %q, Cache-Control = %q", gz.header.Get("Content-Encoding"), gz.header.Get("Cache-Control"))
			}
			zr, err := gzip.NewReader(bytes.NewReader(gz.body))
			if err != nil {
				t.Fatal(err)
			}
			if unzipped, err := io.ReadAll(zr); err != nil || !bytes.Equal(unzipped, res.body) {
				t.Errorf("the gzipped asset does not unzip to the asset (%v)", err)
			}
		})
	}
	t.Run("an asset GraphiQL does not have is 404", func(t *testing.T) {
		c.do("GET", site+"/graphql/graphiql/3.9.0/nope.js", "").wantError(t, 404, "no such GraphiQL file")
	})
	t.Run("another version's asset is 404", func(t *testing.T) {
		c.do("GET", site+"/graphql/graphiql/3.8.0/graphiql.min.js", "").wantError(t, 404, "no such GraphiQL file")
	})
	t.Run("a POST to an asset is 405 with Allow: GET, HEAD", func(t *testing.T) {
		res := c.do("POST", site+"/graphql/graphiql/3.9.0/graphiql.min.js", "{}", jsonBody)
		res.wantError(t, 405, "POST is not allowed")
		if got := res.header.Get("Allow"); got != "GET, HEAD" {
			t.Errorf("Allow = %q", got)
		}
	})
}

// introspectionQuery is graphql-js's standard introspection query (getIntrospectionQuery() of
// graphql 16), which GraphiQL and most tools send.
func introspectionQuery(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../schema/testdata/introspection.graphql")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGraphQLLimits: operations over a limit are refused before any resolver runs. The default
// limits are tried on the MongoDB site, which reaches its database through commandLog, which
// sees every command: a refused operation sends none.
func TestGraphQLLimits(t *testing.T) {
	inProcess(t)
	c := startGraphQLCaddy(t)
	p := c.createOn(mongoSite, asAlice, "limited")
	c.create(asAlice, "for the strict site") // whose query of depth 4 reads a post of alice's

	t.Run("an accepted query on the MongoDB site is seen reaching the database", func(t *testing.T) {
		n := commands().count()
		check(t, c.graphql(mongoSite, `query($id: ID!) { post(id: $id) { title } }`, map[string]any{"id": p.ID}), dataOnly(`{"post": {"title": "limited"}}`))
		if got := commands().since(n); !slices.Contains(got, "find") {
			t.Errorf("commands %v; want a find: the proxy would not see a resolver's query", got)
		}
		// The checks below that nothing changed see the site's writes only if they read its store.
		if docs := strings.Join(storedDocuments(t), "\n"); !strings.Contains(docs, p.ID) {
			t.Errorf("the FerretDB holds no post %s; the site writes elsewhere", p.ID)
		}
	})

	costly := `{ user(id:"alice") { posts(limit: 100) { author { posts(limit: 100) { id } } } } }`
	// user, 7 times posts and author, id: depth 16
	deep := `{ user(id: "alice") {` + strings.Repeat(` posts(limit: 1) { author {`, 7) + ` id` + strings.Repeat(` } }`, 7) + ` } }`
	refused := func(message string) gqlWant { return requestError(400, "GRAPHQL_VALIDATION_FAILED", message) }
	overCost := "could return more than 2000 values (max_cost)"
	for _, tt := range []struct {
		name   string
		query  string
		vars   map[string]any
		header []string
		get    bool
		want   gqlWant
	}{
		{name: "a query of 100 posts each with 100 posts of their author is over max_cost", query: costly, want: refused(overCost)},
		{name: "the same query over GET is over max_cost", query: costly, get: true, want: refused(overCost)},
		{name: "the same query under application/json is refused with 200", query: costly, header: []string{acceptLegacy},
			want: gqlWant{media: legacyJSON, errors: []wantError{{code: "GRAPHQL_VALIDATION_FAILED", message: overCost}}}},
		{name: "limits given in variables count as their values", query: `query($n: Int) { user(id: "alice") { posts(limit: $n) { author { posts(limit: $n) { id } } } } }`,
			vars: map[string]any{"n": 100}, want: refused(overCost)},
		{name: "limits from variables not given count as max_limit", query: `query($n: Int) { posts(limit: $n) { author { posts(limit: $n) { id } } } }`, want: refused(overCost)},
		{name: "lists without limits count at their defaults", query: `{ posts { author { posts { author { posts { id } } } } } }`, want: refused(overCost)},
		{name: "a fragment spread many times counts each time", query: `query { a: posts(limit: 100) { ...P } b: posts(limit: 100) { ...P } } fragment P on Post { author { posts(limit: 5) { id } } }`, want: refused(overCost)},
		{name: "a postsConnection of 100 edges each with 100 posts is over max_cost", query: `{ postsConnection(first: 100) { edges { node { author { posts(limit: 100) { id } } } } } }`, want: refused(overCost)},
		{name: "a costly mutation selection is refused and stores nothing", query: `mutation { createPost(input: {title: "costly"}) { author { posts(limit: 100) { author { posts(limit: 100) { id } } } } } }`,
			header: []string{asAlice}, want: refused(overCost)},
		{name: "a query deeper than max_depth 15 is refused", query: deep, want: refused("exceeds max depth 15")},
		{name: "a query of 16385 bytes is over max_query_length", query: `{ __typename }` + strings.Repeat(" ", 16385-len(`{ __typename }`)),
			want: refused("the query is 16385 bytes long, more than the limit of 16384 (max_query_length)")},
		{name: "introspection lists nested three deep are refused", query: `{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }`,
			want: refused("introspection lists (fields, interfaces, possibleTypes, inputFields) nest more than 2 deep")},
	} {
		t.Run(tt.name+", before any resolver", func(t *testing.T) {
			before := stored(t)
			n := commands().count()
			var res response
			if tt.get {
				params := url.Values{"query": {tt.query}}
				res = c.graphqlGet(mongoSite, params, tt.header...)
			} else {
				res = c.graphql(mongoSite, tt.query, tt.vars, tt.header...)
			}
			check(t, res, tt.want)
			if got := commands().since(n); len(got) > 0 {
				t.Errorf("the refused operation sent %v to the database; want nothing", got)
			}
			unchanged(t, before)
		})
	}
	t.Run("the over-cost query is refused alone where no database listens: no resolver ran into UNAVAILABLE", func(t *testing.T) {
		check(t, c.graphql(deadSite, costly, nil), refused(overCost))
	})

	t.Run("a query of exactly max_query_length bytes runs", func(t *testing.T) {
		check(t, c.graphql(mongoSite, `{ __typename }`+strings.Repeat(" ", 16384-len(`{ __typename }`)), nil), dataOnly(`{"__typename": "Query"}`))
	})
	t.Run("a query of depth 15 runs", func(t *testing.T) {
		// user, 6 times posts and author, posts, id: depth 15
		q := `{ user(id: "alice") {` + strings.Repeat(` posts(limit: 1) { author {`, 6) + ` posts(limit: 1) { id }` + strings.Repeat(` } }`, 6) + ` } }`
		check(t, c.graphql(mongoSite, q, nil), gqlWant{data: anyData})
	})
	t.Run("graphql-js's standard introspection query runs within the default limits", func(t *testing.T) {
		n := commands().count()
		out := check(t, c.graphql(mongoSite, introspectionQuery(t), map[string]any{}), gqlWant{data: anyData})
		var schema struct {
			Schema struct {
				QueryType, MutationType, SubscriptionType *struct{ Name string }
				Types                                     []struct{ Name string }
			} `json:"__schema"`
		}
		if err := json.Unmarshal(out.Data, &schema); err != nil {
			t.Fatal(err)
		}
		s := schema.Schema
		if s.QueryType == nil || s.QueryType.Name != "Query" || s.MutationType == nil || s.MutationType.Name != "Mutation" {
			t.Errorf("__schema = %s; want Query and Mutation", out.Data[:min(len(out.Data), 200)])
		}
		var names []string
		for _, typ := range s.Types {
			names = append(names, typ.Name)
		}
		for _, want := range []string{"Post", "User", "PostConnection", "PostEdge", "PageInfo", "PostInput", "PostPatch", "Time"} {
			if !slices.Contains(names, want) {
				t.Errorf("__schema.types %v has no %s", names, want)
			}
		}
		if got := commands().since(n); len(got) > 0 {
			t.Errorf("introspection sent %v to the database", got)
		}
	})
	t.Run("the standard introspection query runs over GET too", func(t *testing.T) {
		check(t, c.graphqlGet(site, url.Values{"query": {introspectionQuery(t)}}), gqlWant{data: anyData})
	})

	// The strict site: max_query_length 2KiB, max_depth 4, max_cost 5, introspection off.
	runCases(t, c, []gqlCase{
		{name: "with introspection off the standard introspection query is refused", site: strictSite, query: introspectionQuery(t),
			want: refused("introspection is turned off on this server")},
		{name: "with introspection off __type is refused", site: strictSite, query: `{ __type(name: "Post") { name } }`,
			want: refused("introspection is turned off on this server")},
		{name: "with introspection off __schema in a fragment is refused", site: strictSite, query: `{ ...F } fragment F on Query { __schema { queryType { name } } }`,
			want: refused("introspection is turned off on this server")},
		{name: "with introspection off __typename still works", site: strictSite, query: `{ __typename posts(limit: 1) { __typename } }`,
			want: gqlWant{data: anyData}},
		{name: "with max_cost 5 two posts with their ids, 4 values, are accepted", site: strictSite, query: `{ posts(limit: 2) { id } }`,
			want: gqlWant{data: anyData}},
		{name: "with max_cost 5 three posts with their ids, 6 values, are refused", site: strictSite, query: `{ posts(limit: 3) { id } }`,
			want: refused("could return more than 5 values (max_cost)")},
		{name: "with max_cost 5 one post with 5 aliases of its title, 6 values, is refused", site: strictSite, query: `{ posts(limit: 1) { a: title b: title c: title d: title e: title } }`,
			want: refused("could return more than 5 values (max_cost)")},
		{name: "with max_cost 5 the default of 20 posts is refused", site: strictSite, query: `{ posts { id } }`,
			want: refused("could return more than 5 values (max_cost)")},
		{name: "with max_cost 5 one post with its author's id, 3 values, is accepted", site: strictSite, query: `{ posts(limit: 1) { author { id } } }`,
			want: gqlWant{data: anyData}},
		{name: "with max_cost 5 a mutation's costly selection is refused", site: strictSite, query: `mutation { createPost(input: {title: "x"}) { author { posts(limit: 5) { id } } } }`, header: []string{asAlice},
			want: refused("could return more than 5 values (max_cost)")},
		{name: "with max_depth 4 a query of depth 4 runs", site: strictSite, query: `{ user(id: "alice") { posts(limit: 1) { author { id } } } }`,
			want: dataOnly(`{"user": {"posts": [{"author": {"id": "alice"}}]}}`)},
		{name: "with max_depth 4 a query of depth 5 is refused", site: strictSite, query: `{ user(id: "alice") { posts(limit: 1) { author { posts(limit: 1) { id } } } } }`,
			want: refused("exceeds max depth 4")},
		{name: "with max_query_length 2KiB a query of 2048 bytes runs", site: strictSite, query: `{ __typename }` + strings.Repeat(" ", 2048-len(`{ __typename }`)),
			want: dataOnly(`{"__typename": "Query"}`)},
		{name: "with max_query_length 2KiB a query of 2049 bytes is refused", site: strictSite, query: `{ __typename }` + strings.Repeat(" ", 2049-len(`{ __typename }`)),
			want: refused("the query is 2049 bytes long, more than the limit of 2048 (max_query_length)")},
	})
}

// commandLog is a TCP proxy to the FerretDB's unix socket that records the name of every
// command its clients send (the first key of an OP_MSG body), leaving out the driver's own
// handshakes and heartbeats.
type commandLog struct {
	addr string
	mu   sync.Mutex
	seen []string
}

var commands = sync.OnceValue(func() *commandLog {
	p := &commandLog{}
	p.addr = serveTCP(p.serve)
	return p
})

// monitoring are the commands the driver sends on its own, for no operation.
var monitoring = map[string]bool{"hello": true, "isMaster": true, "ismaster": true, "ping": true, "buildInfo": true, "endSessions": true}

func (p *commandLog) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("unix", ferret.Socket)
	if err != nil {
		return
	}
	defer server.Close()
	go io.Copy(client, server)
	for {
		msg, err := mongotest.ReadMessage(client)
		if err != nil {
			return
		}
		if name := mongotest.CommandName(msg); name != "" && !monitoring[name] {
			p.mu.Lock()
			p.seen = append(p.seen, name)
			p.mu.Unlock()
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// count is how many commands have been recorded.
func (p *commandLog) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seen)
}

// since returns the commands recorded after the first n.
func (p *commandLog) since(n int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen[n:])
}
