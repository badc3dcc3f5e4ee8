// The memory budget of each client: the bytes its WebSockets and HTTP streams hold, counted
// against Subscriptions.MaxMemoryPerClient.

package live

import (
	"fmt"
	"sync"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/metrics"
)

// memory is a Hub's account of the bytes each client's connections hold for it (Hub.Hold): the
// events queued to send and being written, and what their schema.Sequence holds (responses held
// back for an earlier event, a replay's page of the log; schema/order.go). It is counted by
// client, as the connections are (conns, ClientKey): a user whatever their addresses, an
// anonymous client by its address.
//
// An event that several connections of one client queue counts once per connection, though
// live subscribers share its encoding: what a connection holds is what it would free if it
// ended, and the rule stays one sum per client.
//
// A client past its budget is never waited for, and the server's memory is never what gives:
// its connection that holds the most is cut off (Conn.CutOff: TOO_SLOW, as a full send queue
// is), at once, until the client is within its budget again. A client that reads steadily
// holds little; one that stops reading on many streams loses the fullest first, and an SSE
// client resumes from the last event it got.
type memory struct {
	mu       sync.Mutex
	accounts map[Conn]*account        // of the connections open (open), until drop
	clients  map[string]*clientMemory // none for a client that holds nothing
}

// account is what one connection holds, for which client.
type account struct {
	client string
	bytes  int64
	cut    bool // cut off: what it holds is freed with it, and it counts nothing more
}

// clientMemory is what one client's connections hold.
type clientMemory struct {
	used  int64
	conns map[Conn]*account // those that hold bytes
}

// open starts counting what h holds, for client.
func (m *memory) open(h Conn, client string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.accounts == nil {
		m.accounts = map[Conn]*account{}
	}
	m.accounts[h] = &account{client: client}
}

// move counts what h holds, and will, for client to instead (Hub.Move).
func (m *memory) move(h Conn, to string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.accounts[h]
	if a == nil || a.client == to {
		return
	}
	bytes := a.bytes
	m.count(a, h, -bytes)
	a.client = to
	m.count(a, h, bytes)
}

// hold counts n more bytes (n < 0: fewer) held by h, against limit (0: none), and cuts off its
// client's fullest connections while the client is past it. A connection not open, dropped
// already (a replay's goroutine may end after its connection), or cut off counts nothing: what
// it held is freed with it.
func (m *memory) hold(h Conn, n int64, limit int64) {
	m.mu.Lock()
	a := m.accounts[h]
	if a == nil || a.cut || n == 0 {
		m.mu.Unlock()
		return
	}
	m.count(a, h, max(n, -a.bytes))
	c := m.clients[a.client]
	var cut []Conn
	for limit > 0 && c != nil && c.used > limit {
		fullest := c.fullest()
		cut = append(cut, fullest)
		victim := c.conns[fullest]
		m.count(victim, fullest, -victim.bytes)
		victim.cut = true
	}
	m.mu.Unlock()
	for _, h := range cut {
		metrics.LimitRefused("max_memory_per_client")
		h.CutOff(errcode.New(errcode.TooSlow, fmt.Sprintf("this client's connections hold more than max_memory_per_client (%d bytes) of events and results it has not read; reconnect", limit)))
	}
}

// count adds n to what a, h's account, holds, and to its client's; m.mu is held.
func (m *memory) count(a *account, h Conn, n int64) {
	if n == 0 {
		return
	}
	c := m.clients[a.client]
	if c == nil {
		c = &clientMemory{conns: map[Conn]*account{}}
		if m.clients == nil {
			m.clients = map[string]*clientMemory{}
		}
		m.clients[a.client] = c
	}
	a.bytes += n
	c.used += n
	if a.bytes == 0 {
		delete(c.conns, h)
	} else {
		c.conns[h] = a
	}
	if c.used == 0 {
		delete(m.clients, a.client)
	}
	metrics.ClientMemory(n)
}

// drop stops counting h, and gives back what it held: it ended.
func (m *memory) drop(h Conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a := m.accounts[h]; a != nil {
		m.count(a, h, -a.bytes)
		delete(m.accounts, h)
	}
}

// fullest is c's connection that holds the most.
func (c *clientMemory) fullest() (top Conn) {
	for h, a := range c.conns {
		if top == nil || a.bytes > c.conns[top].bytes {
			top = h
		}
	}
	return top
}

// held is how many bytes client's connections hold (Hub.Held).
func (m *memory) held(client string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.clients[client]; c != nil {
		return c.used
	}
	return 0
}
