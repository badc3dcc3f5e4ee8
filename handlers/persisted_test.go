// Tests of persisted queries over HTTP and WebSocket: Apollo's automatic persisted queries with
// POST and GET, each refusal of them with its status, and the safelist of a manifest.

package handlers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/events/eventstest"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

func sha256Hex(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// persistedQuery is the extensions member of an automatic persisted query of query.
func persistedQuery(query string) string {
	return `{"persistedQuery": {"version": 1, "sha256Hash": "` + sha256Hex(query) + `"}}`
}

// graphQLAnswer is a response of /graphql: its status, Cache-Control, and body.
type graphQLAnswer struct {
	status       int
	cacheControl string
	Data         json.RawMessage
	Errors       []struct {
		Message    string
		Extensions map[string]any
	}
}

func (a graphQLAnswer) code() string {
	if len(a.Errors) != 1 {
		return ""
	}
	code, _ := a.Errors[0].Extensions["code"].(string)
	return code
}

// askGraphQL sends a GraphQL request to s: a POST of body, or with body "" a GET of query.
func askGraphQL(t *testing.T, s *wsServer, accept, body string, query url.Values) graphQLAnswer {
	t.Helper()
	method, target := http.MethodPost, s.http+graphqlPath
	if body == "" {
		method, target = http.MethodGet, target+"?"+query.Encode()
	}
	req, _ := http.NewRequest(method, target, strings.NewReader(body))
	req.Header.Set("Content-Type", answer.ApplicationJSON)
	req.Header.Set("Accept", accept)
	req.Header.Set("X-API-Key", wsKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	a := graphQLAnswer{status: res.StatusCode, cacheControl: res.Header.Get("Cache-Control")}
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatalf("%d %s: %v", res.StatusCode, data, err)
	}
	return a
}

func TestAutomaticPersistedQueriesOverHTTP(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	id := s.createPost(t, "persisted")
	query := `query Post($id: ID!) { post(id: $id) { title } }`
	variables := `{"id": "` + id + `"}`
	hashOnly := `{"operationName": "Post", "variables": ` + variables + `, "extensions": ` + persistedQuery(query) + `}`
	withQuery := `{"query": ` + string(answer.MustJSON(query)) + `, "variables": ` + variables + `, "extensions": ` + persistedQuery(query) + `}`
	get := url.Values{"operationName": {"Post"}, "variables": {variables}, "extensions": {persistedQuery(query)}}
	steps := []struct {
		name, accept, body string
		get                url.Values
		status             int
		code               string // of the one error, or "" for the post
	}{
		{"the hash alone, before any registration, is not found (200, as Apollo Server answers)", answer.GraphQLResponseJSON, hashOnly, nil, 200, errcode.PersistedQueryNotFound.GraphQL},
		{"the hash alone is not found in application/json either", answer.ApplicationJSON, hashOnly, nil, 200, errcode.PersistedQueryNotFound.GraphQL},
		{"with GET, the hash alone is not found", answer.GraphQLResponseJSON, "", get, 200, errcode.PersistedQueryNotFound.GraphQL},
		{"the query with its hash runs and registers it", answer.GraphQLResponseJSON, withQuery, nil, 200, ""},
		{"then the hash alone runs it", answer.GraphQLResponseJSON, hashOnly, nil, 200, ""},
		{"and the hash alone runs it with GET", answer.ApplicationJSON, "", get, 200, ""},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			a := askGraphQL(t, s, step.accept, step.body, step.get)
			switch {
			case a.status != step.status:
				t.Errorf("status %d; want %d", a.status, step.status)
			case step.code == "" && (len(a.Errors) > 0 || string(a.Data) != `{"post":{"title":"persisted"}}`):
				t.Errorf("data %s, errors %+v; want the post", a.Data, a.Errors)
			case step.code != "" && (a.code() != step.code || a.Data != nil || a.cacheControl != "no-store"):
				t.Errorf("data %s, errors %+v, Cache-Control %q; want %s, uncacheable", a.Data, a.Errors, a.cacheControl, step.code)
			case step.code == errcode.PersistedQueryNotFound.GraphQL && a.Errors[0].Message != "PersistedQueryNotFound":
				t.Errorf("message %q; want Apollo's PersistedQueryNotFound, on which its clients retry", a.Errors[0].Message)
			}
		})
	}
	t.Run("a mutation registered with POST is refused by hash with GET", func(t *testing.T) {
		mutation := `mutation { createPost(input: {title: "by hash"}) { id } }`
		if a := askGraphQL(t, s, answer.GraphQLResponseJSON, `{"query": `+string(answer.MustJSON(mutation))+`, "extensions": `+persistedQuery(mutation)+`}`, nil); a.status != 200 || len(a.Errors) > 0 {
			t.Fatalf("registering: %d %+v", a.status, a.Errors)
		}
		if a := askGraphQL(t, s, answer.GraphQLResponseJSON, "", url.Values{"extensions": {persistedQuery(mutation)}}); a.status != http.StatusMethodNotAllowed {
			t.Errorf("status %d %+v; want 405", a.status, a.Errors)
		}
	})
	if got := s.api.cfg.GraphQL.CacheStats(); got.Registrations != 2 {
		t.Errorf("stats %+v; want the query and the mutation registered", got)
	}
}

