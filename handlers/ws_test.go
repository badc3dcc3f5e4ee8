package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

const wsKey = "key-of-alice"

// wsServer is the API with subscriptions, over the embedded store, behind an httptest server.
type wsServer struct {
	api    *API
	url    string // ws://…/graphql
	http   string // http://…
	broker *events.Broker[posts.Event]
}

// clientIPHeader is the header by which a test gives each connection a client address: the
// API's Config.ClientIP reads it, and without it the peer's address counts.
const clientIPHeader = "X-Test-Client-IP"

func newWSServer(t *testing.T, subs Subscriptions) *wsServer {
	t.Helper()
	return newWSServerWith(t, subs, schema.Limits{})
}

// newWSServerWith is newWSServer with limits for the schema.
func newWSServerWith(t *testing.T, subs Subscriptions, limits schema.Limits) *wsServer {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	broker := events.NewBroker[posts.Event](16)
	svc := posts.NewService(posts.Config{
		Store: st, Timeout: 5 * time.Second, MaxLimit: 10, Logger: zap.NewNop(), Events: broker,
	})
	s, err := schema.New(svc, zap.NewNop(), limits)
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{
		Posts: svc, GraphQL: s, Subscriptions: subs, MaxBodySize: 1 << 20, Logger: zap.NewNop(),
		ClientIP: func(r *http.Request) string { return r.Header.Get(clientIPHeader) },
		Auth:     &auth.Authenticator{APIKeyHeader: "X-API-Key", APIKeys: []auth.APIKey{mustKey(t, wsKey, "alice")}},
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
	s.api.conns.mu.Lock()
	defer s.api.conns.mu.Unlock()
	return len(s.api.conns.all)
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

// serverConns are the API's connections, as the server holds them.
func (s *wsServer) serverConns() []*wsConn {
	s.api.conns.mu.Lock()
	defer s.api.conns.mu.Unlock()
	var all []*wsConn
	for c := range s.api.conns.all {
		all = append(all, c)
	}
	return all
}

// running is how many operations c runs.
func (c *wsConn) running() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ops)
}

