// The registry of a Hub's open connections, counted against the server's and each client's
// share, and what each holds against its client's memory budget.

package live

import (
	"fmt"
	"sync"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/metrics"
)

// ClientKey is who a share of the server counts a connection of caller from address against:
// a user, whatever their connections' addresses, or an anonymous client's address. The key
// names which, so that a user id never counts as an address.
func ClientKey(caller auth.Identity, address string) string {
	if caller.Anonymous() {
		return "address " + address
	}
	return "user " + caller.UserID
}

// Conn is an open WebSocket or HTTP stream: what the Hub ends when it closes, and cuts off when
// its client is past its memory budget.
type Conn interface {
	// Fail ends it with why, after what it has queued; it never blocks.
	Fail(why *errcode.Error)
	// CutOff ends it with why at once, what it has queued dropped; it never blocks.
	CutOff(why *errcode.Error)
}

// Reserve holds a place for one more connection of client, before the upgrade or the stream: it
// refuses with 503 when the hub is closed or holds max, and with 429 when client holds
// perClient. Release gives it back.
func (h *Hub) Reserve(client string, max, perClient int) *errcode.Error {
	return h.conns.reserve(client, max, perClient)
}

// Release gives back what Reserve held, for the client the connection counts against by then.
func (h *Hub) Release(client string) { h.conns.release(client) }

// Add registers c, open for client, unless the hub is closed: Close ends it, and what it holds
// counts against client's memory (Hold). Remove undoes it.
func (h *Hub) Add(c Conn, client string) bool {
	if !h.conns.add(c) {
		return false
	}
	h.memory.open(c, client)
	return true
}

// Remove stops counting c, which has ended, and gives back what it held.
func (h *Hub) Remove(c Conn) {
	h.conns.remove(c)
	h.memory.drop(c)
}

// Move counts c, a connection of from, as one of to instead, with what it holds: a WebSocket
// whose connection_init names a user. It refuses with 4429 when to holds perClient already.
func (h *Hub) Move(c Conn, from, to string, perClient int) *errcode.Error {
	if !h.conns.move(from, to, perClient) {
		metrics.LimitRefused("max_connections_per_user")
		return errcode.New(errcode.TooManyConnections, tooManyConnections(perClient))
	}
	h.memory.move(c, to)
	return nil
}

// Hold counts n more bytes (less than 0: fewer) that c holds for its client, against the
// current Config's MaxMemoryPerClient: memory says which connection is cut off past it.
func (h *Hub) Hold(c Conn, n int) {
	h.memory.hold(c, int64(n), h.Current().Subscriptions.MaxMemoryPerClient)
}

// Held is how many bytes client's connections hold.
func (h *Hub) Held(client string) int64 { return h.memory.held(client) }

// conns tracks the open connections (WebSockets and subscriptions streamed over HTTP, one
// pool), so that Hub.Close can end them, and counts them against MaxConnections and, by client,
// MaxConnectionsPerUser.
type conns struct {
	mu       sync.Mutex
	open     sync.WaitGroup // the connections added and not yet removed
	all      map[Conn]struct{}
	clients  map[string]int // upgrades under way and connections open, by client; none at zero
	reserved int            // upgrades under way and connections open, against MaxConnections
	closed   bool
}

// reserve is Hub.Reserve.
func (t *conns) reserve(client string, max, perClient int) *errcode.Error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return errcode.New(errcode.ServerFull, "the server is closing; try again later")
	case t.reserved >= max:
		metrics.LimitRefused("max_connections")
		return errcode.New(errcode.ServerFull, "the server holds as many WebSockets and subscription streams as it may; try again later")
	case t.clients[client] >= perClient:
		metrics.LimitRefused("max_connections_per_user")
		return errcode.New(errcode.TooManyConnections, tooManyConnections(perClient))
	}
	t.reserved++
	if t.clients == nil {
		t.clients = map[string]int{}
	}
	t.clients[client]++
	return nil
}

func tooManyConnections(perClient int) string {
	return fmt.Sprintf("this client holds %d WebSockets and subscription streams, as many as max_connections_per_user allows; close one first", perClient)
}

// release is Hub.Release.
func (t *conns) release(client string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reserved--
	if t.clients[client]--; t.clients[client] <= 0 {
		delete(t.clients, client)
	}
}

// move counts a connection of from as one of to instead, unless to holds perClient already.
func (t *conns) move(from, to string, perClient int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.clients[to] >= perClient {
		return false
	}
	t.clients[to]++
	if t.clients[from]--; t.clients[from] <= 0 {
		delete(t.clients, from)
	}
	return true
}

// add registers c, unless the hub is closed.
func (t *conns) add(c Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if t.all == nil {
		t.all = map[Conn]struct{}{}
	}
	t.all[c] = struct{}{}
	t.open.Add(1)
	return true
}

func (t *conns) remove(c Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.all, c)
	t.open.Done()
}

// closeAll refuses new connections, and returns the open ones for the hub to end.
func (t *conns) closeAll() []Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	all := make([]Conn, 0, len(t.all))
	for c := range t.all {
		all = append(all, c)
	}
	return all
}

// Open is the hub's open connections, in no order.
func (h *Hub) Open() []Conn {
	h.conns.mu.Lock()
	defer h.conns.mu.Unlock()
	all := make([]Conn, 0, len(h.conns.all))
	for c := range h.conns.all {
		all = append(all, c)
	}
	return all
}

// Counted is how many connections, reserved or open, count against client's share, how many
// clients hold a share, and how many connections count against the server's.
func (h *Hub) Counted(client string) (ofClient, clients, all int) {
	h.conns.mu.Lock()
	defer h.conns.mu.Unlock()
	return h.conns.clients[client], len(h.conns.clients), h.conns.reserved
}

// Accounts is how many connections the memory budget keeps an account of, and how many clients
// it counts bytes for: none of either once every connection has ended.
func (h *Hub) Accounts() (conns, clients int) {
	h.memory.mu.Lock()
	defer h.memory.mu.Unlock()
	return len(h.memory.accounts), len(h.memory.clients)
}
