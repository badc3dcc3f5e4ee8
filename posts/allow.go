package posts

import (
	"context"

	"github.com/postsedge/caddy-posts/auth"
)

// Caller is who asks: the authenticated identity of a request, or the zero Caller, anonymous.
// Transports authenticate the request and put the caller in its context with auth.NewContext;
// CallerFrom reads it back.
type Caller = auth.Identity

// CallerFrom returns the caller that a transport put in ctx with auth.NewContext (or
// WithCaller), or the anonymous caller when there is none.
func CallerFrom(ctx context.Context) Caller { return auth.FromContext(ctx) }

// WithCaller returns a copy of ctx that carries caller, for work that has no request of its own
// (a subscription's feed resolves each event for its caller).
func WithCaller(ctx context.Context, caller Caller) context.Context {
	return auth.NewContext(ctx, caller)
}

// Action is what a caller asks to do.
type Action int

// The actions a caller may ask for.
const (
	// Read is getting or listing posts and users.
	Read Action = iota
	// Write is creating, updating or deleting a post (a GraphQL mutation).
	Write
	// Subscribe is following the writes as they are stored (a GraphQL subscription, or a
	// WebSocket connection that carries them).
	Subscribe
)

// Allow says whether caller may do a: nil, or ErrUnauthenticated. It is the only place that
// decides who may do what; transports ask it before they do any work, and Create, Update and
// Delete ask it again. Which post a caller may change is another question, answered by the
// store's filter on the owner (ErrForbidden).
//
// Anyone may read. Writing needs a caller. Subscribing needs one when
// Config.SubscriptionsRequireAuth is set. An identified caller may do everything, and an action
// this function does not know needs a caller.
func (s *Service) Allow(caller Caller, a Action) error {
	switch {
	case !caller.Anonymous(), a == Read:
		return nil
	case a == Subscribe && !s.subscriptionsRequireAuth:
		return nil
	}
	return ErrUnauthenticated
}