// queueLength is how many messages wait for c's writer.
func (c *wsConn) queueLength() int {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return len(c.queue)
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

func TestGraphQLTransportWS(t *testing.T) {
	s := newWSServer(t, Subscriptions{})
	c := s.dial(t, transportWS, nil)
	initialise(t, c, `{"X-API-Key": "`+wsKey+`"}`)

	send(t, c, `{"id": "1", "type": "subscribe", "payload": {"query": "subscription { postCreated { title userId } }"}}`)
	waitFor(t, "the subscription", func() bool { return s.broker.Subscribers() == 1 })
	s.createPost(t, "over REST")
	if m := recv(t, c); m.ID != "1" || m.Type != "next" || string(m.Payload) != `{"data":{"postCreated":{"title":"over REST","userId":"alice"}}}` {
		t.Errorf("after a REST POST: %+v %s", m, m.Payload)
	}

	send(t, c, `{"id": "2", "type": "subscribe", "payload": {"query": "mutation { createPost(input: {title: \"over the socket\"}) { title } }"}}`)
	got := map[string]message{}
	for range 3 { // the mutation's next and complete, and the event it causes, in any order
		m := recv(t, c)
		got[m.ID+" "+m.Type] = m
	}
	if m := got["2 next"]; string(m.Payload) != `{"data":{"createPost":{"title":"over the socket"}}}` {
		t.Errorf("the mutation's result: %s", m.Payload)
	}
	if _, ok := got["2 complete"]; !ok {
		t.Errorf("no complete for the mutation: %v", got)
	}
	if m := got["1 next"]; !strings.Contains(string(m.Payload), "over the socket") {
		t.Errorf("no event for the mutation: %v", got)
	}

	send(t, c, `{"type": "ping", "payload": {"n": 1}}`)
	if m := recv(t, c); m.Type != "pong" || string(m.Payload) != `{"n": 1}` {
		t.Errorf("after ping: %+v", m)
	}
	send(t, c, `{"id": "3", "type": "subscribe", "payload": {"query": "{ nope }"}}`)
	if m := recv(t, c); m.ID != "3" || m.Type != "error" || !strings.Contains(string(m.Payload), "GRAPHQL_VALIDATION_FAILED") {
		t.Errorf("an invalid operation: %+v %s", m, m.Payload)
	}
	send(t, c, `{"id": "1", "type": "complete"}`)
	waitFor(t, "the end of the subscription", func() bool { return s.broker.Subscribers() == 0 })
	s.createPost(t, "after complete")
	send(t, c, `{"type": "ping"}`)
	if m := recv(t, c); m.Type != "pong" { // nothing for the completed subscription came first
		t.Errorf("after complete: %+v %s", m, m.Payload)
	}
}

func TestGraphQLTransportWSCloseCodes(t *testing.T) {
	s := newWSServer(t, Subscriptions{InitTimeout: 300 * time.Millisecond, ReadLimit: 1024})
	subscribe := `{"id": "1", "type": "subscribe", "payload": {"query": "subscription { postCreated { id } }"}}`
	tests := []struct {
		name     string
		messages []string // after connecting
		init     bool     // send a good connection_init first
		code     websocket.StatusCode
	}{
		{"a second connection_init", []string{`{"type": "connection_init"}`}, true, websocket.StatusCode(errcode.TooManyInitialisations.Close)},
		{"subscribe before connection_ack", []string{subscribe}, false, websocket.StatusCode(errcode.NotAcknowledged.Close)},
		{"a duplicate operation id", []string{subscribe, subscribe}, true, websocket.StatusCode(errcode.SubscriberExists.Close)},
		{"a message that is not JSON", []string{`{"type": `}, true, websocket.StatusCode(errcode.BadRequest.Close)},
		{"a message of an unknown type", []string{`{"type": "start", "id": "1"}`}, true, websocket.StatusCode(errcode.BadRequest.Close)},
		{"subscribe without an id", []string{`{"type": "subscribe", "payload": {"query": "{ __typename }"}}`}, true, websocket.StatusCode(errcode.BadRequest.Close)},
		{"a bad API key in connection_init", []string{`{"type": "connection_init", "payload": {"X-API-Key": "wrong"}}`}, false, websocket.StatusCode(errcode.InvalidCredentials.Close)},
		{"a payload that is not an object", []string{`{"type": "connection_init", "payload": [1]}`}, false, websocket.StatusCode(errcode.InvalidCredentials.Close)},
		{"a subscribe whose payload is not an object", []string{`{"id": "1", "type": "subscribe", "payload": "{ __typename }"}`}, true, websocket.StatusCode(errcode.BadRequest.Close)},
		{"a credential that is not a string", []string{`{"type": "connection_init", "payload": {"Authorization": 5}}`}, false, websocket.StatusCode(errcode.InvalidCredentials.Close)},
		{"a message over the read limit", []string{`{"type": "ping", "payload": "` + strings.Repeat("x", 2000) + `"}`}, true, websocket.StatusMessageTooBig},
		{"a text message that is not UTF-8", []string{"{\"type\": \"ping\", \"payload\": \"\xff\"}"}, true, websocket.StatusInvalidFramePayloadData},
		{"a connection_init that is not UTF-8", []string{"{\"type\": \"connection_init\", \"payload\": {\"X-API-Key\": \"" + wsKey + "\xc0\"}}"}, false, websocket.StatusInvalidFramePayloadData},
		{"a connection_init naming the API key twice, in two cases", []string{`{"type": "connection_init", "payload": {"X-API-Key": "` + wsKey + `", "x-api-key": "` + wsKey + `"}}`}, false, websocket.StatusCode(errcode.InvalidCredentials.Close)},
		{"a connection_init naming Authorization twice", []string{`{"type": "connection_init", "payload": {"authorization": "Bearer a", "Authorization": "Bearer b"}}`}, false, websocket.StatusCode(errcode.InvalidCredentials.Close)},
	}
	for _, tt := range tests {
		t.Run(tt.name+" closes with "+tt.code.String(), func(t *testing.T) {
			c := s.dial(t, transportWS, nil)
			if tt.init {
				initialise(t, c, `{}`)
			}
			for _, m := range tt.messages {
				send(t, c, m)
			}
			if code, reason := closedWith(t, c); code != tt.code {
				t.Errorf("closed with %d %q; want %d", code, reason, tt.code)
			}
		})
	}
	t.Run("a binary message closes with 4400", func(t *testing.T) {
		c := s.dial(t, transportWS, nil)
		_ = c.Write(t.Context(), websocket.MessageBinary, []byte(`{"type": "connection_init"}`))
		if code, _ := closedWith(t, c); code != websocket.StatusCode(errcode.BadRequest.Close) {
			t.Errorf("closed with %d; want 4400", code)
		}
	})
	t.Run("no connection_init within the timeout closes with 4408, on time", func(t *testing.T) {
		start := time.Now()
		c := s.dial(t, transportWS, nil)
		code, _ := closedWith(t, c)
		elapsed := time.Since(start)
		if code != websocket.StatusCode(errcode.InitTimeout.Close) || elapsed < 270*time.Millisecond || elapsed > 330*time.Millisecond+100*time.Millisecond {
			t.Errorf("closed with %d after %v; want 4408 after 300ms (±10%%, plus the dial)", code, elapsed)
		}
	})
	t.Run("the API's Close ends connections with 1001", func(t *testing.T) {
		other := newWSServer(t, Subscriptions{})
		c := other.dial(t, transportWS, nil)
		initialise(t, c, `{}`)
		other.api.Close()
		if code, _ := closedWith(t, c); code != websocket.StatusGoingAway {
			t.Errorf("closed with %d; want 1001", code)
		}
	})
}

func TestWebSocketUpgradesThatAreRefused(t *testing.T) {
	s := newWSServer(t, Subscriptions{OriginPatterns: []string{"app.example.com"}})
	for _, tt := range []struct {
		name        string
		subprotocol string
		origin      string
		status      int
	}{
		{"no subprotocol of ours", "chat", "", http.StatusBadRequest},
		{"a foreign origin", transportWS, "https://evil.example", http.StatusForbidden},
	} {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			h := http.Header{}
			if tt.origin != "" {
				h.Set("Origin", tt.origin)
			}
			_, res, err := websocket.Dial(t.Context(), s.url, &websocket.DialOptions{Subprotocols: []string{tt.subprotocol}, HTTPHeader: h})
			if err == nil || res == nil || res.StatusCode != tt.status {
				t.Errorf("dial: %v, %v; want status %d", err, res, tt.status)
			}
		})
	}
	t.Run("an allowed origin, and no origin, are let in", func(t *testing.T) {
		s.dial(t, transportWS, http.Header{"Origin": {"https://app.example.com"}})
		s.dial(t, transportWS, nil)
	})
	t.Run("with subscriptions_require_auth an anonymous connection_init closes with 4403", func(t *testing.T) {
		strict := newWSServer(t, Subscriptions{RequireAuth: true})
		c := strict.dial(t, transportWS, nil)
		send(t, c, `{"type": "connection_init"}`)
		if code, _ := closedWith(t, c); code != websocket.StatusCode(errcode.InvalidCredentials.Close) {
			t.Errorf("closed with %d; want 4403", code)
		}
	})
	t.Run("an anonymous mutation over the socket is refused and runs nothing", func(t *testing.T) {
		c := s.dial(t, transportWS, nil)
		initialise(t, c, `{}`)
		send(t, c, `{"id": "m", "type": "subscribe", "payload": {"query": "mutation { createPost(input: {title: \"x\"}) { id } }"}}`)
		if m := recv(t, c); m.Type != "error" || !strings.Contains(string(m.Payload), "UNAUTHENTICATED") {
			t.Errorf("got %+v %s", m, m.Payload)
		}
	})
	t.Run("operations past MaxSubscriptions get an error, and the connection stays", func(t *testing.T) {
		capped := newWSServer(t, Subscriptions{MaxSubscriptions: 1})
		c := capped.dial(t, transportWS, nil)
		initialise(t, c, `{}`)
		send(t, c, `{"id": "1", "type": "subscribe", "payload": {"query": "subscription { postDeleted }"}}`)
		send(t, c, `{"id": "2", "type": "subscribe", "payload": {"query": "subscription { postDeleted }"}}`)
		if m := recv(t, c); m.ID != "2" || m.Type != "error" {
			t.Errorf("got %+v %s", m, m.Payload)
		}
	})
}

