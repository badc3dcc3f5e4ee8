package handlers

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/rest"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// keyedServer is the API over the embedded store, REST and GraphQL, behind an httptest server.
type keyedServer struct {
	url   string
	store store.Store
}

func newKeyedServer(t *testing.T) *keyedServer {
	t.Helper()
	a, st := newKeyedAPI(t, restKey)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { a.Route(r).ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	return &keyedServer{url: srv.URL, store: st}
}

// newKeyedAPI is the API, REST and GraphQL, over a fresh embedded store, with alice's API key
// key; both are released when t ends.
func newKeyedAPI(t *testing.T, key string) (*API, store.Store) {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc := posts.NewService(posts.Config{Store: st, Timeout: 5 * time.Second, MaxLimit: 100, Logger: zap.NewNop()})
	graph, err := schema.New(svc, zap.NewNop(), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{
		Posts: svc, GraphQL: graph, MaxBodySize: 1 << 20, MaxResponseSize: testLimits.MaxResponseSize, Logger: zap.NewNop(),
		Auth: &auth.Authenticator{APIKeyHeader: "X-API-Key", APIKeys: []auth.APIKey{mustKey(t, key, "alice")}},
	})
	t.Cleanup(a.Close)
	return a, st
}

// do sends a JSON request as alice with the Idempotency-Key key ("" for none).
func (s *keyedServer) do(t *testing.T, method, path, key, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", restKey)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(answer.IdempotencyKeyHeader, key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{res.StatusCode, res.Header, data}
}

func (s *keyedServer) count(t *testing.T) int {
	t.Helper()
	all, err := s.store.ListPosts(t.Context(), store.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(all)
}

// sameAnswer fails unless again is first sent again: its status, the headers that matter and
// the body byte for byte, marked as replayed.
func sameAnswer(t *testing.T, again, first response) {
	t.Helper()
	if again.status != first.status || !bytes.Equal(again.body, first.body) {
		t.Errorf("the retry got %d %s; want %d %s", again.status, again.body, first.status, first.body)
	}
	for _, name := range []string{"Content-Type", "Location", "X-Content-Type-Options"} {
		if again.header.Get(name) != first.header.Get(name) {
			t.Errorf("%s is %q; want %q", name, again.header.Get(name), first.header.Get(name))
		}
	}
	if again.header.Get(answer.ReplayedHeader) != "true" || first.header.Get(answer.ReplayedHeader) != "" {
		t.Errorf("%s: %q on the retry, %q on the first; want true, then none", answer.ReplayedHeader, again.header.Get(answer.ReplayedHeader), first.header.Get(answer.ReplayedHeader))
	}
}

func TestAKeyedPOSTIsAnsweredOnce(t *testing.T) {
	s := newKeyedServer(t)
	first := s.do(t, "POST", "/posts", "k1", `{"title": "Hello", "body": "first"}`)
	if first.status != http.StatusCreated || !strings.HasPrefix(first.header.Get("Location"), "/posts/") {
		t.Fatalf("the first: %d %v %s", first.status, first.header, first.body)
	}
	t.Run("a retry gets the same answer, replayed", func(t *testing.T) {
		sameAnswer(t, s.do(t, "POST", "/posts", "k1", `{"title": "Hello", "body": "first"}`), first)
	})
	t.Run("the same post in other JSON, with the key quoted, is the same request", func(t *testing.T) {
		sameAnswer(t, s.do(t, "POST", "/posts", `"k1"`, "{ \"body\" : \"first\",\n \"title\": \"Hell\\u006f\" }"), first)
	})
	t.Run("another post with the key is refused with 422", func(t *testing.T) {
		res := s.do(t, "POST", "/posts", "k1", `{"title": "Hello", "body": "second"}`)
		wantError(t, res.status, res.body, http.StatusUnprocessableEntity, "Idempotency-Key was sent before with another request")
	})
	t.Run("a bad key is refused with 400 before the body is read", func(t *testing.T) {
		res := s.do(t, "POST", "/posts", "a b", `not json`)
		wantError(t, res.status, res.body, http.StatusBadRequest, "Idempotency-Key must be 1 to 255 printable ASCII characters")
	})
	t.Run("a PATCH or a DELETE with a key is refused with 400 and changes nothing", func(t *testing.T) {
		path := first.header.Get("Location")
		for _, r := range []struct{ method, body string }{{"PATCH", `{"title": "changed"}`}, {"DELETE", ""}} {
			res := s.do(t, r.method, path, "k2", r.body)
			wantError(t, res.status, res.body, http.StatusBadRequest, r.method+" /posts/{id} does not take one")
		}
		if res := s.do(t, "GET", path, "", ""); !bytes.Contains(res.body, []byte(`"title":"Hello"`)) {
			t.Errorf("the post is %s", res.body)
		}
	})
	if n := s.count(t); n != 1 {
		t.Errorf("%d posts stored; want 1", n)
	}
}

func TestAKeyedGraphQLCreatePostIsAnsweredOnce(t *testing.T) {
	s := newKeyedServer(t)
	const create = `{"query": "mutation($t: String!) { made: createPost(input: {title: $t}) { id title } }", "variables": {"t": "By GraphQL"}}`
	first := s.do(t, "POST", "/graphql", "g1", create)
	if first.status != http.StatusOK || !bytes.Contains(first.body, []byte(`"made":{"id":`)) {
		t.Fatalf("the first: %d %s", first.status, first.body)
	}
	t.Run("a retry gets the same response, replayed", func(t *testing.T) {
		sameAnswer(t, s.do(t, "POST", "/graphql", "g1", create), first)
	})
	t.Run("the same key with other variables is IDEMPOTENCY_KEY_REUSED", func(t *testing.T) {
		res := s.do(t, "POST", "/graphql", "g1", strings.Replace(create, "By GraphQL", "Other", 1))
		wantGraphQLCode(t, res, http.StatusUnprocessableEntity, errcode.IdempotencyKeyReused.GraphQL)
	})
	t.Run("another mutation with a key is refused with 400 and runs not", func(t *testing.T) {
		res := s.do(t, "POST", "/graphql", "g2", `{"query": "mutation { a: createPost(input: {title: \"a\"}) { id } b: createPost(input: {title: \"b\"}) { id } }"}`)
		wantGraphQLCode(t, res, http.StatusBadRequest, errcode.BadIdempotencyKey.GraphQL)
	})
	t.Run("a query ignores a key, as a read changes nothing", func(t *testing.T) {
		res := s.do(t, "POST", "/graphql", "not a key", `{"query": "{ posts { title } }"}`)
		if res.status != http.StatusOK || !bytes.Contains(res.body, []byte("By GraphQL")) || res.header.Get(answer.ReplayedHeader) != "" {
			t.Errorf("got %d %s", res.status, res.body)
		}
	})
	t.Run("a createPost refused by a rule keeps nothing under its key", func(t *testing.T) {
		blank := s.do(t, "POST", "/graphql", "g3", `{"query": "mutation { createPost(input: {title: \" \"}) { id } }"}`)
		wantGraphQLCode(t, blank, http.StatusOK, errcode.BadUserInput.GraphQL)
		fixed := s.do(t, "POST", "/graphql", "g3", `{"query": "mutation { createPost(input: {title: \"fixed\"}) { id } }"}`)
		if fixed.status != http.StatusOK || !bytes.Contains(fixed.body, []byte(`"createPost":{"id"`)) {
			t.Errorf("the corrected request got %d %s", fixed.status, fixed.body)
		}
	})
	if n := s.count(t); n != 2 {
		t.Errorf("%d posts stored; want 2", n)
	}
}

// wantGraphQLCode checks a GraphQL response of status want whose first error has code.
func wantGraphQLCode(t *testing.T, res response, want int, code string) {
	t.Helper()
	var body struct {
		Errors []struct {
			Message    string
			Extensions struct{ Code string }
		}
	}
	if err := json.Unmarshal(res.body, &body); err != nil || res.status != want || len(body.Errors) == 0 || body.Errors[0].Extensions.Code != code {
		t.Errorf("got %d %s; want %d with %s", res.status, res.body, want, code)
	}
}

// A POST whose first attempt stored its post and stopped before it kept its answer (the state a
// crash leaves on MongoDB, or of a GraphQL create), the post deleted since, then the retry once
// the first's hold has ended: 410, naming the post, and the post stays deleted.
func TestARetryWhoseKeysPostWasDeletedIsGone(t *testing.T) {
	s := newKeyedServer(t)
	now := time.Now()
	in := posts.NewPost{Title: "Hello"}
	id := store.NewID(now)
	keys := s.store.(store.IdempotencyStore)
	if _, _, err := keys.ReserveKey(t.Context(), store.IdempotencyRecord{UserID: "alice", Key: "k", Fingerprint: rest.Fingerprint(httptest.NewRequest("POST", "/posts", nil), in),
		PostID: id, Attempt: 1, LockedUntil: now.Add(-time.Second), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.InsertPost(t.Context(), store.Post{ID: id, UserID: "alice", Title: in.Title, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if res := s.do(t, "DELETE", "/posts/"+id, "", ""); res.status != http.StatusNoContent {
		t.Fatalf("the delete: %d %s", res.status, res.body)
	}
	for _, attempt := range []string{"the retry", "the retry after it"} {
		t.Run(attempt+" is 410, naming the post, and creates nothing", func(t *testing.T) {
			res := s.do(t, "POST", "/posts", "k", `{"title": "Hello"}`)
			wantError(t, res.status, res.body, http.StatusGone, "the post this Idempotency-Key created ("+id+") was deleted since")
			if n := s.count(t); n != 0 {
				t.Errorf("%d posts stored; want none", n)
			}
			if res := s.do(t, "GET", "/posts/"+id, "", ""); res.status != http.StatusNotFound {
				t.Errorf("a GET of the post: %d %s; want 404", res.status, res.body)
			}
		})
	}
}
