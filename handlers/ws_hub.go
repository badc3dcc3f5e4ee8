// GraphQL over WebSocket: the hub that holds the open connections across config reloads, and
// the APIs that serve them.

package handlers

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postsedge/caddy-posts/errcode"
)

// Hub holds WebSocket connections, counted against the limits of its current API, and the APIs
// registered to serve them. A server that reloads its config keeps one Hub across the reload
// (caddymodule pools it): the new config's API registers, the old one unregisters, and each
// connection reads the current API (its credentials, limits, schema and logger) whenever it
// needs one, so it goes on under the new config, its subscriptions running.
//
// The current API is the last registered that is still registered: a config that registers and
// then fails to start unregisters, and hands the connections back to the one before it.
type Hub struct {
	mu      sync.Mutex
	apis    []*API              // registered, oldest first
	current atomic.Pointer[API] // the last of apis; when none is left, the last one that was
	conns   conns
	memory  memory      // what the connections hold, by client
	closing atomic.Bool // Close was called

	// hooked are the servers whose shutdown this hub watches (closeOnExit), until it begins.
	hooked sync.Map // *http.Server → struct{}
}

// closeOnExit makes sure that when the server of r begins to shut down while the process exits,
// the hub's connections end at once: an HTTP stream is a request its server's Shutdown waits
// for, which would otherwise hold the exit for as long as the stream (Caddy cleans up modules,
// and closes the hub, only after). A reload's shutdown of the old server leaves them running.
// The keep-alive of a stream also looks at exiting, for servers with no such hook (HTTP/3's).
func (h *Hub) closeOnExit(r *http.Request, exiting func() bool) {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok || exiting == nil {
		return
	}
	if _, loaded := h.hooked.LoadOrStore(srv, struct{}{}); loaded {
		return
	}
	srv.RegisterOnShutdown(func() {
		h.hooked.Delete(srv)
		if exiting() {
			h.Close(errcode.New(errcode.GoingAway, "the server is shutting down"), 0)
		}
	})
}

// exiting says whether the process is exiting, as the current API's config tells.
func (h *Hub) exiting() bool {
	a := h.api()
	return a != nil && a.cfg.Exiting != nil && a.cfg.Exiting()
}

// NewHub returns a hub with no API; register one before it serves.
func NewHub() *Hub { return &Hub{} }

// Register makes a the current API.
func (h *Hub) Register(a *API) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.apis = append(h.apis, a)
	h.current.Store(a)
}

// Unregister removes a; the last API registered before it that is still registered becomes
// current again. The last one to go stays current until Close, for the connections still open.
func (h *Hub) Unregister(a *API) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.apis = slices.DeleteFunc(h.apis, func(x *API) bool { return x == a })
	if len(h.apis) > 0 {
		h.current.Store(h.apis[len(h.apis)-1])
	}
}

// api is the current API.
func (h *Hub) api() *API { return h.current.Load() }

// Close refuses new connections and ends the open ones with why: at once when spread is 0, or
// else each at its own moment within spread (one in each of as many equal slots, at a random
// point of it), so that their clients do not all reconnect at the same time. It does not wait
// for them to end; Wait does.
func (h *Hub) Close(why *errcode.Error, spread time.Duration) {
	h.closing.Store(true)
	open := h.conns.closeAll()
	for i, c := range open {
		delay := time.Duration((float64(i) + rand.Float64()) * float64(spread) / float64(len(open)))
		if delay <= 0 {
			c.fail(why)
			continue
		}
		time.AfterFunc(delay, func() { c.fail(why) })
	}
}

// Wait waits up to timeout for the connections of a closed hub to end, and says whether they did.
func (h *Hub) Wait(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() {
		h.conns.open.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}
