package handlers

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// from is the header of an upgrade request from the client address ip.
func from(ip string) http.Header { return http.Header{clientIPHeader: {ip}} }

// fromWithKey is the header of an upgrade request from ip with alice's API key.
func fromWithKey(ip string) http.Header {
	return http.Header{clientIPHeader: {ip}, "X-Api-Key": {wsKey}}
}

// addressClient is the client of an anonymous caller from address (live.ClientKey).
func addressClient(address string) string { return live.ClientKey(auth.Identity{}, address) }

// userClient is the client of the user userID (live.ClientKey).
func userClient(userID string) string { return live.ClientKey(auth.Identity{UserID: userID}, "") }

// connectionsOf is how many connections the API counts against client, and how many in all.
func (s *wsServer) connectionsOf(client string) (int, int) {
	ofClient, _, all := s.api.hub.Counted(client)
	return ofClient, all
}

// feedsOf is how many distinct feeds client takes part in.
func (s *wsServer) feedsOf(client string) int { return s.api.cfg.GraphQL.ClientFeeds(client) }

// expectNothingBefore sends a ping and expects pong as the next message: whatever c sent
// before it was answered with nothing (a subscribe that started, say).
func expectNothingBefore(t *testing.T, c *websocket.Conn) {
	t.Helper()
	send(t, c, `{"type": "ping"}`)
	if m := recv(t, c); m.Type != "pong" {
		t.Fatalf("got %+v %s; want pong", m, m.Payload)
	}
}

// refusedDial dials with header and expects an HTTP refusal, whose status, Retry-After and
// error it returns.
func (s *wsServer) refusedDial(t *testing.T, header http.Header) (int, string, string) {
	t.Helper()
	c, res, err := websocket.Dial(t.Context(), s.url, &websocket.DialOptions{Subprotocols: []string{transportWS}, HTTPHeader: header})
	if err == nil {
		_ = c.CloseNow()
		t.Fatal("the upgrade was accepted")
	}
	if res == nil {
		t.Fatalf("no response: %v", err)
	}
	var body struct{ Error string }
	if res.Body != nil {
		_ = json.NewDecoder(res.Body).Decode(&body)
	}
	return res.StatusCode, res.Header.Get("Retry-After"), body.Error
}

