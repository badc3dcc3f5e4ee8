// Package spans opens the module's spans under Caddy's tracing. A span is a child of the one a
// request's context carries, made by that span's own TracerProvider (Caddy's, with the exporter,
// sampler and resource its tracing directive set up, and its reloads), never by a global one. It
// is made only while the request's span is recording: with tracing off, or for a request its
// sampler left out, Start costs one context lookup and allocates nothing, and every method of the
// Span it returns does nothing, so that callers need not ask first.
//
// Like metrics and requestid, it is a leaf that any package of the module may import.
package spans

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of the module's spans.
const Scope = "github.com/postsedge/caddy-posts"

// Span is one of the module's spans, or nothing (its zero value) when the request is not traced.
type Span struct{ s trace.Span }

// Start starts the span name as a child of ctx's span, when that one is recording, and returns
// a context that carries it; otherwise ctx and the zero Span.
func Start(ctx context.Context, name string) (context.Context, Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, Span{}
	}
	ctx, s := parent.TracerProvider().Tracer(Scope).Start(ctx, name)
	return ctx, Span{s}
}

// Current is ctx's span when it is recording, for an event of the module's on a span it did not
// start; otherwise the zero Span.
func Current(ctx context.Context) Span {
	if s := trace.SpanFromContext(ctx); s.IsRecording() {
		return Span{s}
	}
	return Span{}
}

// On says whether the span records: callers that build attributes ask it first, so that an
// untraced request builds none.
func (s Span) On() bool { return s.s != nil }

// Rename gives the span the name that became known after it started (a GraphQL operation's).
func (s Span) Rename(name string) {
	if s.s != nil {
		s.s.SetName(name)
	}
}

// String sets the attribute key to value.
func (s Span) String(key, value string) {
	if s.s != nil {
		s.s.SetAttributes(attribute.String(key, value))
	}
}

// Int sets the attribute key to value.
func (s Span) Int(key string, value int64) {
	if s.s != nil {
		s.s.SetAttributes(attribute.Int64(key, value))
	}
}

// Bool sets the attribute key to value.
func (s Span) Bool(key string, value bool) {
	if s.s != nil {
		s.s.SetAttributes(attribute.Bool(key, value))
	}
}

// Set sets attributes; a caller builds them only when On.
func (s Span) Set(attributes ...attribute.KeyValue) {
	if s.s != nil {
		s.s.SetAttributes(attributes...)
	}
}

// Event adds the event name, with attributes; a caller builds them only when On.
func (s Span) Event(name string, attributes ...attribute.KeyValue) {
	if s.s != nil {
		s.s.AddEvent(name, trace.WithAttributes(attributes...))
	}
}

// Fail records err on the span, with its code (errcode's, the GraphQL extensions.code a client
// gets) as error.type, OpenTelemetry's attribute for what kind of error ended an operation, and
// marks the span's status an error.
func (s Span) Fail(err error, code string) {
	if s.s == nil || err == nil {
		return
	}
	if code != "" {
		s.s.SetAttributes(attribute.String("error.type", code))
	}
	s.s.RecordError(err)
	s.s.SetStatus(codes.Error, err.Error())
}

// End ends the span.
func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}

// Carry returns to, carrying the span of from, when from has one: for work that outlives a
// request (a WebSocket's connection, a stream) but is still its own, so that its spans are
// children of the request's and its log lines name the request's trace.
func Carry(to, from context.Context) context.Context {
	if s := trace.SpanFromContext(from); s.SpanContext().IsValid() {
		return trace.ContextWithSpan(to, s)
	}
	return to
}

// Since is how long ago t was, as an attribute's value in milliseconds, the unit that tracing
// backends show beside a span's own duration.
func Since(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
