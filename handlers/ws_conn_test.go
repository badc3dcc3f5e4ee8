// Tests of a WebSocket connection: both protocols, their close codes, the upgrades and operations
// it refuses, and what is left of it once it ends.

package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/events/eventstest"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/internal/race"
	"github.com/postsedge/caddy-posts/posts"
)

func TestGraphQLTransportWS(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	c := s.dial(t, transportWS, nil)
	initialise(t, c, `{"X-API-Key": "`+wsKey+`"}`)

	send(t, c, `{"id": "1", "type": "subscribe", "payload": {"query": "subscription { postCreated { title userId } }"}}`)
	waitFor(t, "the subscription", func() bool { return s.broker.Subscribers() == 1 })
	s.createPost(t, "over REST")
	var first string // the cursor of the first event
	if m := recv(t, c); m.ID != "1" || m.Type != "next" {
		t.Errorf("after a REST POST: %+v %s", m, m.Payload)
	} else if data, cursor := eventstest.SplitEvent(t, m.Payload); data != `{"postCreated":{"title":"over REST","userId":"alice"}}` {
		t.Errorf("after a REST POST: %s", m.Payload)
	} else {
		first = cursor
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
	if m, ok := got["1 next"]; !ok || !strings.Contains(string(m.Payload), "over the socket") {
		t.Errorf("no event for the mutation: %v", got)
	} else if _, cursor := eventstest.SplitEvent(t, m.Payload); cursor == first {
		t.Errorf("the mutation's event with the cursor %s of the event before it", cursor)
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
	s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.InitTimeout, s.ReadLimit = 300*time.Millisecond, 1024 }))
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
	t.Run("a connection_init naming another user than the upgrade closes with 4403", func(t *testing.T) {
		c := s.dial(t, transportWS, http.Header{"X-Api-Key": {wsKey}})
		send(t, c, `{"type": "connection_init", "payload": {"X-API-Key": "`+wsBobKey+`"}}`)
		code, reason := closedWith(t, c)
		if code != websocket.StatusCode(errcode.MalformedCredentials.Close) || !strings.Contains(reason, "different users") {
			t.Errorf("closed with %d %q; want 4403, different users", code, reason)
		}
	})
	t.Run("a connection_init naming the upgrade's user is acknowledged", func(t *testing.T) {
		c := s.dial(t, transportWS, http.Header{"X-Api-Key": {wsKey}})
		initialise(t, c, `{"X-API-Key": "`+wsKey+`"}`)
	})
	t.Run("no connection_init within the timeout closes with 4408, on time", func(t *testing.T) {
		start := time.Now()
		c := s.dial(t, transportWS, nil)
		code, _ := closedWith(t, c)
		elapsed := time.Since(start)
		if code != websocket.StatusCode(errcode.InitTimeout.Close) || !race.Enabled && (elapsed < 270*time.Millisecond || elapsed > 330*time.Millisecond+100*time.Millisecond) {
			t.Errorf("closed with %d after %v; want 4408 after 300ms (±10%%, plus the dial)", code, elapsed)
		}
	})
	t.Run("the API's Close ends connections with 1001", func(t *testing.T) {
		other := newWSServer(t, testSubscriptions)
		c := other.dial(t, transportWS, nil)
		initialise(t, c, `{}`)
		other.api.Close()
		if code, _ := closedWith(t, c); code != websocket.StatusGoingAway {
			t.Errorf("closed with %d; want 1001", code)
		}
	})
}

func TestWebSocketUpgradesThatAreRefused(t *testing.T) {
	s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.OriginPatterns = []string{"app.example.com"} }))
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
		strict := newWSServerWith(t, testSubscriptions, testLimits, posts.Config{SubscriptionsRequireAuth: true})
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
		capped := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.MaxSubscriptions = 1 }))
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
		s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.MaxConnections = 1 }))
		s.dial(t, transportWS, nil) // its place is held from before the upgrade
		_, res, err := websocket.Dial(t.Context(), s.url, &websocket.DialOptions{Subprotocols: []string{transportWS}})
		if err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
			t.Errorf("dial: %v, %v; want 503 with Retry-After", err, res)
		}
	})
	t.Run("an id reused right after complete is tracked, and counted against max_subscriptions", func(t *testing.T) {
		s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.MaxSubscriptions = 1 }))
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
	s := newWSServer(t, testSubscriptions)
	c := s.dial(t, legacyWS, nil)
	initialise(t, c, `{"x-api-key": "`+wsKey+`"}`)
	if m := recv(t, c); m.Type != "ka" {
		t.Errorf("after connection_ack: %+v; want ka", m)
	}
	send(t, c, `{"id": "a", "type": "start", "payload": {"query": "subscription { postCreated { title } }"}}`)
	waitFor(t, "the subscription", func() bool { return s.broker.Subscribers() == 1 })
	s.createPost(t, "legacy")
	if m := recv(t, c); m.ID != "a" || m.Type != "data" {
		t.Errorf("got %+v %s", m, m.Payload)
	} else if data, _ := eventstest.SplitEvent(t, m.Payload); data != `{"postCreated":{"title":"legacy"}}` {
		t.Errorf("got %s", m.Payload)
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
	s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.MaxConnectionsPerUser = s.MaxConnections }))
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

// TestAPongSaysTheSubscriptionsBeforeItRun has a client send a hundred distinct subscribes and a
// ping at once, and write a post as soon as the pong comes: the protocol acknowledges no
// subscribe, so the pong is what tells it that they run, and every one of them answers the post.
func TestAPongSaysTheSubscriptionsBeforeItRun(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	c := s.dial(t, transportWS, http.Header{"X-Api-Key": {wsKey}})
	c.SetReadLimit(1 << 20)
	initialise(t, c, `{}`)
	const subscriptions = 100
	for i := range subscriptions {
		send(t, c, fmt.Sprintf(`{"id": "%d", "type": "subscribe", "payload": {"query": "subscription { postCreated { t%d: title } }"}}`, i, i))
	}
	send(t, c, `{"type": "ping"}`)
	if m := recv(t, c); m.Type != "pong" {
		t.Fatalf("after the subscribes and a ping: %+v; want pong", m)
	}
	s.createPost(t, "written once the pong came")
	answered := map[string]bool{}
	for len(answered) < subscriptions {
		m := recv(t, c) // fails t if none comes in 5 s: a subscription that missed the post
		if m.Type != "next" {
			t.Fatalf("%+v; want next", m)
		}
		answered[m.ID] = true
	}
}