func TestEachClientHasItsShareOfConnections(t *testing.T) {
	t.Run("an anonymous client at its share gets 429 before the upgrade, and cannot block another address", func(t *testing.T) {
		s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.MaxConnections, s.MaxConnectionsPerUser = 4, 2 }))
		held := []*websocket.Conn{s.dial(t, transportWS, from("192.0.2.1")), s.dial(t, transportWS, from("192.0.2.1"))}
		status, retry, msg := s.refusedDial(t, from("192.0.2.1"))
		if status != http.StatusTooManyRequests || retry == "" || !strings.Contains(msg, "max_connections_per_user") {
			t.Errorf("a third connection: %d, Retry-After %q, %q; want 429 with Retry-After naming max_connections_per_user", status, retry, msg)
		}
		for range 2 {
			initialise(t, s.dial(t, transportWS, from("192.0.2.2")), `{}`)
		}
		if n, _ := s.connectionsOf(addressClient("192.0.2.1")); n != 2 {
			t.Errorf("the refused upgrade left %d counted; want 2", n)
		}
		_ = held[0].Close(websocket.StatusNormalClosure, "")
		waitFor(t, "the closed connection to be given back", func() bool { n, _ := s.connectionsOf(addressClient("192.0.2.1")); return n == 1 })
		s.dial(t, transportWS, from("192.0.2.1"))
	})
	t.Run("the global max_connections still answers 503", func(t *testing.T) {
		s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.MaxConnections, s.MaxConnectionsPerUser = 2, 2 }))
		s.dial(t, transportWS, from("192.0.2.1"))
		s.dial(t, transportWS, from("192.0.2.2"))
		if status, retry, _ := s.refusedDial(t, from("192.0.2.3")); status != http.StatusServiceUnavailable || retry == "" {
			t.Errorf("over max_connections: %d, Retry-After %q; want 503 with Retry-After", status, retry)
		}
	})
	t.Run("a user's connections count together, from any address, by the upgrade request's credentials", func(t *testing.T) {
		s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.MaxConnectionsPerUser = 2 }))
		s.dial(t, transportWS, fromWithKey("192.0.2.1"))
		s.dial(t, transportWS, fromWithKey("192.0.2.2"))
		if status, _, _ := s.refusedDial(t, fromWithKey("192.0.2.3")); status != http.StatusTooManyRequests {
			t.Errorf("alice's third connection: %d; want 429", status)
		}
		s.dial(t, transportWS, from("192.0.2.3")) // the address itself has its own share
	})
	t.Run("connection_init naming a user moves the connection from its address's count to the user's", func(t *testing.T) {
		s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.MaxConnectionsPerUser = 1 }))
		c := s.dial(t, transportWS, from("192.0.2.1"))
		initialise(t, c, `{"X-API-Key": "`+wsKey+`"}`)
		if mine, _ := s.connectionsOf(addressClient("192.0.2.1")); mine != 0 {
			t.Errorf("the address still counts %d", mine)
		}
		if alice, _ := s.connectionsOf(userClient("alice")); alice != 1 {
			t.Errorf("alice counts %d; want 1", alice)
		}
		s.dial(t, transportWS, from("192.0.2.1")) // the address's place is free again
	})
	t.Run("connection_init naming a user at their share closes with 4429, and counts nothing", func(t *testing.T) {
		s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.MaxConnectionsPerUser = 1 }))
		s.dial(t, transportWS, fromWithKey("192.0.2.1"))
		for _, subprotocol := range []string{transportWS, legacyWS} {
			c := s.dial(t, subprotocol, from("192.0.2.2"))
			send(t, c, `{"type": "connection_init", "payload": {"X-API-Key": "`+wsKey+`"}}`)
			if subprotocol == legacyWS {
				if m := recv(t, c); m.Type != "connection_error" || !strings.Contains(string(m.Payload), "max_connections_per_user") {
					t.Errorf("legacy: %+v %s; want connection_error naming max_connections_per_user", m, m.Payload)
				}
			}
			if code, reason := closedWith(t, c); code != websocket.StatusCode(errcode.TooManyConnections.Close) || !strings.Contains(reason, "max_connections_per_user") {
				t.Errorf("%s: closed with %d %q; want 4429 naming max_connections_per_user", subprotocol, code, reason)
			}
			waitFor(t, "the refused connection to be given back", func() bool { n, _ := s.connectionsOf(addressClient("192.0.2.2")); return n == 0 })
		}
		if alice, _ := s.connectionsOf(userClient("alice")); alice != 1 {
			t.Errorf("alice counts %d; want 1", alice)
		}
	})
	t.Run("every count is back to zero once the connections close", func(t *testing.T) {
		s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.MaxConnectionsPerUser = 3 }))
		var all []*websocket.Conn
		for _, h := range []http.Header{from("192.0.2.1"), from("192.0.2.1"), fromWithKey("192.0.2.2"), from("192.0.2.3")} {
			all = append(all, s.dial(t, transportWS, h))
		}
		initialise(t, all[3], `{"X-API-Key": "`+wsKey+`"}`)
		for _, c := range all {
			_ = c.CloseNow()
		}
		waitFor(t, "every count to be zero", func() bool {
			_, clients, reserved := s.api.hub.Counted("")
			return clients == 0 && reserved == 0 && len(s.api.hub.Open()) == 0
		})
	})
}

// errorOf expects the next message of c to be an error for id and returns its extensions.code
// and message.
func errorOf(t *testing.T, c *websocket.Conn, id string) (string, string) {
	t.Helper()
	m := recv(t, c)
	var errs []struct {
		Message    string
		Extensions struct{ Code string }
	}
	if m.ID != id || m.Type != "error" || json.Unmarshal(m.Payload, &errs) != nil || len(errs) != 1 {
		t.Fatalf("got %+v %s; want one error for %s", m, m.Payload, id)
	}
	return errs[0].Extensions.Code, errs[0].Message
}

