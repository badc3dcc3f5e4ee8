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
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of the module's spans.
const Scope = "github.com/postsedge/caddy-posts"

// Span is one of the module's spans, or nothing (its zero value) when the request is not traced.
type Span struct{ s trace.Span }

// Start starts the span name as a child of ctx's span, when that one is recording (or was, and
// was carried, Carry), and returns a context that carries it; otherwise ctx and the zero Span.
func Start(ctx context.Context, name string) (context.Context, Span) {
	tracer := tracerOf(ctx)
	if tracer == nil {
		return ctx, Span{}
	}
	ctx, s := tracer.Start(ctx, name)
	return ctx, recording(s)
}

// recording is s, or the zero Span when s records nothing: a provider that Caddy shut down on a
// reload that turned tracing off gives such spans to the connections that carried it.
func recording(s trace.Span) Span {
	if !s.IsRecording() {
		return Span{}
	}
	return Span{s}
}

// Traced says whether Start would start a span in ctx: for a caller that builds its span's name.
func Traced(ctx context.Context) bool { return tracerOf(ctx) != nil }

// tracerOf is the tracer of the module's spans under ctx's span, nil when that is not traced: the
// provider of ctx's span while it records, or the one Carry kept with a sampled span's context,
// unless Caddy has shut that one down (a reload that turned tracing off), which gives a no-op
// tracer.
func tracerOf(ctx context.Context) trace.Tracer {
	parent := trace.SpanFromContext(ctx)
	if parent.IsRecording() {
		return parent.TracerProvider().Tracer(Scope)
	}
	if sc := parent.SpanContext(); sc.IsSampled() {
		if p, ok := ctx.Value(providerKey{}).(trace.TracerProvider); ok {
			return live(p.Tracer(Scope))
		}
	}
	return nil
}

// live is t, or nil when it is a no-op tracer.
func live(t trace.Tracer) trace.Tracer {
	if _, ok := t.(noop.Tracer); ok {
		return nil
	}
	return t
}

// providerKey is the context key of the TracerProvider that Carry keeps.
type providerKey struct{}

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
// marks the span's status an error. FailCode is Fail without err's text, for errors whose text
// may quote what a client sent.
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

// FailCode records the code of an error as error.type and marks the span's status an error,
// described by the code alone.
func (s Span) FailCode(code string) {
	if s.s == nil {
		return
	}
	s.s.SetAttributes(attribute.String("error.type", code))
	s.s.SetStatus(codes.Error, code)
}

// End ends the span.
func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}

// Carry returns to, carrying the span of from, when from has one: for work that outlives a
// request (a WebSocket's connection, a key set's fetch) but is still its own, so that its spans
// are children of the request's, and its log lines name the request's trace. What it carries is
// the span's context and, when it records, its provider, not the span: a request's span stops
// recording when the request ends (a WebSocket's upgrade, long before its operations).
func Carry(to, from context.Context) context.Context {
	s := trace.SpanFromContext(from)
	if !s.SpanContext().IsValid() {
		return to
	}
	if s.IsRecording() {
		to = context.WithValue(to, providerKey{}, s.TracerProvider())
	}
	return trace.ContextWithSpanContext(to, s.SpanContext())
}

// Traceparent is ctx's span as a W3C traceparent (propagation.TraceContext's), when that one is
// recording: what the event log keeps of the write that logged an event, for the spans of its
// deliveries to link to (StartLinked); "" otherwise.
func Traceparent(ctx context.Context) string {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier[traceparentHeader]
}

// traceparentHeader is the key of a traceparent in propagation.TraceContext's carrier.
const traceparentHeader = "traceparent"

// spanContextOf reads a traceparent that Traceparent wrote; the zero SpanContext for anything
// else.
func spanContextOf(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{traceparentHeader: traceparent})
	return trace.SpanContextFromContext(ctx)
}

// StartLinked starts the span name as a child of ctx's span (Start's rule), linked to the span
// of traceparent (Traceparent's) when there is one: a delivery of an event to a subscriber, which
// is work of the subscription, following from a write of another request, maybe of another
// instance, as OpenTelemetry's messaging conventions link a message's processing to its
// sending. A child, not the root of a trace of its own, so that the subscription's sampling
// decides for its deliveries.
func StartLinked(ctx context.Context, name, traceparent string) Span {
	tracer := tracerOf(ctx)
	if tracer == nil {
		return Span{}
	}
	var links []trace.Link
	if write := spanContextOf(traceparent); write.IsValid() {
		links = []trace.Link{{SpanContext: write}}
	}
	_, s := tracer.Start(ctx, name, trace.WithLinks(links...))
	return recording(s)
}

// Provider is the TracerProvider of ctx's span while it records, nil otherwise: kept by work of
// the module that no request starts (a key set's timed refresh, StartRoot), to trace it where
// Caddy traces the requests.
func Provider(ctx context.Context) trace.TracerProvider {
	if s := trace.SpanFromContext(ctx); s.IsRecording() {
		return s.TracerProvider()
	}
	return nil
}

// StartRoot starts the span name as the root of a trace of its own, made by p (Provider's), for
// work of the module that no request starts, under p's sampler; ctx and the zero Span when p is
// nil.
func StartRoot(ctx context.Context, p trace.TracerProvider, name string) (context.Context, Span) {
	if p == nil {
		return ctx, Span{}
	}
	tracer := live(p.Tracer(Scope))
	if tracer == nil {
		return ctx, Span{}
	}
	ctx, s := tracer.Start(ctx, name, trace.WithNewRoot())
	return ctx, recording(s)
}

// Since is how long ago t was, as an attribute's value in milliseconds, the unit that tracing
// backends show beside a span's own duration.
func Since(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
