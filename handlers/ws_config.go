// GraphQL over WebSocket: what a deployment may set.

package handlers

import (
	"time"
)

// Subscriptions configures GraphQL subscriptions: over WebSocket, and streamed over HTTP.
type Subscriptions struct {
	// OriginPatterns are the origins besides the request's host that browsers may connect from,
	// and whose pages may read the API's answers (cors.go): path.Match patterns of hosts, or of
	// scheme://host. A request without Origin is not a browser's and is let in.
	OriginPatterns []string
	// ReadLimit is the largest message a client may send, in bytes; a larger one closes with 1009.
	ReadLimit int64
	// InitTimeout is how long a client has to send connection_init (4408 after it).
	InitTimeout time.Duration
	// MaxSubscriptions is how many operations one connection may run at once.
	MaxSubscriptions int
	// MaxConnectionsPerUser is how many connections one client may hold: a user, or an anonymous
	// client by its address (Config.ClientIP). It is counted before the upgrade (429), by the
	// upgrade request's credentials or address, and again when connection_init names a user
	// (4429).
	MaxConnectionsPerUser int
	// MaxMemoryPerClient is how many bytes one client's connections may hold, together
	// (memory); 0: no bound.
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

// withSendQueueFloor raises SendQueue to MaxSubscriptions if it is less. One event may match every
// subscription of a connection at once: that many fit, so that only a client that reads too
// slowly fills the queue.
func (s Subscriptions) withSendQueueFloor() Subscriptions {
	s.SendQueue = max(s.SendQueue, s.MaxSubscriptions)
	return s
}
