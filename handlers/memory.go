// The memory budget of each client: the bytes its WebSockets and HTTP streams hold, counted
// against Subscriptions.MaxMemoryPerClient.

package handlers

import (
	"fmt"
	"sync"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/metrics"
)

// memory is a hub's account of the bytes each client's connections hold for it: the events
// queued to send (ws_queue.go, stream.go) and being written, and what their Sequence holds
// (responses held back for an earlier event, a replay's page of the log; schema/order.go).
// It is counted by client, as the connections are (conns): a user whatever their addresses, an
// anonymous client by its address.
//
// An event that several connections of one client queue counts once per connection, though
// live subscribers share its encoding: what a connection holds is what it would free if it
// ended, and the rule stays one sum per client.
//
// A client past its budget is never waited for, and the server's memory is never what gives:
// its connection that holds the most is cut off (TOO_SLOW, as a full send queue is), at once,
// until the client is within its budget again. A client that reads steadily holds little; one
// that stops reading on many streams loses the fullest first, and an SSE client resumes from
// the last event it got.
type memory struct {
	mu      sync.Mutex
	clients map[string]*clientMemory // none for a client that holds nothing
	cut     map[holder]struct{}      // cut off, until dropped: what they hold is freed with them
}

// clientMemory is what one client's connections hold.
type clientMemory struct {
	used  int64
	conns map[holder]int64
}

// holder is a connection whose bytes memory counts.
type holder interface {
	cutOff(why *errcode.Error) // ends it at once; never blocks
}

// hold counts n more bytes (n < 0: fewer) held by h for client, against limit (0: none), and
// cuts off the client's fullest connections while it is past it. A connection cut off counts
// nothing from then on, until it is dropped: its later holds and frees are ignored, as what it
// held is freed with it. (A replay's goroutine that ends after its connection's drop frees what
// it held after it: what it holds then comes back to nothing.)
func (m *memory) hold(h holder, client string, n int64, limit int64) {
	if n == 0 {
		return
	}
	m.mu.Lock()
	c := m.clients[client]
	if _, gone := m.cut[h]; gone || n < 0 && (c == nil || c.conns[h] == 0) {
		m.mu.Unlock()
		return
	}
	if c == nil {
		c = &clientMemory{conns: map[holder]int64{}}
		if m.clients == nil {
			m.clients = map[string]*clientMemory{}
		}
		m.clients[client] = c
	}
	if n < 0 {
		n = max(n, -c.conns[h])
	}
	if c.conns[h] += n; c.conns[h] == 0 {
		delete(c.conns, h)
	}
	c.used += n
	metrics.ClientMemory(n)
	var cut []holder
	for limit > 0 && c.used > limit {
		fullest := c.fullest()
		cut = append(cut, fullest)
		m.forget(client, c, fullest)
		if m.cut == nil {
			m.cut = map[holder]struct{}{}
		}
		m.cut[fullest] = struct{}{}
	}
	if c.used == 0 && len(c.conns) == 0 {
		delete(m.clients, client)
	}
	m.mu.Unlock()
	for _, h := range cut {
		metrics.LimitRefused("max_memory_per_client")
		h.cutOff(errcode.New(errcode.TooSlow, fmt.Sprintf("this client's connections hold more than max_memory_per_client (%d bytes) of events it has not read; reconnect", limit)))
	}
}

// drop forgets what h holds for client: it ended, or will.
func (m *memory) drop(h holder, client string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.cut, h)
	if c := m.clients[client]; c != nil {
		m.forget(client, c, h)
	}
}

// forget removes h from c, client's; m.mu is held.
func (m *memory) forget(client string, c *clientMemory, h holder) {
	n, ok := c.conns[h]
	if !ok {
		return
	}
	delete(c.conns, h)
	c.used -= n
	metrics.ClientMemory(-n)
	if c.used == 0 && len(c.conns) == 0 {
		delete(m.clients, client)
	}
}

// fullest is c's connection that holds the most.
func (c *clientMemory) fullest() (top holder) {
	for h, n := range c.conns {
		if top == nil || n > c.conns[top] {
			top = h
		}
	}
	return top
}

// held is how many bytes client's connections hold: for tests.
func (m *memory) held(client string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.clients[client]; c != nil {
		return c.used
	}
	return 0
}

// replayRoomBytes is how many bytes a connection's queue may hold before a replay waits for the
// client to read (roomForEvents): a replay has its events at hand, and a client that stops
// reading on many resumed streams would otherwise have each fill its queue, half of
// Subscriptions.SendQueue, with responses of its own encoding.
const replayRoomBytes = 256 << 10
