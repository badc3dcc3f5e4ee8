// GraphQL versions end to end: Post.version, and expectedVersion on updatePost and deletePost.
package caddymodule

import (
	"testing"
)

func TestGraphQLVersions(t *testing.T) {
	inProcess(t)
	c := startGraphQLCaddy(t)
	const update = `mutation($id: ID!, $v: Int) { updatePost(id: $id, input: {title: "changed"}, expectedVersion: $v) { title version } }`
	const remove = `mutation($id: ID!, $v: Int) { deletePost(id: $id, expectedVersion: $v) }`

	t.Run("a post's version is the one REST answers and stores", func(t *testing.T) {
		p := c.create(asAlice, "versioned")
		check(t, c.graphql(site, `query($id: ID!) { post(id: $id) { version } }`, map[string]any{"id": p.ID}), dataOnly(`{"post": {"version": 1}}`))
		check(t, c.graphql(site, `mutation { createPost(input: {title: "new"}) { version } }`, nil, asAlice), dataOnly(`{"createPost": {"version": 1}}`))
	})
	t.Run("updatePost at the post's version changes it and answers the next version, stored", func(t *testing.T) {
		p := c.create(asAlice, "at 1")
		check(t, c.graphql(site, update, map[string]any{"id": p.ID, "v": 1}, asAlice), dataOnly(`{"updatePost": {"title": "changed", "version": 2}}`))
		if doc, _ := storedPost(t, p.ID); doc["version"] != int64(2) || doc["title"] != "changed" {
			t.Errorf("stored %v", doc)
		}
		if res := c.do("GET", site+"/posts/"+p.ID, ""); res.header.Get("ETag") != `"2"` {
			t.Errorf("REST's ETag after the change: %q; want \"2\"", res.header.Get("ETag"))
		}
	})
	for _, tc := range []struct{ name, query, path string }{
		{"updatePost", update, `["updatePost"]`},
		{"deletePost", remove, `["deletePost"]`},
	} {
		t.Run(tc.name+" at another version is VERSION_CONFLICT with the current version, and nothing changes", func(t *testing.T) {
			p := c.create(asAlice, "changed by another editor")
			check(t, c.graphql(site, update, map[string]any{"id": p.ID}, asAlice), gqlWant{data: anyData})
			before := stored(t)
			out := check(t, c.graphql(site, tc.query, map[string]any{"id": p.ID, "v": 1}, asAlice),
				gqlWant{data: "null", errors: []wantError{{code: "VERSION_CONFLICT", message: "it is at version 2", path: tc.path}}})
			if got := out.Errors[0].Extensions["currentVersion"]; got != float64(2) {
				t.Errorf("extensions.currentVersion = %v; want 2", got)
			}
			unchanged(t, before)
		})
	}
	t.Run("deletePost at the post's version deletes it", func(t *testing.T) {
		p := c.create(asAlice, "doomed")
		check(t, c.graphql(site, remove, map[string]any{"id": p.ID, "v": 1}, asAlice), dataOnly(`{"deletePost": %q}`, p.ID))
		if _, ok := storedPost(t, p.ID); ok {
			t.Error("the post is still stored")
		}
	})

	p := c.create(asAlice, "refused versions")
	bobs := c.create(asBob, "bob's")
	runCases(t, c, []gqlCase{
		{name: "expectedVersion 0 is BAD_USER_INPUT", query: update, vars: map[string]any{"id": p.ID, "v": 0}, header: []string{asAlice},
			want: gqlWant{data: "null", errors: []wantError{{code: "BAD_USER_INPUT", message: "expectedVersion must be a version of the post", field: "expectedVersion", path: `["updatePost"]`}}}},
		{name: "a negative expectedVersion is BAD_USER_INPUT", query: remove, vars: map[string]any{"id": p.ID, "v": -1}, header: []string{asAlice},
			want: gqlWant{data: "null", errors: []wantError{{code: "BAD_USER_INPUT", message: "expectedVersion must be a version of the post", field: "expectedVersion", path: `["deletePost"]`}}}},
		{name: "an expectedVersion that is not a whole number is BAD_USER_INPUT before anything runs", query: update, vars: map[string]any{"id": p.ID, "v": 1.5}, header: []string{asAlice},
			want: gqlWant{status: 400, errors: []wantError{{code: "BAD_USER_INPUT", message: "$v must be an Int"}}}},
		{name: "someone else's post is FORBIDDEN at any version", query: update, vars: map[string]any{"id": bobs.ID, "v": 1}, header: []string{asAlice},
			want: gqlWant{data: "null", errors: []wantError{{code: "FORBIDDEN", message: "another user", path: `["updatePost"]`}}}},
		{name: "a missing post is NOT_FOUND at any version", query: remove, vars: map[string]any{"id": "6b011fa03aa928307595aeda", "v": 1}, header: []string{asAlice},
			want: gqlWant{data: "null", errors: []wantError{{code: "NOT_FOUND", message: "post not found", path: `["deletePost"]`}}}},
	})
}