func TestConnectionCaps(t *testing.T) {
	t.Run("a connection over MaxConnections gets 503", func(t *testing.T) {
		s := newWSServer(t, Subscriptions{MaxConnections: 1})
		s.dial(t, transportWS, nil) // its place is held from before the upgrade
		_, res, err := websocket.Dial(t.Context(), s.url, &websocket.DialOptions{Subprotocols: []string{transportWS}})
		if err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
			t.Errorf("dial: %v, %v; want 503 with Retry-After", err, res)
		}
	})
	t.Run("an id reused right after complete is tracked, and counted against max_subscriptions", func(t *testing.T) {
		s := newWSServer(t, Subscriptions{MaxSubscriptions: 1})
		c := s.dial(t, transportWS, nil)
		initialise(t, c, `{}`)
		for range 50 {
			send(t, c, `{"id": "x", "type": "subscribe", "payload": {"query": "subscription { postCreated { id } }"}}`)
			send(t, c, `{"id": "x", "type": "complete"}`)
		}
		send(t, c, `{"id": "x", "type": "subscribe", "payload": {"query": "subscription { postDeleted }"}}`)
		send(t, c, `{"id": "y", "type": "subscribe", "payload": {"query": "subscription { postDeleted }"}}`)
		if m := recv(t, c); m.ID != "y" || m.Type != "error" {
			t.Errorf("a second operation beside x: %+v %s; want an error for y", m, m.Payload)
		}
		send(t, c, `{"id": "x", "type": "complete"}`)
		waitFor(t, "every subscription to end", func() bool { return s.broker.Subscribers() == 0 })
	})
}

