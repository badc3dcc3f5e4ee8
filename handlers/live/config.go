// Package live holds what every subscription transport shares (GraphQL over WebSocket in
// handlers/ws, streams over one HTTP response in handlers/stream): the Hub of a site's open
// connections, which outlives a config reload, with the registry that counts them against the
// server's and each client's share, each client's memory budget, and the one rule of a send
// queue's room for a replay (Room).
package live

import (
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// Config is what an open connection applies of its site's config: the one a Hub holds as
// current (Hub.Current), read again whenever the connection needs it, so that it goes on under
// the config of a reload.
type Config struct {
	// Subscriptions are the limits and timings of the connections.
	Subscriptions Subscriptions
	// Posts decides who may do what (Allow).
	Posts *posts.Service
	// GraphQL prepares and runs the operations.
	GraphQL *schema.Schema
	// Auth finds the caller of a connection.
	Auth *auth.Authenticator
	// Logger receives the connections' log lines.
	Logger *zap.Logger
	// Identified, if set, is told the caller that a connection_init names.
	Identified func(*http.Request, auth.Identity)
	// Exiting, if set, says whether the process is exiting (Hub.CloseOnExit).
	Exiting func() bool
	// ClientIP, if set, returns the address of the client of r, by which anonymous clients are
	// counted against their shares (ClientAddress).
	ClientIP func(*http.Request) string
}

// ClientAddress is the address of r's client: ClientIP's (Caddy's, which honours
// trusted_proxies), or else the host of r's peer.
func (c *Config) ClientAddress(r *http.Request) string {
	if c.ClientIP != nil {
		if ip := c.ClientIP(r); ip != "" {
			return ip
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Subscriptions configures GraphQL subscriptions: over WebSocket, and streamed over HTTP.
type Subscriptions struct {
	// OriginPatterns are the origins besides the request's host that browsers may connect from,
	// and whose pages may read the API's answers (answer.CORS): path.Match patterns of
	// hosts, or of scheme://host. A request without Origin is not a browser's and is let in.
	OriginPatterns []string
	// ReadLimit is the largest message a client may send, in bytes; a larger one closes with 1009.
	ReadLimit int64
	// InitTimeout is how long a client has to send connection_init (4408 after it).
	InitTimeout time.Duration
	// MaxSubscriptions is how many operations one connection may run at once.
	MaxSubscriptions int
	// MaxConnectionsPerUser is how many connections one client may hold: a user, or an anonymous
	// client by its address (ClientKey). It is counted before the upgrade (429), by the
	// upgrade request's credentials or address, and again when connection_init names a user
	// (4429).
	MaxConnectionsPerUser int
	// MaxMemoryPerClient is how many bytes one client's connections may hold, together
	// (Hub.Hold); 0: no bound.
	MaxMemoryPerClient int64
	// MaxConnections is how many connections may be open at once; more get 503.
	MaxConnections int
	// KeepAlive is how often the server pings; a peer that does not answer within it is closed.
	KeepAlive time.Duration
	// SendQueue is how many messages may wait for a slow client before it is closed with 1013;
	// at least MaxSubscriptions, the default.
	SendQueue int
	// SSEMaxDuration, if not 0, is how long a subscription streamed as server-sent events lasts
	// before the server ends it, for EventSource to reconnect and resume.
	SSEMaxDuration time.Duration
}

// WithSendQueueFloor raises SendQueue to MaxSubscriptions if it is less. One event may match
// every subscription of a connection at once: that many fit, so that only a client that reads
// too slowly fills the queue.
func (s Subscriptions) WithSendQueueFloor() Subscriptions {
	s.SendQueue = max(s.SendQueue, s.MaxSubscriptions)
	return s
}
