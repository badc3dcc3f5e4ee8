package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/internal/race"
)

// fakeHolder is a connection that notes its cut.
type fakeHolder struct {
	name string
	mu   sync.Mutex
	why  *errcode.Error
}

func (h *fakeHolder) cutOff(why *errcode.Error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.why == nil {
		h.why = why
	}
}

func (h *fakeHolder) cut() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.why != nil
}

func TestMemoryCutsOffTheFullestConnectionOfAClientPastItsBudget(t *testing.T) {
	const limit = 100
	// opened are connections a and b, open for clients ca and cb.
	opened := func(m *memory, ca, cb string) (a, b *fakeHolder) {
		a, b = &fakeHolder{name: "a"}, &fakeHolder{name: "b"}
		m.open(a, ca)
		m.open(b, cb)
		return a, b
	}
	t.Run("a client within its budget loses nothing", func(t *testing.T) {
		var m memory
		a, b := opened(&m, "alice", "alice")
		m.hold(a, 60, limit)
		m.hold(b, 40, limit)
		if a.cut() || b.cut() || m.held("alice") != 100 {
			t.Errorf("cut: a %v, b %v; held %d; want none cut, 100 held", a.cut(), b.cut(), m.held("alice"))
		}
	})
	t.Run("past it, the connection that holds the most is cut off with TOO_SLOW, and its bytes no longer count", func(t *testing.T) {
		var m memory
		a, b := opened(&m, "alice", "alice")
		m.hold(a, 70, limit)
		m.hold(b, 40, limit) // 110: a holds the most
		if !a.cut() || b.cut() {
			t.Fatalf("cut: a %v, b %v; want a alone", a.cut(), b.cut())
		}
		if a.why.Code != errcode.TooSlow || !strings.Contains(a.why.Message, "max_memory_per_client") {
			t.Errorf("a was cut off with %v; want TOO_SLOW naming max_memory_per_client", a.why)
		}
		if got := m.held("alice"); got != 40 {
			t.Errorf("held %d; want b's 40", got)
		}
		m.hold(a, -70, limit) // what a frees once cut is not given back twice
		m.hold(a, 50, limit)  // nor does what it takes after count
		if got := m.held("alice"); got != 40 {
			t.Errorf("held %d after the cut connection freed and took; want 40", got)
		}
	})
	t.Run("the connection that goes past the budget is cut off itself when it holds the most", func(t *testing.T) {
		var m memory
		a, b := opened(&m, "alice", "alice")
		m.hold(a, 30, limit)
		m.hold(b, 80, limit)
		if a.cut() || !b.cut() {
			t.Errorf("cut: a %v, b %v; want b alone", a.cut(), b.cut())
		}
	})
	t.Run("one client's budget is its own", func(t *testing.T) {
		var m memory
		a, b := opened(&m, "alice", "bob")
		m.hold(a, 90, limit)
		m.hold(b, 90, limit)
		if a.cut() || b.cut() {
			t.Errorf("cut: a %v, b %v; want neither", a.cut(), b.cut())
		}
	})
	t.Run("a connection moved to another client takes what it holds along, and frees it there", func(t *testing.T) {
		var m memory
		a, _ := opened(&m, "address 192.0.2.1", "bob")
		m.hold(a, 30, limit) // a pong queued before connection_init
		m.move(a, "user alice")
		if got, moved := m.held("address 192.0.2.1"), m.held("user alice"); got != 0 || moved != 30 {
			t.Errorf("held %d by the address, %d by the user; want 0, 30", got, moved)
		}
		m.hold(a, -30, limit)
		m.drop(a)
		if len(m.clients) != 0 || len(m.accounts) != 1 {
			t.Errorf("%d clients, %d accounts kept; want none, and b's", len(m.clients), len(m.accounts))
		}
	})
	t.Run("a connection dropped gives back all it held, and counts nothing after", func(t *testing.T) {
		var m memory
		a, b := opened(&m, "alice", "alice")
		m.hold(a, 60, limit)
		m.drop(a)
		m.drop(b)
		if got := m.held("alice"); got != 0 {
			t.Errorf("held %d after the drop; want 0", got)
		}
		m.hold(a, 20, limit) // a replay's page read as its listener left
		m.hold(a, -60, limit)
		if got := m.held("alice"); got != 0 || len(m.clients) != 0 || len(m.accounts) != 0 {
			t.Errorf("held %d, %d clients and %d accounts kept; want 0, none", got, len(m.clients), len(m.accounts))
		}
	})
	t.Run("no limit cuts nothing", func(t *testing.T) {
		var m memory
		a, _ := opened(&m, "alice", "alice")
		m.hold(a, 1<<40, 0)
		if a.cut() {
			t.Error("cut with no limit")
		}
	})
}

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
			s, _ := newStreamServer(t, with(testSubscriptions, func(s *Subscriptions) { s.SendQueue, s.MaxMemoryPerClient = 256, budget }), testLimits,
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
				most = max(most, s.api.hub.memory.held("user alice"))
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
			waitFor(t, "what alice's connections held to be given back", func() bool { return s.api.hub.memory.held("user alice") == 0 })
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
	s := newWSServer(t, with(testSubscriptions, func(s *Subscriptions) { s.MaxMemoryPerClient = 1 << 20 }))
	payload := `{"p": "` + strings.Repeat("x", 16<<10) + `"}`
	const conns = 40
	for i := range conns {
		c := s.dial(t, transportWS, http.Header{clientIPHeader: {"198.51.100.7"}})
		send(t, c, `{"type": "ping", "payload": `+payload+`}`)
		send(t, c, `{"type": "connection_init", "payload": {"X-API-Key": "`+wsKey+`"}}`)
		for range 2 {
			recv(t, c)
		}
		_ = c.CloseNow()
		waitFor(t, fmt.Sprint("connection ", i, " to end"), func() bool { return s.open() == 0 })
	}
	s.api.hub.memory.mu.Lock()
	defer s.api.hub.memory.mu.Unlock()
	for client, c := range s.api.hub.memory.clients {
		t.Errorf("after %d connections all ended, %q still holds %d bytes over %d connections", conns, client, c.used, len(c.conns))
	}
	if n := len(s.api.hub.memory.accounts); n != 0 {
		t.Errorf("%d accounts kept after every connection ended; want none", n)
	}
}

