package schema_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

var (
	alice = auth.Identity{UserID: "alice", Method: auth.MethodJWT, Name: "Alice", Email: "alice@example.com"}
	bob   = auth.Identity{UserID: "bob", Method: auth.MethodAPIKey}
)

func newSchema(t *testing.T, calls ...*callLog) *schema.Schema {
	return newSchemaWith(t, 5, schema.Limits{}, calls...)
}

// newStore is a fresh embedded store, closed when the test ends.
func newStore(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newSchemaWith is a schema over a fresh embedded store, with the given max_limit and limits;
// the store's calls go to calls, when given.
func newSchemaWith(t testing.TB, maxLimit int, limits schema.Limits, calls ...*callLog) *schema.Schema {
	t.Helper()
	st := newStore(t)
	if len(calls) > 0 {
		st = counted{st, calls[0]}
	}
	return newSchemaOver(t, st, maxLimit, limits)
}

// exec runs an operation as caller and returns its data as JSON and the codes of its errors.
func exec(t testing.TB, s *schema.Schema, caller auth.Identity, query string, vars map[string]any) (data string, codes []string) {
	t.Helper()
	res := s.Do(auth.NewContext(t.Context(), caller), schema.Request{Query: query, Variables: vars})
	for _, e := range res.Errors {
		code, _ := e.Extensions["code"].(string)
		codes = append(codes, code)
		if code == "" {
			t.Errorf("error without a code: %v", e)
		}
	}
	return string(res.Data), codes
}

func create(t testing.TB, s *schema.Schema, caller auth.Identity, title string) string {
	t.Helper()
	data, codes := exec(t, s, caller, `mutation($t: String!) { createPost(input: {title: $t, body: "b"}) { id } }`, map[string]any{"t": title})
	if codes != nil {
		t.Fatalf("createPost: %v", codes)
	}
	var out struct{ CreatePost struct{ ID string } }
	json.Unmarshal([]byte(data), &out)
	return out.CreatePost.ID
}

func TestEveryTypeFieldAndArgumentIsDescribed(t *testing.T) {
	s := newSchema(t)
	data, _ := exec(t, s, auth.Identity{}, `{ __schema { types { name description fields { name description args { name description } } inputFields { name description } } } }`, nil)
	type described struct{ Name, Description string }
	var out struct {
		Schema struct {
			Types []struct {
				Name, Description string
				Fields            []struct {
					Name, Description string
					Args              []described
				}
				InputFields []described
			}
		} `json:"__schema"`
	}
	if err := json.Unmarshal([]byte(data), &out); err != nil {
		t.Fatal(err)
	}
	for _, typ := range out.Schema.Types {
		if strings.HasPrefix(typ.Name, "__") || map[string]bool{"String": true, "Int": true, "Float": true, "Boolean": true, "ID": true}[typ.Name] {
			continue
		}
		if typ.Description == "" {
			t.Errorf("type %s has no description", typ.Name)
		}
		for _, f := range typ.Fields {
			if f.Description == "" {
				t.Errorf("%s.%s has no description", typ.Name, f.Name)
			}
			for _, arg := range f.Args {
				if arg.Description == "" {
					t.Errorf("the argument %s of %s.%s has no description", arg.Name, typ.Name, f.Name)
				}
			}
		}
		for _, f := range typ.InputFields {
			if f.Description == "" {
				t.Errorf("%s.%s has no description", typ.Name, f.Name)
			}
		}
	}
}

func TestQueriesAndMutations(t *testing.T) {
	s := newSchema(t)
	first := create(t, s, alice, "first")
	second := create(t, s, alice, "second")
	bobs := create(t, s, bob, "bob's")

	t.Run("post returns the post with times as the REST API writes them", func(t *testing.T) {
		data, codes := exec(t, s, auth.Identity{}, `query($id: ID!) { post(id: $id) { id userId title body createdAt } }`, map[string]any{"id": first})
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
			if data, codes := exec(t, s, auth.Identity{}, `query($id: ID!) { post(id: $id) { id } }`, map[string]any{"id": id}); data != `{"post":null}` || codes != nil {
				t.Errorf("post(%q) = %s %v; want null", id, data, codes)
			}
		}
	})
	t.Run("posts come newest first and filter by user", func(t *testing.T) {
		data, _ := exec(t, s, auth.Identity{}, `{ posts { id } }`, nil)
		if want := `{"posts":[{"id":"` + bobs + `"},{"id":"` + second + `"},{"id":"` + first + `"}]}`; data != want {
			t.Errorf("posts = %s; want %s", data, want)
		}
		data, _ = exec(t, s, auth.Identity{}, `{ posts(userId: "bob") { id } }`, nil)
		if want := `{"posts":[{"id":"` + bobs + `"}]}`; data != want {
			t.Errorf("posts(userId) = %s; want %s", data, want)
		}
	})
	t.Run("postsConnection pages with cursors that posts(after) accepts too", func(t *testing.T) {
		data, _ := exec(t, s, auth.Identity{}, `{ postsConnection(first: 2) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }`, nil)
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
		next, _ := exec(t, s, auth.Identity{}, `query($a: String) { posts(after: $a) { id } }`, map[string]any{"a": c.PageInfo.EndCursor})
		if want := `{"posts":[{"id":"` + first + `"}]}`; next != want {
			t.Errorf("after endCursor = %s; want %s", next, want)
		}
		last, _ := exec(t, s, auth.Identity{}, `query($a: String) { postsConnection(after: $a) { pageInfo { hasNextPage } } }`, map[string]any{"a": c.PageInfo.EndCursor})
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
		caller      auth.Identity
		vars        map[string]any
		code        string
	}{
		{"createPost without credentials", `mutation { createPost(input: {title: "x"}) { id } }`, auth.Identity{}, nil, errcode.Unauthenticated.GraphQL},
		{"createPost with a blank title", `mutation { createPost(input: {title: "  "}) { id } }`, alice, nil, errcode.BadUserInput.GraphQL},
		{"updatePost of someone else's post", `mutation($id: ID!) { updatePost(id: $id, input: {title: "x"}) { id } }`, bob, map[string]any{"id": first}, errcode.Forbidden.GraphQL},
		{"updatePost with a null title", `mutation($id: ID!) { updatePost(id: $id, input: {title: null}) { id } }`, alice, map[string]any{"id": first}, errcode.BadUserInput.GraphQL},
		{"updatePost with nothing to change", `mutation($id: ID!) { updatePost(id: $id, input: {}) { id } }`, alice, map[string]any{"id": first}, errcode.BadUserInput.GraphQL},
		{"updatePost of a missing post", `mutation { updatePost(id: "6b011fa03aa928307595aeda", input: {title: "x"}) { id } }`, alice, nil, errcode.NotFound.GraphQL},
		{"deletePost without credentials", `mutation($id: ID!) { deletePost(id: $id) }`, auth.Identity{}, map[string]any{"id": first}, errcode.Unauthenticated.GraphQL},
		{"deletePost of someone else's post", `mutation($id: ID!) { deletePost(id: $id) }`, bob, map[string]any{"id": first}, errcode.Forbidden.GraphQL},
		{"posts with a limit over max_limit", `{ posts(limit: 6) { id } }`, auth.Identity{}, nil, errcode.BadUserInput.GraphQL},
		{"posts with a limit of 0", `{ posts(limit: 0) { id } }`, auth.Identity{}, nil, errcode.BadUserInput.GraphQL},
		{"posts after a cursor that is not one", `{ posts(after: "nope") { id } }`, auth.Identity{}, nil, errcode.BadUserInput.GraphQL},
	}
	for _, tc := range refused {
		t.Run(tc.name+" is refused with "+tc.code+" and changes nothing", func(t *testing.T) {
			before, _ := exec(t, s, auth.Identity{}, `{ posts { id userId title body updatedAt } }`, nil)
			_, codes := exec(t, s, tc.caller, tc.query, tc.vars)
			if len(codes) != 1 || codes[0] != tc.code {
				t.Errorf("codes = %v; want [%s]", codes, tc.code)
			}
			if after, _ := exec(t, s, auth.Identity{}, `{ posts { id userId title body updatedAt } }`, nil); after != before {
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
	for _, caller := range []auth.Identity{alice, bob, {UserID: "carol", Method: auth.MethodAPIKey, Name: "Carol"}} {
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

// callLog records the store calls that read or write data: each is one database round trip.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(call string) { l.mu.Lock(); l.calls = append(l.calls, call); l.mu.Unlock() }

func (l *callLog) reset() { l.mu.Lock(); l.calls = nil; l.mu.Unlock() }

func (l *callLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// counted is a store that logs its calls.
type counted struct {
	store.Store
	log *callLog
}

func (c counted) GetPost(ctx context.Context, id string) (store.Post, error) {
	c.log.add("GetPost")
	return c.Store.GetPost(ctx, id)
}

func (c counted) ListPosts(ctx context.Context, f store.Filter) ([]store.Post, error) {
	c.log.add("ListPosts")
	return c.Store.ListPosts(ctx, f)
}

func (c counted) InsertPost(ctx context.Context, p store.Post) error {
	c.log.add("InsertPost")
	return c.Store.InsertPost(ctx, p)
}

func (c counted) UpdatePost(ctx context.Context, id, owner string, u store.Update) (store.Post, error) {
	c.log.add("UpdatePost")
	return c.Store.UpdatePost(ctx, id, owner, u)
}

func (c counted) DeletePost(ctx context.Context, id, owner string) error {
	c.log.add("DeletePost")
	return c.Store.DeletePost(ctx, id, owner)
}

func (c counted) SaveUser(ctx context.Context, u store.User) error {
	c.log.add("SaveUser")
	return c.Store.SaveUser(ctx, u)
}

func (c counted) GetUser(ctx context.Context, id string) (store.User, error) {
	c.log.add("GetUser")
	return c.Store.GetUser(ctx, id)
}

func (c counted) GetUsers(ctx context.Context, ids []string) ([]store.User, error) {
	c.log.add("GetUsers")
	return c.Store.GetUsers(ctx, ids)
}
