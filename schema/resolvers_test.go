package schema_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

func TestQueriesAndMutations(t *testing.T) {
	s := newSchema(t)
	first := create(t, s, alice, "first")
	second := create(t, s, alice, "second")
	bobs := create(t, s, bob, "bob's")

	t.Run("post returns the post with times as the REST API writes them", func(t *testing.T) {
		data, codes := exec(t, s, posts.Caller{}, `query($id: ID!) { post(id: $id) { id userId title body createdAt } }`, map[string]any{"id": first})
		var out struct {
			Post struct{ ID, UserID, Title, Body, CreatedAt string }
		}
		json.Unmarshal([]byte(data), &out)
		if codes != nil || out.Post.ID != first || out.Post.UserID != "alice" || out.Post.Title != "first" || len(out.Post.CreatedAt) != len("2026-11-21T04:35:44.036Z") || !strings.HasSuffix(out.Post.CreatedAt, "Z") {
			t.Errorf("got %s %v", data, codes)
		}
	})
	t.Run("post is null for a missing or malformed id", func(t *testing.T) {
		for _, id := range []string{"6b011fa03aa928307595aeda", "nope"} {
			if data, codes := exec(t, s, posts.Caller{}, `query($id: ID!) { post(id: $id) { id } }`, map[string]any{"id": id}); data != `{"post":null}` || codes != nil {
				t.Errorf("post(%q) = %s %v; want null", id, data, codes)
			}
		}
	})
	t.Run("posts come newest first and filter by user", func(t *testing.T) {
		data, _ := exec(t, s, posts.Caller{}, `{ posts { id } }`, nil)
		if want := `{"posts":[{"id":"` + bobs + `"},{"id":"` + second + `"},{"id":"` + first + `"}]}`; data != want {
			t.Errorf("posts = %s; want %s", data, want)
		}
		data, _ = exec(t, s, posts.Caller{}, `{ posts(userId: "bob") { id } }`, nil)
		if want := `{"posts":[{"id":"` + bobs + `"}]}`; data != want {
			t.Errorf("posts(userId) = %s; want %s", data, want)
		}
	})
	t.Run("postsConnection pages with cursors that posts(after) accepts too", func(t *testing.T) {
		data, _ := exec(t, s, posts.Caller{}, `{ postsConnection(first: 2) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }`, nil)
		var out struct {
			PostsConnection struct {
				Edges []struct {
					Cursor string
					Node   struct{ ID string }
				}
				PageInfo struct {
					HasNextPage bool
					EndCursor   string
				}
			}
		}
		json.Unmarshal([]byte(data), &out)
		c := out.PostsConnection
		if len(c.Edges) != 2 || !c.PageInfo.HasNextPage || c.PageInfo.EndCursor != c.Edges[1].Cursor {
			t.Fatalf("first page = %s", data)
		}
		next, _ := exec(t, s, posts.Caller{}, `query($a: String) { posts(after: $a) { id } }`, map[string]any{"a": c.PageInfo.EndCursor})
		if want := `{"posts":[{"id":"` + first + `"}]}`; next != want {
			t.Errorf("after endCursor = %s; want %s", next, want)
		}
		last, _ := exec(t, s, posts.Caller{}, `query($a: String) { postsConnection(after: $a) { pageInfo { hasNextPage } } }`, map[string]any{"a": c.PageInfo.EndCursor})
		if last != `{"postsConnection":{"pageInfo":{"hasNextPage":false}}}` {
			t.Errorf("last page = %s", last)
		}
	})
	t.Run("user returns the profile and the posts, and the email only to the user", func(t *testing.T) {
		q := `{ user(id: "alice") { id name email posts(limit: 1) { title author { id } } } }`
		data, _ := exec(t, s, alice, q, nil)
		if want := `{"user":{"id":"alice","name":"Alice","email":"alice@example.com","posts":[{"title":"second","author":{"id":"alice"}}]}}`; data != want {
			t.Errorf("as alice: %s; want %s", data, want)
		}
		data, _ = exec(t, s, bob, q, nil)
		if want := `{"user":{"id":"alice","name":"Alice","email":null,"posts":[{"title":"second","author":{"id":"alice"}}]}}`; data != want {
			t.Errorf("as bob: %s; want %s", data, want)
		}
		if data, _ := exec(t, s, bob, `{ user(id: "nobody") { id } }`, nil); data != `{"user":null}` {
			t.Errorf("unknown user: %s", data)
		}
	})
	t.Run("the authors of a list carry their profiles, and the email only for the caller", func(t *testing.T) {
		data, _ := exec(t, s, alice, `{ posts { author { id name email } } }`, nil)
		bobAuthor := `{"author":{"id":"bob","name":null,"email":null}}`
		aliceAuthor := `{"author":{"id":"alice","name":"Alice","email":"alice@example.com"}}`
		if want := `{"posts":[` + bobAuthor + `,` + aliceAuthor + `,` + aliceAuthor + `]}`; data != want {
			t.Errorf("got %s; want %s", data, want)
		}
		data, _ = exec(t, s, bob, `{ postsConnection(first: 1, after: null) { edges { node { author { id email } } } } }`, nil)
		if want := `{"postsConnection":{"edges":[{"node":{"author":{"id":"bob","email":null}}}]}}`; data != want {
			t.Errorf("got %s; want %s", data, want)
		}
	})
	t.Run("updatePost changes only what is given, and body null removes the body", func(t *testing.T) {
		data, codes := exec(t, s, alice, `mutation($id: ID!) { updatePost(id: $id, input: {body: null}) { title body } }`, map[string]any{"id": first})
		if data != `{"updatePost":{"title":"first","body":null}}` || codes != nil {
			t.Errorf("got %s %v", data, codes)
		}
	})

	refused := []struct {
		name, query string
		caller      posts.Caller
		vars        map[string]any
		code        string
	}{
		{"createPost without credentials", `mutation { createPost(input: {title: "x"}) { id } }`, posts.Caller{}, nil, errcode.Unauthenticated.GraphQL},
		{"createPost with a blank title", `mutation { createPost(input: {title: "  "}) { id } }`, alice, nil, errcode.BadUserInput.GraphQL},
		{"updatePost of someone else's post", `mutation($id: ID!) { updatePost(id: $id, input: {title: "x"}) { id } }`, bob, map[string]any{"id": first}, errcode.Forbidden.GraphQL},
		{"updatePost with a null title", `mutation($id: ID!) { updatePost(id: $id, input: {title: null}) { id } }`, alice, map[string]any{"id": first}, errcode.BadUserInput.GraphQL},
		{"updatePost with nothing to change", `mutation($id: ID!) { updatePost(id: $id, input: {}) { id } }`, alice, map[string]any{"id": first}, errcode.BadUserInput.GraphQL},
		{"updatePost of a missing post", `mutation { updatePost(id: "6b011fa03aa928307595aeda", input: {title: "x"}) { id } }`, alice, nil, errcode.NotFound.GraphQL},
		{"deletePost without credentials", `mutation($id: ID!) { deletePost(id: $id) }`, posts.Caller{}, map[string]any{"id": first}, errcode.Unauthenticated.GraphQL},
		{"deletePost of someone else's post", `mutation($id: ID!) { deletePost(id: $id) }`, bob, map[string]any{"id": first}, errcode.Forbidden.GraphQL},
		{"posts with a limit over max_limit", `{ posts(limit: 6) { id } }`, posts.Caller{}, nil, errcode.BadUserInput.GraphQL},
		{"posts with a limit of 0", `{ posts(limit: 0) { id } }`, posts.Caller{}, nil, errcode.BadUserInput.GraphQL},
		{"posts after a cursor that is not one", `{ posts(after: "nope") { id } }`, posts.Caller{}, nil, errcode.BadUserInput.GraphQL},
	}
	for _, tc := range refused {
		t.Run(tc.name+" is refused with "+tc.code+" and changes nothing", func(t *testing.T) {
			before, _ := exec(t, s, posts.Caller{}, `{ posts { id userId title body updatedAt } }`, nil)
			_, codes := exec(t, s, tc.caller, tc.query, tc.vars)
			if len(codes) != 1 || codes[0] != tc.code {
				t.Errorf("codes = %v; want [%s]", codes, tc.code)
			}
			if after, _ := exec(t, s, posts.Caller{}, `{ posts { id userId title body updatedAt } }`, nil); after != before {
				t.Errorf("the posts changed:\n%s\n%s", before, after)
			}
		})
	}

	t.Run("deletePost deletes the caller's post and returns its id", func(t *testing.T) {
		data, codes := exec(t, s, bob, `mutation($id: ID!) { deletePost(id: $id) }`, map[string]any{"id": bobs})
		if data != `{"deletePost":"`+bobs+`"}` || codes != nil {
			t.Errorf("got %s %v", data, codes)
		}
		if data, _ := exec(t, s, bob, `query($id: ID!) { post(id: $id) { id } }`, map[string]any{"id": bobs}); data != `{"post":null}` {
			t.Errorf("after delete: %s", data)
		}
	})
}

