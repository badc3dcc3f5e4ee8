// GraphQL mutations end to end, their credentials, and database and server faults.
package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/postsedge/caddy-posts/auth/authtest"
	"github.com/postsedge/caddy-posts/store"
)

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
		created(t, c.graphql(site, create, map[string]any{"in": map[string]any{"title": "by token"}}, bearer(idp.Token(authtest.Claims("carol"), "ES256"))), "carol", "by token", nil)
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
		check(t, c.graphql(site, `mutation($id: ID!) { deletePost(id: $id) }`, map[string]any{"id": p.ID}, bearer(idp.Token(authtest.Claims("alice"), "RS256"))),
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
		{name: "updatePost of another user's post with a bearer token is FORBIDDEN", query: update(`{title: "carol was here"}`), vars: id, header: []string{bearer(idp.Token(authtest.Claims("carol"), "ES256"))},
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
			gqlCase{name: name + " with an unknown API key gets 401 invalid_token", query: mutations[name], header: []string{"Authorization: ApiKey not-a-key"},
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

	expired := authtest.Claims("alice")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	otherAudience := authtest.Claims("alice")
	otherAudience["aud"] = "another-api"
	good := idp.Token(authtest.Claims("alice"), "RS256")
	for _, tt := range []struct{ name, header string }{
		{"a token that is not a JWT", bearer("abc.def.ghi")},
		{"an expired token", bearer(idp.Token(expired, "RS256"))},
		{"a token for another audience", bearer(idp.Token(otherAudience, "ES256"))},
		{"a token with a bad signature", bearer(good[:len(good)-10])},
		{"an unknown API key", "Authorization: ApiKey not-a-key"},
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
	resume(t)
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
		idp.Failing.Store(true)
		t.Cleanup(func() { idp.Failing.Store(false) })
		outageSite := extraSite
		outage := fmt.Sprintf("\n%s {\n\tposts {\n\t\tdata_dir %s\n\t\tjwks_url %s/jwks.json?graphql-outage\n\t}\n}\n", outageSite, dataDir, idp.URL)
		c := loadGraphQLConfig(t, config()+graphQLSites()+outage)
		before := stored(t)
		res := c.graphql(outageSite, `mutation { createPost(input: {title: "too early"}) { id } }`, nil, bearer(idp.Token(authtest.Claims("alice"), "RS256")))
		check(t, res, gqlWant{status: 503, errors: []wantError{{code: "UNAVAILABLE", message: "keys"}}})
		if res.header.Get("Retry-After") == "" {
			t.Error("no Retry-After")
		}
		check(t, c.graphql(outageSite, `{ __typename }`, nil), dataOnly(`{"__typename": "Query"}`))
		unchanged(t, before)
	})
}