func TestAutomaticPersistedQueryRefusals(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	query := `{ posts { id } }`
	extensions := func(pq string) string {
		return `{"query": "` + query + `", "extensions": {"persistedQuery": ` + pq + `}}`
	}
	for _, tt := range []struct {
		name, body string
		status     int
		code       errcode.Code
		message    string
	}{
		{"a hash that is another query's", extensions(`{"version": 1, "sha256Hash": "` + sha256Hex("{ other }") + `"}`), 400, errcode.PersistedQueryHashMismatch, "provided sha does not match query"},
		{"version 2", extensions(`{"version": 2, "sha256Hash": "` + sha256Hex(query) + `"}`), 400, errcode.BadRequest, "version must be 1"},
		{"a version that is a string", extensions(`{"version": "1", "sha256Hash": "` + sha256Hex(query) + `"}`), 400, errcode.BadRequest, "version must be 1"},
		{"no version", extensions(`{"sha256Hash": "` + sha256Hex(query) + `"}`), 400, errcode.BadRequest, "version must be 1"},
		{"no hash", extensions(`{"version": 1}`), 400, errcode.BadRequest, "sha256Hash must be the SHA-256 of the query"},
		{"a hash in capitals", extensions(`{"version": 1, "sha256Hash": "` + strings.ToUpper(sha256Hex(query)) + `"}`), 400, errcode.BadRequest, "64 lowercase hexadecimal digits"},
		{"a hash of 63 digits", extensions(`{"version": 1, "sha256Hash": "` + sha256Hex(query)[1:] + `"}`), 400, errcode.BadRequest, "64 lowercase hexadecimal digits"},
		{"a hash that is a number", extensions(`{"version": 1, "sha256Hash": 12}`), 400, errcode.BadRequest, "64 lowercase hexadecimal digits"},
		{"a persistedQuery that is a string", extensions(`"` + sha256Hex(query) + `"`), 400, errcode.BadRequest, "persistedQuery must be a JSON object"},
		{"a null persistedQuery and no query", `{"extensions": {"persistedQuery": null}}`, 400, errcode.BadRequest, "query is required"},
	} {
		t.Run(tt.name+" is refused with "+tt.code.GraphQL, func(t *testing.T) {
			for _, accept := range []string{answer.GraphQLResponseJSON, answer.ApplicationJSON} { // 400 in either
				a := askGraphQL(t, s, accept, tt.body, nil)
				if a.status != tt.status || a.code() != tt.code.GraphQL || !strings.Contains(a.Errors[0].Message, tt.message) {
					t.Errorf("%s: %d %+v; want %d %s %q", accept, a.status, a.Errors, tt.status, tt.code.GraphQL, tt.message)
				}
			}
		})
	}
	if got := s.api.cfg.GraphQL.CacheStats(); got != (schema.CacheStats{}) {
		t.Errorf("stats %+v; want no document looked up, none registered", got)
	}
}

// safelistServer is a server whose schema runs only the operations of a manifest of listed.
func safelistServer(t *testing.T, listed string) *wsServer {
	manifest, _ := json.Marshal(map[string]any{"format": schema.ManifestFormat, "version": 1,
		"operations": []map[string]string{{"id": sha256Hex(listed), "body": listed, "name": "Listed", "type": "query"}}})
	ops, err := schema.ParseManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	return newWSServerWith(t, testSubscriptions, with(testLimits, func(l *schema.Limits) { l.PersistedOnly = true }), posts.Config{}, ops...)
}

