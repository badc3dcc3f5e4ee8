package live

import (
	"strings"
	"sync"
	"testing"

	"github.com/postsedge/caddy-posts/errcode"
)

// fakeHolder is a connection that notes its cut (Conn.CutOff).
type fakeHolder struct {
	name string
	mu   sync.Mutex
	why  *errcode.Error
}

func (h *fakeHolder) Fail(*errcode.Error) {}

func (h *fakeHolder) CutOff(why *errcode.Error) {
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
