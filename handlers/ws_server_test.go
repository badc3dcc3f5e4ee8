// The WebSocket tests' server and client: an API over the embedded store behind httptest, and
// helpers that speak the protocols to it.

package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/handlers/handlerstest"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// The API keys of the WebSocket tests: alice's, and bob's.
const (
	wsKey    = "key-of-alice"
	wsBobKey = "key-of-bob"
)

// wsServer is the API with subscriptions, over the embedded store, behind an httptest server.
type wsServer struct {
	api    *API
	url    string // ws://…/graphql
	http   string // http://…
	broker *events.Broker[*posts.Event]
}

// clientIPHeader is the header by which a test gives each connection a client address: the
// API's Config.ClientIP reads it, and without it the peer's address counts.
const clientIPHeader = "X-Test-Client-IP"

// The subprotocols a client offers: graphql-ws's, and subscriptions-transport-ws's.
const (
	transportWS = "graphql-transport-ws"
	legacyWS    = "graphql-ws"
)

// message is a message of either protocol, as a client reads it.
type message struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

func newWSServer(t *testing.T, subs live.Subscriptions) *wsServer {
	t.Helper()
	return newWSServerWith(t, subs, testLimits, posts.Config{})
}

// newWSServerWith is newWSServer with limits for the schema, the rules of posts, and the
// operations of a persisted query manifest: rules' store, timeout, page size, logger and events
// are the server's own.
func newWSServerWith(t *testing.T, subs live.Subscriptions, limits schema.Limits, rules posts.Config, persisted ...schema.PersistedQuery) *wsServer {
	t.Helper()
	svc, broker := handlerstest.Posts(t, rules)
	s, err := schema.New(svc, zap.NewNop(), limits, persisted...)
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{
		Posts: svc, GraphQL: s, Subscriptions: subs, MaxBodySize: 1 << 20, MaxResponseSize: limits.MaxResponseSize, Logger: zap.NewNop(),
		ClientIP: func(r *http.Request) string { return r.Header.Get(clientIPHeader) },
		Auth:     &auth.Authenticator{APIKeyHeader: "X-API-Key", APIKeys: []auth.APIKey{mustKey(t, wsKey, "alice"), mustKey(t, wsBobKey, "bob")}},
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := a.Route(r); h != nil {
			h.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(func() { a.Close(); srv.Close() })
	return &wsServer{api: a, url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/graphql", http: srv.URL, broker: broker}
}

// open is how many WebSocket connections the API holds.
func (s *wsServer) open() int {
	return len(s.api.hub.Open())
}

func (s *wsServer) dial(t *testing.T, subprotocol string, header http.Header) *websocket.Conn {
	t.Helper()
	c, res, err := websocket.Dial(t.Context(), s.url, &websocket.DialOptions{Subprotocols: []string{subprotocol}, HTTPHeader: header})
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, res)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	if c.Subprotocol() != subprotocol {
		t.Fatalf("subprotocol %q; want %q", c.Subprotocol(), subprotocol)
	}
	return c
}

func send(t *testing.T, c *websocket.Conn, m string) {
	t.Helper()
	if err := c.Write(t.Context(), websocket.MessageText, []byte(m)); err != nil {
		t.Fatalf("write %s: %v", m, err)
	}
}

// recv reads the next message; it fails t if none comes in 5s.
func recv(t *testing.T, c *websocket.Conn) message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, data, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var m message
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return m
}

// closedWith reads until the server closes the connection and returns its code and reason.
func closedWith(t *testing.T, c *websocket.Conn) (websocket.StatusCode, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for {
		if _, _, err := c.Read(ctx); err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("the connection ended without a close frame: %v", err)
			}
			return ce.Code, ce.Reason
		}
	}
}

// initialise sends connection_init with payload and expects connection_ack.
func initialise(t *testing.T, c *websocket.Conn, payload string) {
	t.Helper()
	send(t, c, `{"type": "connection_init", "payload": `+payload+`}`)
	if m := recv(t, c); m.Type != "connection_ack" {
		t.Fatalf("after connection_init: %+v; want connection_ack", m)
	}
}

// serverConn is what the tests read of a WebSocket the server holds (handlers/ws's conn).
type serverConn interface {
	Ending() bool                    // Fail was called
	CloseCode() websocket.StatusCode // the code it closed with
	Running() int                    // the operations it runs
	Queued() int                     // the messages waiting for its writer
}

// serverConns are the API's WebSocket connections, as the server holds them.
func (s *wsServer) serverConns() []serverConn {
	var all []serverConn
	for _, c := range s.api.hub.Open() {
		if ws, ok := c.(serverConn); ok {
			all = append(all, ws)
		}
	}
	return all
}

// waitFor polls cond for up to 5s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 5s for %s", what)
		}
	}
}

// createPost writes a post through REST, as alice.
func (s *wsServer) createPost(t *testing.T, title string) string {
	t.Helper()
	return s.createPostOf(t, `{"title": "`+title+`"}`)
}

// bigBody is a body of as many characters as a post may have, each of which JSON escapes to 6
// bytes ("<" is \u003c): an event that selects it is some 300 KB, so that a few of them fill
// the loopback connection's buffers.
var bigBody = strings.Repeat("<", posts.MaxBodyLength)

// createBigPost writes a post with bigBody through REST, as alice.
func (s *wsServer) createBigPost(t *testing.T, title string) string {
	t.Helper()
	return s.createPostOf(t, `{"title": "`+title+`", "body": "`+bigBody+`"}`)
}

// createPostOf writes the post of the JSON document doc through REST, as alice.
func (s *wsServer) createPostOf(t *testing.T, doc string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.http+"/posts", strings.NewReader(doc))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", wsKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var p struct{ ID string }
	if res.StatusCode != http.StatusCreated || json.NewDecoder(res.Body).Decode(&p) != nil {
		t.Fatalf("POST /posts: %d", res.StatusCode)
	}
	return p.ID
}
