package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/errcode"
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
	t.Run("a client within its budget loses nothing", func(t *testing.T) {
		var m memory
		a, b := &fakeHolder{name: "a"}, &fakeHolder{name: "b"}
		m.hold(a, "alice", 60, limit)
		m.hold(b, "alice", 40, limit)
		if a.cut() || b.cut() || m.held("alice") != 100 {
			t.Errorf("cut: a %v, b %v; held %d; want none cut, 100 held", a.cut(), b.cut(), m.held("alice"))
		}
	})
	t.Run("past it, the connection that holds the most is cut off with TOO_SLOW, and its bytes no longer count", func(t *testing.T) {
		var m memory
		a, b := &fakeHolder{name: "a"}, &fakeHolder{name: "b"}
		m.hold(a, "alice", 70, limit)
		m.hold(b, "alice", 40, limit) // 110: a holds the most
		if !a.cut() || b.cut() {
			t.Fatalf("cut: a %v, b %v; want a alone", a.cut(), b.cut())
		}
		if a.why.Code != errcode.TooSlow || !strings.Contains(a.why.Message, "max_memory_per_client") {
			t.Errorf("a was cut off with %v; want TOO_SLOW naming max_memory_per_client", a.why)
		}
		if got := m.held("alice"); got != 40 {
			t.Errorf("held %d; want b's 40", got)
		}
		m.hold(a, "alice", -70, limit) // what a frees once cut is not given back twice
		m.hold(a, "alice", 50, limit)  // nor does what it takes after count
		if got := m.held("alice"); got != 40 {
			t.Errorf("held %d after the cut connection freed and took; want 40", got)
		}
	})
	t.Run("the connection that goes past the budget is cut off itself when it holds the most", func(t *testing.T) {
		var m memory
		a, b := &fakeHolder{name: "a"}, &fakeHolder{name: "b"}
		m.hold(a, "alice", 30, limit)
		m.hold(b, "alice", 80, limit)
		if a.cut() || !b.cut() {
			t.Errorf("cut: a %v, b %v; want b alone", a.cut(), b.cut())
		}
	})
	t.Run("one client's budget is its own", func(t *testing.T) {
		var m memory
		a, b := &fakeHolder{name: "a"}, &fakeHolder{name: "b"}
		m.hold(a, "alice", 90, limit)
		m.hold(b, "bob", 90, limit)
		if a.cut() || b.cut() {
			t.Errorf("cut: a %v, b %v; want neither", a.cut(), b.cut())
		}
	})
	t.Run("a connection dropped gives back all it held, and what it frees late comes back to nothing", func(t *testing.T) {
		var m memory
		a := &fakeHolder{name: "a"}
		m.hold(a, "alice", 60, limit)
		m.drop(a, "alice")
		if got := m.held("alice"); got != 0 {
			t.Errorf("held %d after the drop; want 0", got)
		}
		m.hold(a, "alice", 20, limit) // a replay's page read as its listener left
		m.hold(a, "alice", -20, limit)
		m.hold(a, "alice", -60, limit) // a free of what the drop gave back
		if got := m.held("alice"); got != 0 || len(m.clients) != 0 {
			t.Errorf("held %d, %d clients kept; want 0, none", got, len(m.clients))
		}
	})
	t.Run("no limit cuts nothing", func(t *testing.T) {
		var m memory
		a := &fakeHolder{name: "a"}
		m.hold(a, "alice", 1<<40, 0)
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