func TestEachClientHasItsShareOfFeeds(t *testing.T) {
	// Three distinct feeds for the server, two for each client.
	s := newWSServerWith(t, testSubscriptions, with(testLimits, func(l *schema.Limits) { l.MaxFeeds, l.MaxFeedsPerClient = 3, 2 }), posts.Config{})
	subscribe := func(t *testing.T, c *websocket.Conn, id, field string) {
		t.Helper()
		send(t, c, `{"id": "`+id+`", "type": "subscribe", "payload": {"query": "subscription { `+field+` }"}}`)
	}
	a := s.dial(t, transportWS, from("192.0.2.1"))
	initialise(t, a, `{}`)
	subscribe(t, a, "1", "postCreated { id }")
	subscribe(t, a, "2", "postDeleted")
	subscribe(t, a, "3", "postUpdated { id }")
	code, msg := errorOf(t, a, "3")
	if code != errcode.TooManySubscriptions.GraphQL || !strings.Contains(msg, "max_distinct_subscriptions_per_client") {
		t.Errorf("a third distinct subscription: %s %q; want %s naming max_distinct_subscriptions_per_client", code, msg, errcode.TooManySubscriptions.GraphQL)
	}
	subscribe(t, a, "4", "postCreated { id }") // a feed the client is in already counts once
	expectNothingBefore(t, a)
	if n := s.feedsOf(addressClient("192.0.2.1")); n != 2 {
		t.Errorf("a takes part in %d feeds; want 2", n)
	}

	t.Run("a second connection of the same address shares its count", func(t *testing.T) {
		again := s.dial(t, transportWS, from("192.0.2.1"))
		initialise(t, again, `{}`)
		subscribe(t, again, "1", "postUpdated { id }")
		if code, _ := errorOf(t, again, "1"); code != errcode.TooManySubscriptions.GraphQL {
			t.Errorf("got %s; want %s", code, errcode.TooManySubscriptions.GraphQL)
		}
		subscribe(t, again, "2", "postDeleted")
		expectNothingBefore(t, again)
		_ = again.CloseNow()
	})
	t.Run("another address is not blocked by a client at its share", func(t *testing.T) {
		b := s.dial(t, transportWS, from("192.0.2.2"))
		initialise(t, b, `{}`)
		subscribe(t, b, "1", "postUpdated { id }")
		subscribe(t, b, "2", "postCreated { id }")
		expectNothingBefore(t, b)
		t.Run("and the global max_feeds still refuses with UNAVAILABLE", func(t *testing.T) {
			c := s.dial(t, transportWS, from("192.0.2.3"))
			initialise(t, c, `{}`)
			subscribe(t, c, "1", "postUpdated { title }") // the fourth distinct operation
			if code, _ := errorOf(t, c, "1"); code != errcode.Unavailable.GraphQL {
				t.Errorf("got %s; want %s", code, errcode.Unavailable.GraphQL)
			}
		})
		_ = b.CloseNow()
	})
	t.Run("a user's subscriptions count together from any address", func(t *testing.T) {
		for _, ip := range []string{"192.0.2.4", "192.0.2.5"} {
			c := s.dial(t, transportWS, from(ip))
			initialise(t, c, `{"X-API-Key": "`+wsKey+`"}`)
			subscribe(t, c, "1", "postDeleted")
			expectNothingBefore(t, c)
		}
		if n := s.feedsOf(userClient("alice")); n != 1 {
			t.Errorf("alice takes part in %d feeds; want 1", n)
		}
	})
	t.Run("complete gives the share back, and the connection stayed open", func(t *testing.T) {
		send(t, a, `{"id": "1", "type": "complete"}`)
		subscribe(t, a, "5", "postUpdated { id }")
		if code, _ := errorOf(t, a, "5"); code != errcode.TooManySubscriptions.GraphQL {
			t.Errorf("with id 4 still in the feed of 1: %s; want %s", code, errcode.TooManySubscriptions.GraphQL)
		}
		send(t, a, `{"id": "4", "type": "complete"}`)
		subscribe(t, a, "6", "postUpdated { id }")
		expectNothingBefore(t, a)
	})
	_ = a.CloseNow() // the subtests' connections closed as they ended
	waitFor(t, "every count to be zero", func() bool {
		return s.open() == 0 && s.api.cfg.GraphQL.FeedClients() == 0 && s.broker.Subscribers() == 0
	})
}