// TestNoNPlusOne counts the store calls of nested queries: authors are read in one query per
// list, never one per post.
func TestNoNPlusOne(t *testing.T) {
	commands := &callLog{}
	s := newSchema(t, commands)
	for _, caller := range []posts.Caller{alice, bob, {UserID: "carol", Method: auth.MethodAPIKey, Name: "Carol"}} {
		for range 3 {
			create(t, s, caller, "by "+caller.UserID)
		}
	}

	queries := []struct{ name, query string }{
		{"posts with their authors", `{ posts(limit: 5) { title author { name } } }`},
		{"a connection with its authors", `{ postsConnection(first: 5) { edges { node { author { id name } } } } }`},
		{"a user with their posts and the posts' author", `{ user(id: "alice") { name posts { title author { name } } } }`},
		{"a user whose credential gave no name, with their posts", `{ user(id: "bob") { posts(limit: 5) { author { id name } } } }`},
	}
	for _, q := range queries {
		t.Run(q.name+" takes at most 2 round trips", func(t *testing.T) {
			commands.reset()
			res := s.Do(auth.NewContext(t.Context(), bob), schema.Request{Query: q.query})
			if len(res.Errors) > 0 {
				t.Fatalf("errors: %v", res.Errors)
			}
			if got := commands.list(); len(got) > 2 {
				t.Errorf("%d round trips: %v; want at most 2 (data %s)", len(got), got, res.Data)
			}
		})
	}
}
