package live

import (
	"errors"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/schema"
)

// FeedEnd is how a connection tells its client that the feed of one of its subscriptions ended
// (Hub.FeedEnd): the one rule of WebSockets and streams alike.
type FeedEnd struct {
	// Quiet says that the hub is closing: the site's event broker closes with it, the hub ends
	// the connection soon (1012, SERVICE_RESTART), and its client subscribes again when it
	// reconnects, which it would not after a complete. The connection says nothing.
	Quiet bool
	// Fail, if set, ends the whole connection as a client too slow is: the feed fell behind the
	// events, and the client reconnects (and resumes) rather than miss events silently.
	Fail *errcode.Error
	// Errors are the operation's, when it could not run or its resume was refused; with none,
	// the subscription is complete.
	Errors []*gqlerrors.QueryError
}

// FeedEnd is how a connection of the hub ends a subscription whose feed ended with err.
func (h *Hub) FeedEnd(err error) FeedEnd {
	var refused *schema.RefusedError
	switch {
	case h.Closing():
		return FeedEnd{Quiet: true}
	case errors.Is(err, schema.ErrFeedFellBehind):
		return FeedEnd{Fail: errcode.New(errcode.TooSlow, "the server fell behind the events; reconnect")}
	case errors.As(err, &refused):
		return FeedEnd{Errors: refused.Errors}
	}
	return FeedEnd{}
}
