package caddymodule

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/events/eventstest"
)

// wsDial opens a graphql-transport-ws connection to the main site, through Caddy.
func wsDial(t *testing.T, subprotocol string) *websocket.Conn {
	t.Helper()
	c, res, err := websocket.Dial(t.Context(), "ws://127.0.0.1:"+sitePort(site)+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{subprotocol}, Host: strings.TrimPrefix(site, "http://"),
	})
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, res)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

func wsSend(t *testing.T, c *websocket.Conn, m string) {
	t.Helper()
	if err := c.Write(t.Context(), websocket.MessageText, []byte(m)); err != nil {
		t.Fatal(err)
	}
}

type wsMessage struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

func wsRecv(t *testing.T, c *websocket.Conn) wsMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, data, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var m wsMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSubscriptionsThroughCaddy(t *testing.T) {
	inProcess(t)
	caddy := startCaddy(t)
	for _, subprotocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		t.Run(subprotocol+": a REST POST, PATCH and DELETE reach the subscriber", func(t *testing.T) {
			c := &client{t: t, http: caddy.http}
			// The subscriptions of the subtest before end after it does: gone, they cannot be
			// taken for this one's below.
			waitForSubscribers(t, func(n int) bool { return n == 0 }, "none")
			ws := wsDial(t, subprotocol)
			wsSend(t, ws, `{"type": "connection_init", "payload": {"Authorization": "ApiKey `+aliceKey+`"}}`)
			if m := wsRecv(t, ws); m.Type != "connection_ack" {
				t.Fatalf("got %+v", m)
			}
			start := map[string]string{"graphql-transport-ws": "subscribe", "graphql-ws": "start"}[subprotocol]
			next := map[string]string{"graphql-transport-ws": "next", "graphql-ws": "data"}[subprotocol]
			for id, q := range map[string]string{"c": "postCreated(userId: \"alice\") { title userId }", "u": "postUpdated { title }", "d": "postDeleted"} {
				wsSend(t, ws, `{"id": "`+id+`", "type": "`+start+`", "payload": {"query": "subscription { `+strings.ReplaceAll(q, `"`, `\"`)+` }"}}`)
			}
			waitForSubscribers(t, func(n int) bool { return n >= 3 }, "3")
			p := c.create(asAlice, "live")
			c.do("PATCH", site+"/posts/"+p.ID, `{"title": "live, edited"}`, asAlice, "Content-Type: application/merge-patch+json")
			c.do("DELETE", site+"/posts/"+p.ID, "", asAlice)
			want := map[string]string{
				"c": `{"postCreated":{"title":"live","userId":"alice"}}`,
				"u": `{"postUpdated":{"title":"live, edited"}}`,
				"d": `{"postDeleted":"` + p.ID + `"}`,
			}
			cursors := map[string]string{} // of each event, by the cursor
			for range 3 {
				m := wsRecv(t, ws)
				for m.Type == "ka" {
					m = wsRecv(t, ws)
				}
				if m.Type != next {
					t.Errorf("got %s %s %s; want the data %s", m.ID, m.Type, m.Payload, want[m.ID])
					continue
				}
				data, cursor := eventstest.SplitEvent(t, m.Payload)
				if data != want[m.ID] {
					t.Errorf("got %s %s %s; want the data %s", m.ID, m.Type, m.Payload, want[m.ID])
				}
				if other, seen := cursors[cursor]; seen {
					t.Errorf("the events %s and %s with one cursor %s", other, m.ID, cursor)
				}
				cursors[cursor] = m.ID
			}
		})
	}
}

// waitForSubscribers waits until the event brokers of the running configs have a number of
// subscriptions that ok accepts (described by want), counting those of the broker that has most.
func waitForSubscribers(t *testing.T, ok func(int) bool, want string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		most := 0
		brokers.Range(func(_, value any) bool {
			most = max(most, value.(pooledBroker).Subscribers())
			return true
		})
		if ok(most) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a broker has %d subscriptions after 5s; want %s", most, want)
		}
	}
}
