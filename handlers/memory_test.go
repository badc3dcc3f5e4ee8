package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/handlers/live"
)

// TestAClientPastItsMemoryBudgetLosesItsFullestStreams has alice hold eight SSE streams, or
// eight WebSockets, she never reads while posts of some 300 KB are written, and bob one SSE
// stream he reads: once the loopback's buffers are full, alice's connections queue the events,
// and past max_memory_per_client (2 MiB here) her fullest are cut off as TOO_SLOW, long before a
// queue of 256 fills; what her connections hold never goes past the budget by more than an
// event, bob gets every event, and once hers have ended, nothing is counted for her.
func TestAClientPastItsMemoryBudgetLosesItsFullestStreams(t *testing.T) {
	const budget, stalled = 2 << 20, 8
	tests := []struct {
		name  string
		open  func(t *testing.T, s *wsServer)
		ended string // how each of alice's connections' end is logged, if it is
	}{
		{"eight SSE streams", func(t *testing.T, s *wsServer) {
			s.post(t, acceptSSE, createdBodies, http.Header{"X-Api-Key": {wsKey}}).until(t, "\n\n")
		}, "TOO_SLOW"},
		{"eight WebSockets", func(t *testing.T, s *wsServer) {
			c := s.dial(t, transportWS, http.Header{"X-Api-Key": {wsKey}})
			initialise(t, c, `{}`)
			send(t, c, `{"id": "1", "type": "subscribe", "payload": `+createdBodies+`}`)
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ends streamEnds
			s, _ := newStreamServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.SendQueue, s.MaxMemoryPerClient = 256, budget }), testLimits,
				func(cfg *Config) { ends = logStreamEnds(cfg) })
			for range stalled {
				tt.open(t, s)
			}
			bob := s.post(t, acceptSSE, createdBodies, http.Header{"X-Api-Key": {wsBobKey}})
			bob.until(t, "\n\n")
			s.waitForSubscribers(t, 1) // one feed: every connection's subscription shares it
			waitFor(t, "alice's subscriptions", func() bool { return s.api.cfg.GraphQL.ClientFeeds("user alice") == 1 })
			var got atomic.Int64 // the events bob read
			go func() {
				for {
					event, err := bob.body.ReadString('\n')
					if err != nil {
						return
					}
					if strings.HasPrefix(event, "event: next") {
						got.Add(1)
					}
				}
			}()
			written, most := 0, int64(0)
			for ; s.open() > 1; written++ {
				if written == 200 {
					t.Fatalf("%d events of 300 KB written to %d connections that read none, and %d of them go on", written, stalled, s.open()-1)
				}
				s.createBigPost(t, fmt.Sprint(written))
				waitFor(t, "the feed to take the event", func() bool { return s.broker.Backlog() == 0 })
				most = max(most, s.api.hub.Held("user alice"))
			}
			t.Logf("alice's %d connections ended after %d events; they held %d bytes at most", stalled, written, most)
			if most > budget+400<<10 {
				t.Errorf("alice's connections held %d bytes; want at most the budget, %d, and an event", most, budget)
			}
			if tt.ended != "" {
				waitFor(t, "alice's streams' ends to be logged", func() bool { return len(ends.all()) == stalled })
				for _, end := range ends.all() {
					if end != tt.ended {
						t.Errorf("a stream of alice's ended %q; want %s", end, tt.ended)
					}
				}
			}
			waitFor(t, "what alice's connections held to be given back", func() bool { return s.api.hub.Held("user alice") == 0 })
			s.createPostOf(t, `{"title": "the last"}`)
			written++
			for deadline := time.Now().Add(streamDeadline); got.Load() < int64(written) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if n := got.Load(); n != int64(written) {
				t.Errorf("bob, who reads, got %d events of the %d written; want every one", n, written)
			}
		})
	}
}

// TestWhatAWebSocketHeldBeforeItsConnectionInitIsGivenBack has forty connections each queue a
// large pong as an anonymous client (counted by its address) and then name a user in
// connection_init: what each held goes with it to the user's account and is given back there, so
// that once they have all ended nothing is counted for anyone.
func TestWhatAWebSocketHeldBeforeItsConnectionInitIsGivenBack(t *testing.T) {
	s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.MaxMemoryPerClient = 1 << 20 }))
	payload := `{"p": "` + strings.Repeat("x", 16<<10) + `"}`
	const n = 40
	for i := range n {
		c := s.dial(t, transportWS, http.Header{clientIPHeader: {"198.51.100.7"}})
		send(t, c, `{"type": "ping", "payload": `+payload+`}`)
		send(t, c, `{"type": "connection_init", "payload": {"X-API-Key": "`+wsKey+`"}}`)
		for range 2 {
			recv(t, c)
		}
		_ = c.CloseNow()
		waitFor(t, fmt.Sprint("connection ", i, " to end"), func() bool { return s.open() == 0 })
	}
	if conns, clients := s.api.hub.Accounts(); conns != 0 || clients != 0 {
		t.Errorf("after %d connections all ended, %d accounts kept and %d clients counted; want none", n, conns, clients)
	}
}
