//go:build ecosystem

package ecosystem

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// password is the one whose hash the basic_auth recipe holds.
const password = "correct horse battery staple"

func TestBasicAuth(t *testing.T) {
	s := start(t, "basic_auth", setup{debug: true})
	basic := func(user, password string) string {
		return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	}
	alice := basic("alice", password)
	var id string

	t.Run("alice's post is hers: the basic-auth user is its userId", func(t *testing.T) {
		res := s.call(t, "POST", "/posts", `{"title": "behind basic_auth"}`, alice)
		if res.status != 201 || postOf(t, res).UserID != "alice" {
			t.Fatalf("%d %s; want 201 and userId alice", res.status, res.body)
		}
		id = postOf(t, res).ID
		if got := res.header.Get("Cache-Control"); got != "private, no-store" {
			t.Errorf("Cache-Control %q; want private, no-store: Caddy found the user, Vary cannot name how", got)
		}
		if res := s.call(t, "GET", "/posts/"+id, "", alice); res.status != 200 {
			t.Errorf("reading it back: %d %s", res.status, res.body)
		}
	})
	refusals := []struct{ name, header string }{
		{"a wrong password", basic("alice", "wrong horse")},
		{"a user basic_auth does not know", basic("mallory", password)},
		{"no credentials", ""},
	}
	for _, r := range refusals {
		t.Run(r.name+" is basic_auth's 401, and stores nothing", func(t *testing.T) {
			res := s.call(t, "POST", "/posts", `{"title": "refused"}`, r.header)
			if res.status != 401 || !strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("%d, WWW-Authenticate %q; want 401 with basic_auth's Basic challenge", res.status, res.header.Get("WWW-Authenticate"))
			}
			if n := s.stored(t); n != 1 {
				t.Errorf("%d posts stored; want alice's one", n)
			}
		})
	}
	t.Run("the password is in no log line and no file of the data directory", func(t *testing.T) {
		secrets := []string{password, strings.TrimPrefix(alice, "Authorization: Basic ")}
		if !strings.Contains(s.out.String(), `"level":"debug"`) {
			t.Fatalf("Caddy's log has no debug line to look in:\n%s", s.out)
		}
		for _, secret := range secrets {
			if strings.Contains(s.out.String(), secret) {
				t.Errorf("Caddy's log holds %q:\n%s", secret, s.out)
			}
		}
		filepath.WalkDir(s.home, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			for _, secret := range secrets {
				if err == nil && strings.Contains(string(data), secret) {
					t.Errorf("%s holds %q", path, secret)
				}
			}
			return err
		})
	})
}

func TestForwardAuth(t *testing.T) {
	s := start(t, "forward_auth", setup{replace: map[string]string{"localhost:9091": newGateway(t)}})
	var alicesPost string

	t.Run("alice's session makes her the author, over REST and GraphQL", func(t *testing.T) {
		res := s.call(t, "POST", "/posts", `{"title": "through the gateway"}`, "Cookie: session=alice-session")
		if res.status != 201 || postOf(t, res).UserID != "alice" {
			t.Fatalf("%d %s; want 201 and userId alice", res.status, res.body)
		}
		alicesPost = postOf(t, res).ID
		if got := res.header.Get("Cache-Control"); got != "private, no-store" {
			t.Errorf("Cache-Control %q; want private, no-store: Vary cannot name the cookie", got)
		}
		gql := s.call(t, "POST", "/graphql", `{"query": "mutation { createPost(input: {title: \"by mutation\"}) { author { id } } }"}`, "Cookie: session=alice-session")
		if gql.status != 200 || !strings.Contains(gql.body, `"author":{"id":"alice"}`) {
			t.Errorf("the mutation: %d %s", gql.status, gql.body)
		}
	})
	t.Run("a Remote-User header the client sends is replaced by the gateway's", func(t *testing.T) {
		res := s.call(t, "POST", "/posts", `{"title": "bob's, whatever he says"}`, "Cookie: session=bob-session", "Remote-User: alice")
		if res.status != 201 || postOf(t, res).UserID != "bob" {
			t.Errorf("%d %s; want 201 and userId bob", res.status, res.body)
		}
	})
	t.Run("the author is the one who may change it: bob's change of alice's post is a 403", func(t *testing.T) {
		res := s.call(t, "PATCH", "/posts/"+alicesPost, `{"title": "bob's now"}`, "Cookie: session=bob-session")
		if res.status != 403 {
			t.Errorf("%d %s; want 403", res.status, res.body)
		}
	})
	t.Run("without a session the gateway's 401 reaches the client, and nothing is stored", func(t *testing.T) {
		before := s.stored(t)
		res := s.call(t, "POST", "/posts", `{"title": "anonymous"}`, "Remote-User: alice")
		if res.status != 401 || res.body != "log in at the gateway first\n" {
			t.Errorf("%d %q; want the gateway's 401", res.status, res.body)
		}
		if after := s.stored(t); after != before {
			t.Errorf("%d posts stored, %d before", after, before)
		}
	})
}

func TestForwardAuthBehindACache(t *testing.T) {
	s := start(t, "forward_auth", setup{first: "cache", replace: map[string]string{"localhost:9091": newGateway(t)}})
	created := s.call(t, "POST", "/posts", `{"title": "kept by no cache"}`, "Cookie: session=alice-session")
	if created.status != 201 {
		t.Fatalf("creating a post: %d %s", created.status, created.body)
	}
	// The cache, first in the site, sees only the cookie, which Vary does not name: an answer it
	// kept for alice would be found for bob.
	id := postOf(t, created).ID
	for _, path := range []string{"/posts/" + id, "/posts", "/graphql?" + url.Values{"query": {`{ post(id: "` + id + `") { title author { id email } } }`}}.Encode()} {
		for _, session := range []string{"alice-session", "bob-session"} {
			res := s.call(t, "GET", path, "", "Cookie: session="+session)
			if status := res.header.Get("Cache-Status"); res.status != 200 || status == "" || strings.Contains(status, "stored") || strings.Contains(status, "hit") {
				t.Errorf("%s for %s: %d, Cache-Status %q; want 200, neither stored nor from the cache", path, session, res.status, status)
			}
		}
	}
}

// newGateway runs the authentication gateway of the forward_auth tests and returns its address:
// a session cookie names a user (alice, bob), with an email; anything else is told to log in.
func newGateway(t *testing.T) string {
	users := map[string]string{"session=alice-session": "alice", "session=bob-session": "bob"}
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok := users[r.Header.Get("Cookie")]
		if r.URL.Path != "/verify" || r.Method != http.MethodGet || !ok {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte("log in at the gateway first\n"))
			return
		}
		w.Header().Set("Remote-User", user)
	}))
	t.Cleanup(gateway.Close)
	return gateway.Listener.Addr().String()
}

// post is the JSON of a post.
type post struct {
	ID, UserID, Title string
}

// postOf reads the post that an answer holds.
func postOf(t *testing.T, res answer) post {
	t.Helper()
	var p post
	if err := json.Unmarshal([]byte(res.body), &p); err != nil {
		t.Fatalf("not a post: %s", res.body)
	}
	return p
}