func TestLegacyGraphQLWS(t *testing.T) {
	s := newWSServer(t, Subscriptions{})
	c := s.dial(t, legacyWS, nil)
	initialise(t, c, `{"x-api-key": "`+wsKey+`"}`)
	if m := recv(t, c); m.Type != "ka" {
		t.Errorf("after connection_ack: %+v; want ka", m)
	}
	send(t, c, `{"id": "a", "type": "start", "payload": {"query": "subscription { postCreated { title } }"}}`)
	waitFor(t, "the subscription", func() bool { return s.broker.Subscribers() == 1 })
	s.createPost(t, "legacy")
	if m := recv(t, c); m.ID != "a" || m.Type != "data" || string(m.Payload) != `{"data":{"postCreated":{"title":"legacy"}}}` {
		t.Errorf("got %+v %s", m, m.Payload)
	}
	send(t, c, `{"id": "a", "type": "stop"}`)
	waitFor(t, "the end of the subscription", func() bool { return s.broker.Subscribers() == 0 })
	send(t, c, `{"type": "connection_terminate"}`)
	if code, _ := closedWith(t, c); code != websocket.StatusNormalClosure {
		t.Errorf("closed with %d; want 1000", code)
	}
	t.Run("a refused connection_init gets connection_error, then 4403", func(t *testing.T) {
		c := s.dial(t, legacyWS, nil)
		send(t, c, `{"type": "connection_init", "payload": {"X-API-Key": "wrong"}}`)
		if m := recv(t, c); m.Type != "connection_error" {
			t.Errorf("got %+v", m)
		}
		if code, _ := closedWith(t, c); code != websocket.StatusCode(errcode.InvalidCredentials.Close) {
			t.Errorf("closed with %d; want 4403", code)
		}
	})
}

// TestNoGoroutineOutlivesItsConnection connects, subscribes and drops the connection without a
// close handshake, many times: afterwards no connection, no broker subscription and no
// goroutine of them is left.
func TestNoGoroutineOutlivesItsConnection(t *testing.T) {
	// The client does not wait for the server to see each connection end: more than the
	// default share of one address may still be open.
	s := newWSServer(t, Subscriptions{MaxConnectionsPerUser: DefaultMaxConnections})
	c := s.dial(t, transportWS, nil) // warm up: the store and the HTTP server start their goroutines
	initialise(t, c, `{}`)
	_ = c.CloseNow()
	waitFor(t, "the warm-up connection to end", func() bool { return s.open() == 0 })
	baseline := goleak.IgnoreCurrent()
	for range 1000 {
		c, _, err := websocket.Dial(t.Context(), s.url, &websocket.DialOptions{Subprotocols: []string{transportWS}})
		if err != nil {
			t.Fatal(err)
		}
		initialise(t, c, `{}`)
		send(t, c, `{"id": "1", "type": "subscribe", "payload": {"query": "subscription { postCreated { id } }"}}`)
		_ = c.CloseNow()
	}
	waitFor(t, "every connection to end", func() bool { return s.open() == 0 && s.broker.Subscribers() == 0 })
	http.DefaultClient.CloseIdleConnections()
	goleak.VerifyNone(t, baseline)
}