func TestASafelistOverHTTP(t *testing.T) {
	listed := `query Listed { __typename }`
	s := safelistServer(t, listed)
	for _, tt := range []struct {
		name, body string
		get        url.Values
		status     int
		code       string
	}{
		{"the listed operation runs by hash", `{"extensions": ` + persistedQuery(listed) + `}`, nil, 200, ""},
		{"the listed operation runs by hash with GET", "", url.Values{"extensions": {persistedQuery(listed)}}, 200, ""},
		{"the listed operation runs by its text", `{"query": "` + listed + `"}`, nil, 200, ""},
		{"a hash not in the list is refused with 404", `{"extensions": ` + persistedQuery(`{ posts { id } }`) + `}`, nil, 404, errcode.PersistedQueryNotInList.GraphQL},
		{"a query not in the list is refused with 403", `{"query": "{ posts { id } }"}`, nil, 403, errcode.QueryNotInSafelist.GraphQL},
		{"a query not in the list is refused with 403 with GET", "", url.Values{"query": {"{ posts { id } }"}}, 403, errcode.QueryNotInSafelist.GraphQL},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := askGraphQL(t, s, answer.GraphQLResponseJSON, tt.body, tt.get)
			switch {
			case a.status != tt.status || a.code() != tt.code:
				t.Errorf("%d %+v; want %d %s", a.status, a.Errors, tt.status, tt.code)
			case tt.code == "" && string(a.Data) != `{"__typename":"Query"}`:
				t.Errorf("data %s", a.Data)
			case tt.code != "" && a.cacheControl != "no-store":
				t.Errorf("Cache-Control %q; want the refusal uncacheable", a.cacheControl)
			}
		})
	}
}

func TestAutomaticPersistedQueriesOverWebSocket(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	c := s.dial(t, transportWS, nil)
	initialise(t, c, `{"X-API-Key": "`+wsKey+`"}`)
	subscription := `subscription { postCreated { title } }`
	send(t, c, `{"id": "1", "type": "subscribe", "payload": {"extensions": `+persistedQuery(subscription)+`}}`)
	if m := recv(t, c); m.ID != "1" || m.Type != "error" || !strings.Contains(string(m.Payload), errcode.PersistedQueryNotFound.GraphQL) {
		t.Errorf("the hash alone before any registration: %+v %s", m, m.Payload)
	}
	send(t, c, `{"id": "2", "type": "subscribe", "payload": {"query": "`+subscription+`", "extensions": `+persistedQuery(subscription)+`}}`)
	waitFor(t, "the subscription", func() bool { return s.broker.Subscribers() == 1 })
	send(t, c, `{"id": "3", "type": "subscribe", "payload": {"extensions": `+persistedQuery(subscription)+`}}`)
	waitFor(t, "the second subscriber of the feed", func() bool { return s.api.cfg.GraphQL.FeedClients() == 1 && s.serverConns()[0].Running() == 2 })
	s.createPost(t, "to both")
	got, cursors := map[string]string{}, map[string]string{}
	for range 2 {
		m := recv(t, c)
		if m.Type != "next" {
			t.Fatalf("got %+v %s; want an event", m, m.Payload)
		}
		got[m.ID], cursors[m.ID] = eventstest.SplitEvent(t, m.Payload)
	}
	if want := `{"postCreated":{"title":"to both"}}`; got["2"] != want || got["3"] != want {
		t.Errorf("events %v; want %s to 2 and 3", got, want)
	}
	if cursors["2"] != cursors["3"] {
		t.Errorf("the one event with cursors %v; want one", cursors)
	}
	send(t, c, `{"id": "4", "type": "subscribe", "payload": {"query": "`+subscription+`", "extensions": `+persistedQuery("{ other }")+`}}`)
	if m := recv(t, c); m.ID != "4" || m.Type != "error" || !strings.Contains(string(m.Payload), errcode.PersistedQueryHashMismatch.GraphQL) {
		t.Errorf("a mismatched hash: %+v %s", m, m.Payload)
	}
	send(t, c, `{"id": "5", "type": "subscribe", "payload": {"extensions": {"persistedQuery": {"version": 2, "sha256Hash": "`+sha256Hex(subscription)+`"}}}}`)
	if code, reason := closedWith(t, c); code != websocket.StatusCode(errcode.BadRequest.Close) || !strings.Contains(reason, "version") {
		t.Errorf("a malformed persistedQuery closed with %d %q; want %d, as any malformed payload", code, reason, errcode.BadRequest.Close)
	}
}
