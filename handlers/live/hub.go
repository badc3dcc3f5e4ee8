package live

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postsedge/caddy-posts/errcode"
)

// Hub holds a site's open connections (WebSockets and streams over HTTP, one pool), counted
// against the limits of its current Config, and the Configs registered to serve them. A server
// that reloads its config keeps one Hub across the reload (caddymodule pools it): the new
// config's API registers its Config, the old one unregisters, and each connection reads
// Hub.Current (its credentials, limits, schema and logger) whenever it needs one, so it goes on
// under the new config, its subscriptions running.
//
// The current Config is the last registered that is still registered: a config that registers
// and then fails to start unregisters, and hands the connections back to the one before it.
type Hub struct {
	mu      sync.Mutex
	configs []*Config              // registered, oldest first
	current atomic.Pointer[Config] // the last of configs; when none is left, the last one that was
	conns   conns
	memory  memory      // what the connections hold, by client
	closing atomic.Bool // Close was called

	// hooked are the servers whose shutdown this hub watches (CloseOnExit), until it begins.
	hooked sync.Map // *http.Server → struct{}
}

// NewHub returns a hub with no Config; register one before it serves.
func NewHub() *Hub { return &Hub{} }

// Register makes cfg the current Config.
func (h *Hub) Register(cfg *Config) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.configs = append(h.configs, cfg)
	h.current.Store(cfg)
}

// Unregister removes cfg; the last Config registered before it that is still registered becomes
// current again. The last one to go stays current until Close, for the connections still open.
func (h *Hub) Unregister(cfg *Config) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.configs = slices.DeleteFunc(h.configs, func(x *Config) bool { return x == cfg })
	if len(h.configs) > 0 {
		h.current.Store(h.configs[len(h.configs)-1])
	}
}

// Current is the Config the hub's connections apply.
func (h *Hub) Current() *Config { return h.current.Load() }

// CloseOnExit makes sure that when the server of r begins to shut down while the process exits
// (exiting says so), the hub's connections end at once: an HTTP stream is a request its
// server's Shutdown waits for, which would otherwise hold the exit for as long as the stream
// (Caddy cleans up modules, and closes the hub, only after). A reload's shutdown of the old
// server leaves them running. The keep-alive of a stream also asks Exiting, for servers with no
// such hook (HTTP/3's).
func (h *Hub) CloseOnExit(r *http.Request, exiting func() bool) {
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

// Exiting says whether the process is exiting, as the current Config tells.
func (h *Hub) Exiting() bool {
	cfg := h.Current()
	return cfg != nil && cfg.Exiting != nil && cfg.Exiting()
}

// Closing says whether Close was called: a feed that ends then ends with the site's broker, and
// its connection is ended by the hub soon, not completed.
func (h *Hub) Closing() bool { return h.closing.Load() }

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
			c.Fail(why)
			continue
		}
		time.AfterFunc(delay, func() { c.Fail(why) })
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