// TestWhatAStreamWritesIsGivenBackOnceCounted has a stream's writer take, write and give back
// what is pushed as fast as it is pushed, while another client's connection keeps the account
// busy: a push counts its payload before the writer can take it, so the stream ends up holding
// nothing.
func TestWhatAStreamWritesIsGivenBackOnceCounted(t *testing.T) {
	srv := newWSServer(t, with(testSubscriptions, func(s *Subscriptions) { s.SendQueue = 1 << 30 }))
	hub := srv.api.hub
	s := &stream{wake: make(chan struct{}, 1), client: "user carol", hub: hub}
	hub.memory.open(s, s.client)
	other := &stream{client: "user dave", hub: hub}
	hub.memory.open(other, other.client)
	payload := json.RawMessage(strings.Repeat("x", 1000))
	events := 100_000
	if race.Enabled {
		events = 10_000
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			hub.memory.hold(other, 10, 0)
			hub.memory.hold(other, -10, 0)
		}
	})
	written, done := 0, make(chan struct{})
	go func() { // run's loop, without the writes
		defer close(done)
		for range s.wake {
			results, _, _ := s.take()
			taken := 0
			for _, p := range results {
				taken += len(p)
			}
			s.hold(-taken)
			if written += len(results); written == events {
				return
			}
		}
	}()
	for range events {
		s.push(payload, 1<<30)
	}
	<-done
	close(stop)
	wg.Wait()
	if got := hub.memory.held("user carol"); got != 0 {
		t.Errorf("every event pushed was taken and written, and the stream still holds %d bytes", got)
	}
}
