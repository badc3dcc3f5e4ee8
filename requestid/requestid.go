// Package requestid carries the id of the request a piece of work is for (Caddy's request uuid,
// the one its access log shows) in a context, so that a log line written away from the request
// (by a resolver, by the service, on a WebSocket's goroutines) can name it, and its trace.
package requestid

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
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

// Field is the log field of the request ctx is for: its id, named uuid as in Caddy's access log,
// and, when the request is traced, its trace_id and span_id (of the span ctx carries), with
// which a tracing backend finds the line's trace; a field that logs nothing when there is none.
func Field(ctx context.Context) zap.Field {
	id := From(ctx)
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return zap.Inline(ids{id, sc})
	}
	if id != "" {
		return zap.String("uuid", id)
	}
	return zap.Skip()
}

// ids are the fields of a traced request's log line.
type ids struct {
	uuid string
	span trace.SpanContext
}

func (i ids) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if i.uuid != "" {
		enc.AddString("uuid", i.uuid)
	}
	enc.AddString("trace_id", i.span.TraceID().String())
	enc.AddString("span_id", i.span.SpanID().String())
	return nil
}
