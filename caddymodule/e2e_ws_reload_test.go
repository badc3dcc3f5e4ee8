// Reloads and the open WebSocket connections of the in-process Caddy: a reload that keeps the
// site hands its connections to the new config; one that removes the site or lets its clients
// in another way closes them with 1012, spread over a few seconds.
package caddymodule

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/events/eventstest"
	"github.com/postsedge/caddy-posts/internal/race"
)

// subscribedAsAlice opens a graphql-transport-ws connection to the main site, authenticated as
// alice, with subscription id to the titles of alice's new posts.
func subscribedAsAlice(t *testing.T, id string) *websocket.Conn {
	t.Helper()
	ws := wsDial(t, "graphql-transport-ws")
	wsSend(t, ws, `{"type": "connection_init", "payload": {"Authorization": "ApiKey `+aliceKey+`"}}`)
	if m := wsRecv(t, ws); m.Type != "connection_ack" {
		t.Fatalf("got %+v", m)
	}
	subscribeAlicesPosts(t, ws, id)
	return ws
}

func subscribeAlicesPosts(t *testing.T, ws *websocket.Conn, id string) {
	t.Helper()
	wsSend(t, ws, `{"id": "`+id+`", "type": "subscribe", "payload": {"query": "subscription { postCreated(userId: \"alice\") { title } }"}}`)
}

// closedAt reads ws until it closes, and returns its close code (-1 without one) and when. A
// complete before it is an error: the client would not subscribe again when it reconnects.
func closedAt(t *testing.T, ws *websocket.Conn, within time.Duration) (websocket.StatusCode, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return websocket.CloseStatus(err), time.Now()
		}
		if strings.Contains(string(data), `"complete"`) {
			t.Errorf("before the close: %s", data)
		}
	}
}

// loadInProcess loads caddyfile into the in-process Caddy through its admin API, and returns
// the status of the answer.
func loadInProcess(t *testing.T, caddyfile string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", fmt.Sprintf("http://localhost:%d/load", caddytest.Default.AdminPort), strings.NewReader(caddyfile))
	req.Header.Set("Content-Type", "text/caddyfile")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// withoutSite is caddyfile without the block of the site at address.
func withoutSite(caddyfile, address string) string {
	start := strings.Index(caddyfile, "\n"+address+" {\n")
	end := start + 1 + strings.Index(caddyfile[start+1:], "\n}\n") + len("\n}\n")
	return caddyfile[:start+1] + caddyfile[end:]
}

func TestAReloadKeepsTheWebSocketSubscribers(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	waitForSubscribers(t, func(n int) bool { return n == 0 }, "none")
	ws := subscribedAsAlice(t, "a")
	waitForSubscribers(t, func(n int) bool { return n == 1 }, "1")
	limited := strings.Replace(config(), "max_limit 5", "max_limit 4\n\t\tmax_subscriptions 1", 1)
	refusedByTheLimit := func(t *testing.T, id string) {
		t.Helper()
		subscribeAlicesPosts(t, ws, id)
		if m := wsRecv(t, ws); m.ID != id || m.Type != "error" || !strings.Contains(string(m.Payload), "as many operations as it may") {
			t.Errorf("a second subscription under max_subscriptions 1: %s %s %s; want it refused", m.ID, m.Type, m.Payload)
		}
	}
	nextTitle := func(t *testing.T, title string) {
		t.Helper()
		c.create(asAlice, title)
		if m := wsRecv(t, ws); m.ID != "a" || m.Type != "next" {
			t.Errorf("after the reload: %s %s %s; want the post %q", m.ID, m.Type, m.Payload, title)
		} else if data, _ := eventstest.SplitEvent(t, m.Payload); data != `{"postCreated":{"title":"`+title+`"}}` {
			t.Errorf("after the reload: %s %s %s; want the post %q", m.ID, m.Type, m.Payload, title)
		}
	}

	t.Run("a reload that changes only limits keeps the subscription, which gets the next post", func(t *testing.T) {
		caddytest.NewTester(t).InitServer(limited, "caddyfile")
		nextTitle(t, "written after the reload")
	})
	t.Run("the new config's max_subscriptions applies to the connection from then on", func(t *testing.T) {
		refusedByTheLimit(t, "b")
	})
	t.Run("a reload that fails to start hands the connection back to the config before", func(t *testing.T) {
		taken, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		// The config without max_subscriptions, and a site that cannot listen: it provisions,
		// takes the connection over, and fails to start.
		failing := config() + fmt.Sprintf("\nhttp://localhost:%d {\n\trespond \"never\"\n}\n", taken.Addr().(*net.TCPAddr).Port)
		if status := loadInProcess(t, failing); status == http.StatusOK {
			t.Fatal("the config with a port in use loaded")
		}
		refusedByTheLimit(t, "c") // max_subscriptions 1 still applies
		nextTitle(t, "written after the failed reload")
	})
	t.Run("a reload that lets clients in another way closes the connection with 1012", func(t *testing.T) {
		start := time.Now()
		caddytest.NewTester(t).InitServer(strings.Replace(config(), "max_limit 5", "max_limit 5\n\t\tapi_key carol-key carol", 1), "caddyfile")
		if code, at := closedAt(t, ws, reloadCloseSpread+10*time.Second); code != websocket.StatusServiceRestart || !race.Enabled && at.Sub(start) > reloadCloseSpread+time.Second {
			t.Errorf("closed with %d after %v; want 1012 within %v", code, at.Sub(start), reloadCloseSpread)
		}
		again := subscribedAsAlice(t, "a")
		again.CloseNow()
	})
	t.Run("a reload that removes the site closes its connections with 1012, spread over seconds", func(t *testing.T) {
		startCaddy(t)
		var conns []*websocket.Conn
		for i := range 4 {
			conns = append(conns, subscribedAsAlice(t, fmt.Sprint(i)))
		}
		waitForSubscribers(t, func(n int) bool { return n == 1 }, "1 (the 4 share it)")
		// Without the other site of its data_dir, too: the store and its event broker close.
		caddytest.NewTester(t).InitServer(withoutSite(withoutSite(config(), site), basicSite), "caddyfile")
		start := time.Now()
		// Each read on its own goroutine: read one after the other, a connection closed before
		// the one being read would seem to close with it.
		closed := make([]time.Time, len(conns))
		var readers sync.WaitGroup
		for i, ws := range conns {
			readers.Go(func() {
				code, at := closedAt(t, ws, reloadCloseSpread+10*time.Second)
				if code != websocket.StatusServiceRestart {
					t.Errorf("connection %d closed with %d after %v; want 1012", i, code, at.Sub(start))
				}
				closed[i] = at
			})
		}
		readers.Wait()
		first, last := slices.MinFunc(closed, time.Time.Compare), slices.MaxFunc(closed, time.Time.Compare)
		t.Logf("the 4 connections closed from %v to %v after the reload", first.Sub(start), last.Sub(start))
		if !race.Enabled && last.Sub(first) < 100*time.Millisecond {
			t.Errorf("the 4 connections closed within %v of each other; want them spread", last.Sub(first))
		}
	})
	startCaddy(t) // the usual config for the tests after this one
}
