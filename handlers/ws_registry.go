// GraphQL over WebSocket: the registry of open connections (a Hub's), counted against the
// server's and each client's share.

package handlers

import (
	"fmt"
	"net"
	"net/http"
	"sync"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/metrics"
)

// A client is who a share of the server counts against: a user, whatever their connections'
// addresses, or an anonymous client's address. Its key names which, so that a user id never
// counts as an address.
func userClient(userID string) string     { return "user " + userID }
func addressClient(address string) string { return "address " + address }

// clientKey is the client of a caller from address.
func clientKey(caller auth.Identity, address string) string {
	if caller.Anonymous() {
		return addressClient(address)
	}
	return userClient(caller.UserID)
}

// clientAddress is the address of r's client: Config.ClientIP's (Caddy's, which honours
// trusted_proxies), or else the host of r's peer.
func (a *API) clientAddress(r *http.Request) string {
	if a.cfg.ClientIP != nil {
		if ip := a.cfg.ClientIP(r); ip != "" {
			return ip
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// connection is an open WebSocket or HTTP stream: what the hub ends when it closes.
type connection interface {
	fail(why *errcode.Error) // ends it with why; never blocks
}

// conns tracks the open connections (WebSockets and subscriptions streamed over HTTP, one pool), so that the hub's Close can end them, and counts them
// against MaxConnections and, by client, MaxConnectionsPerUser.
type conns struct {
	mu       sync.Mutex
	open     sync.WaitGroup // the connections added and not yet removed
	all      map[connection]struct{}
	clients  map[string]int // upgrades under way and connections open, by client; none at zero
	reserved int            // upgrades under way and connections open, against MaxConnections
	closed   bool
}

// reserve holds a place for one more connection of client, before the upgrade: it refuses with
// 503 when the hub is closed or holds max, and with 429 when client holds perClient.
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

// release gives back what reserve held, for the client the connection counts against by then.
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
func (t *conns) add(c connection) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if t.all == nil {
		t.all = map[connection]struct{}{}
	}
	t.all[c] = struct{}{}
	t.open.Add(1)
	return true
}

func (t *conns) remove(c connection) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.all, c)
	t.open.Done()
}

// closeAll refuses new connections, and returns the open ones for the hub to end.
func (t *conns) closeAll() []connection {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	all := make([]connection, 0, len(t.all))
	for c := range t.all {
		all = append(all, c)
	}
	return all
}

// Close ends the connections of the API's hub at once with 1001 (going away), and refuses new
// ones: for a server that stops. (caddymodule closes the pooled hub, not the API.)
func (a *API) Close() {
	a.hub.Close(errcode.New(errcode.GoingAway, "the server is shutting down"), 0)
}
