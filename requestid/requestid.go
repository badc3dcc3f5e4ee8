// Package requestid carries the id of the request a piece of work is for (Caddy's request uuid,
// the one its access log shows) in a context, so that a log line written away from the request
// (by a resolver, by the service, on a WebSocket's goroutines) can name it.
package requestid

import (
	"context"

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

// From is the id ctx carries, or "".
func From(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}

// Field is the log field of the id ctx carries, named uuid as in Caddy's access log; a field
// that logs nothing when there is none.
func Field(ctx context.Context) zap.Field {
	if id := From(ctx); id != "" {
		return zap.String("uuid", id)
	}
	return zap.Skip()
}