// titleReader reads a connection's messages in a goroutine of its own and hands on, in order,
// the title of each postCreated event, and "pong" for a pong.
type titleReader struct {
	titles chan string // closed when the connection ends, after err is set
	err    error
}

func readTitles(c *websocket.Conn) *titleReader {
	r := &titleReader{titles: make(chan string, 256)} // more than a test publishes: it never waits for the test
	go func() {
		defer close(r.titles)
		for {
			_, data, err := c.Read(context.Background())
			if err != nil {
				r.err = err
				return
			}
			var m struct {
				Type    string
				Payload struct {
					Data struct{ PostCreated struct{ Title string } }
				}
			}
			switch {
			case json.Unmarshal(data, &m) != nil:
				r.err = fmt.Errorf("not JSON: %.200s", data)
				return
			case m.Type == "pong":
				r.titles <- "pong"
			case m.Type == "next":
				r.titles <- m.Payload.Data.PostCreated.Title
			default:
				r.err = fmt.Errorf("unexpected: %.200s", data)
				return
			}
		}
	}()
	return r
}

// expect fails t unless the next title is want, within 5s.
func (r *titleReader) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case got, ok := <-r.titles:
		if !ok {
			t.Fatalf("the connection ended before %q: %v", want, r.err)
		}
		if got != want {
			t.Fatalf("got %q; want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no %q in 5s", want)
	}
}

// end waits for the connection to end and says why.
func (r *titleReader) end() error {
	for range r.titles {
	}
	return r.err
}

// TestASubscriberThatStopsReadingIsClosedWith1013 has one of two subscribers of a feed stop
// reading while big events keep coming: once the loopback's buffers and its send queue are
// full, it is closed with 1013, while the other goes on getting every event, and nothing of it
// is left once both leave.
func TestASubscriberThatStopsReadingIsClosedWith1013(t *testing.T) {
	// No keep-alive ping while the test runs: the slow client could not answer it in time.
	s := newWSServer(t, Subscriptions{SendQueue: 4, MaxSubscriptions: 1, KeepAlive: time.Minute})
	s.createPost(t, "warm-up") // the store, the HTTP server and client start their goroutines
	warm := s.dial(t, transportWS, nil)
	initialise(t, warm, `{}`)
	_ = warm.CloseNow()
	waitFor(t, "the warm-up connection to end", func() bool { return s.open() == 0 })
	baseline := goleak.IgnoreCurrent()

	const subscribe = `{"id": "1", "type": "subscribe", "payload": {"query": "subscription { postCreated { title body } }"}}`
	slow, fast := s.dial(t, transportWS, nil), s.dial(t, transportWS, nil)
	for _, c := range []*websocket.Conn{slow, fast} {
		c.SetReadLimit(1 << 20) // an event is some 300 KB
		initialise(t, c, `{}`)
		send(t, c, subscribe)
	}
	waitFor(t, "both subscriptions", func() bool {
		conns := s.serverConns()
		return len(conns) == 2 && conns[0].running() == 1 && conns[1].running() == 1
	})
	ending := func() int { // how many connections the server is closing
		n := 0
		for _, c := range s.serverConns() {
			if c.ending() {
				n++
			}
		}
		return n
	}

	r := readTitles(fast)
	n := 0
	for ; ending() == 0; n++ {
		if n == 100 { // some 30 MB: far more than the loopback's buffers and the queue hold
			t.Fatalf("slow is still open after %d events it did not read", n)
		}
		title := fmt.Sprint("event ", n)
		s.createBigPost(t, title)
		r.expect(t, title) // and so the feed has handed it to slow too
	}
	t.Logf("slow was closed after %d events", n)
	s.createPost(t, "after slow was closed")
	r.expect(t, "after slow was closed")
	if ending() != 1 {
		t.Errorf("%d connections are closing; want only slow's", ending())
	}

	if code, reason := closedWith(t, slow); code != websocket.StatusTryAgainLater {
		t.Errorf("slow was closed with %d %q; want 1013", code, reason)
	}
	_ = fast.Close(websocket.StatusNormalClosure, "")
	if err := r.end(); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("fast ended with %v; want 1000", err)
	}
	waitFor(t, "every connection to end", func() bool { return s.open() == 0 && s.broker.Subscribers() == 0 })
	http.DefaultClient.CloseIdleConnections()
	goleak.VerifyNone(t, baseline)
}

