// Package requestid carries the id of the request a piece of work is for (Caddy's request uuid,
// the one its access log shows) in a context, so that a log line written away from the request
// (by a resolver, by the service, on a WebSocket's goroutines) can name it.
package requestid

import (
	"context"
	"sync"

	"go.uber.org/zap"
)

type key struct{}

// With returns a copy of ctx that carries id; an empty id leaves ctx as it is.
func With(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, key{}, id)
}

// WithLazy returns a copy of ctx whose id is made by id the first time From asks for it, once:
// for the requests that need it only when something goes wrong (making Caddy's request uuid reads
// the system's random source). Every call of From must end before the caller of WithLazy goes on
// with what id reads (Caddy's replacer, which one goroutine at a time may use).
func WithLazy(ctx context.Context, id func() string) context.Context {
	return context.WithValue(ctx, key{}, sync.OnceValue(id))
}

// From is the id ctx carries, or "".
func From(ctx context.Context) string {
	switch id := ctx.Value(key{}).(type) {
	case string:
		return id
	case func() string:
		return id()
	}
	return ""
}

// Field is the log field of the id ctx carries, named uuid as in Caddy's access log; a field
// that logs nothing when there is none.
func Field(ctx context.Context) zap.Field {
	if id := From(ctx); id != "" {
		return zap.String("uuid", id)
	}
	return zap.Skip()
}