// TestCompleteDropsWhatIsQueuedForTheOperation completes a subscription whose events wait in
// the server's queue for a client that does not read, and reuses its id at once: none of the
// waiting events is sent, under the old operation's id or the new one's.
func TestCompleteDropsWhatIsQueuedForTheOperation(t *testing.T) {
	s := newWSServer(t, Subscriptions{KeepAlive: time.Minute})
	const subscribe = `{"id": "1", "type": "subscribe", "payload": {"query": "subscription { postCreated { title body } }"}}`
	stalled := s.dial(t, transportWS, nil)
	stalled.SetReadLimit(1 << 20) // an event is some 300 KB
	initialise(t, stalled, `{}`)
	send(t, stalled, subscribe)
	waitFor(t, "the subscription", func() bool { return s.broker.Subscribers() == 1 })
	server := s.serverConns()[0]
	witness := s.dial(t, transportWS, nil) // reads, so that the test knows when an event was delivered
	witness.SetReadLimit(1 << 20)
	initialise(t, witness, `{}`)
	send(t, witness, subscribe)
	waitFor(t, "the witness's subscription", func() bool {
		return s.open() == 2 && s.serverConns()[0].running() == 1 && s.serverConns()[1].running() == 1
	})
	r := readTitles(witness)

	// Events the client does not read fill the loopback's buffers, then wait in the queue. Its
	// next message may open its TCP window by a few events (some 1.5 MB seen): 16 waiting
	// (4.8 MB) leave some behind.
	n := 0
	for ; server.queueLength() < 16; n++ {
		if n == 100 {
			t.Fatalf("%d events wait in the queue after %d; want 16", server.queueLength(), n)
		}
		title := fmt.Sprint("event ", n)
		s.createBigPost(t, title)
		r.expect(t, title)
	}
	// The witness leaves the feed once the feed has handed every event to every listener.
	send(t, witness, `{"id": "1", "type": "complete"}`)
	send(t, witness, `{"type": "ping"}`)
	r.expect(t, "pong")

	q := server.queueLength()
	send(t, stalled, `{"id": "1", "type": "complete"}`)
	send(t, stalled, `{"id": "1", "type": "subscribe", "payload": {"query": "subscription { postDeleted }"}}`)
	send(t, stalled, `{"type": "ping"}`)
	events := 0
	for m := recv(t, stalled); m.Type != "pong"; m = recv(t, stalled) {
		if m.ID != "1" || m.Type != "next" || !strings.Contains(string(m.Payload), "postCreated") {
			t.Fatalf("before pong: %+v %.200s", m, m.Payload)
		}
		events++
	}
	if events >= n {
		t.Errorf("the client got all %d events; want none of those queued when it completed the subscription", n)
	}
	t.Logf("%d events, %d of them written before complete, %d queued then", n, events, q)
}

func TestTheSendQueueHoldsOneEventForEverySubscription(t *testing.T) {
	// A client with as many subscriptions as it may, all matching one event, is not too slow.
	if got := (Subscriptions{SendQueue: 4, MaxSubscriptions: 10}).withDefaults().SendQueue; got != 10 {
		t.Errorf("SendQueue = %d; want 10, MaxSubscriptions", got)
	}
	if got := (Subscriptions{}).withDefaults().SendQueue; got != DefaultMaxSubscriptions {
		t.Errorf("default SendQueue = %d; want %d", got, DefaultMaxSubscriptions)
	}
}
