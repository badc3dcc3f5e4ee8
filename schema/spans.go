// The spans of an operation, when its request is traced (spans.Start): the operation's,
// renamed for it once it is known, and the phases under it, its prepare (PrepareIn) and its
// execution (Execute: a plan's or graphql-go's Exec), each error with its extensions.code.

package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"go.opentelemetry.io/otel/attribute"

	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/spans"
)

// operationSpan is the name of an operation's span until the operation is known:
// OpenTelemetry's for GraphQL.
const operationSpan = "GraphQL Operation"

// PrepareIn prepares req as Prepare does, in the span of an operation of the request ctx is
// for, when that one is traced: it returns ctx carrying that span, which the caller ends
// (spans.Span.End) once it has answered, and Execute's span is a child of. The span is named
// for the operation (its type and name, as OpenTelemetry's GraphQL conventions say) with
// graphql.operation.type, graphql.operation.name and graphql.document.hash (the SHA-256 of the
// document's text, never the text), graphql.subscription.resumed for a subscription that resumes
// from a cursor, and has the prepare's span, graphql.prepare, under it: a
// refusal is recorded on both, with its code (never its message, which may quote the document).
func (s *Schema) PrepareIn(ctx context.Context, req Request) (context.Context, spans.Span, *Operation, *gqlerrors.QueryError) {
	ctx, span := spans.Start(ctx, operationSpan)
	var prepare spans.Span
	if span.On() {
		_, prepare = spans.Start(ctx, "graphql.prepare")
	}
	op, refusal := s.Prepare(req)
	if refusal != nil {
		code := errorCode(refusal)
		prepare.FailCode(code)
		span.FailCode(code)
	}
	prepare.End()
	if op != nil && span.On() {
		op.span = span
		if op.Type == "subscription" {
			s.TracedIn(ctx, op)
		}
		span.Rename(op.spanName())
		span.Set(attribute.String("graphql.operation.type", op.Type), attribute.String("graphql.document.hash", op.doc.hash))
		if op.Name != "" {
			span.String("graphql.operation.name", op.Name)
		}
		if op.resumeFrom != "" {
			span.Bool("graphql.subscription.resumed", true)
		}
	}
	return ctx, span, op, refusal
}

// spanName is the name of op's span: its type, then its name if it has one.
func (op *Operation) spanName() string {
	if op.Name == "" {
		return op.Type
	}
	return op.Type + " " + op.Name
}

// executionOf is graphql.execution, how an operation ran: by its plan, or by graphql-go's Exec.
func executionOf(planned bool) string {
	if planned {
		return "plan"
	}
	return "exec"
}

// recordErrors records the errors of a response of op on span, the execution's, and on op's:
// each an event with its code and path, and the first's code as the spans' error. Not their
// messages, which may quote the document or the variables.
func recordErrors(op *Operation, span spans.Span, errs []*gqlerrors.QueryError) {
	if !span.On() || len(errs) == 0 {
		return
	}
	for _, e := range errs {
		attrs := []attribute.KeyValue{attribute.String("graphql.error.code", errorCode(e))}
		if len(e.Path) > 0 {
			attrs = append(attrs, attribute.String("graphql.error.path", pathString(e.Path)))
		}
		span.Event("graphql.error", attrs...)
	}
	code := errorCode(errs[0])
	span.FailCode(code)
	op.span.FailCode(code)
}

// errorCode is e's extensions.code, or "".
func errorCode(e *gqlerrors.QueryError) string {
	code, _ := e.Extensions["code"].(string)
	return code
}

// pathString is a response path as one string, its keys and indexes joined by dots.
func pathString(path []any) string {
	var b strings.Builder
	for i, p := range path {
		if i > 0 {
			b.WriteByte('.')
		}
		fmt.Fprint(&b, p)
	}
	return b.String()
}

// Traced is what a subscription whose request is traced keeps for the spans of its deliveries
// (Delivery) and replays: the subscribe's span, which they are children of. A subscription whose
// request is not traced has none (Operation.Traced is nil).
type Traced struct {
	ctx context.Context // carries the operation's span (spans.Carry)
	svc *posts.Service  // where its events came from (posts.Service.OriginOf)

	mu       sync.Mutex
	replayed map[int64]struct{} // positions its Sequence released from a replay, not yet delivered
}

// Span is op's span, the zero Span when its request is not traced (PrepareIn): the parent of
// the spans of what runs it.
func (op *Operation) Span() spans.Span { return op.span }

// Traced is op's Traced, nil when its request is not traced.
func (op *Operation) Traced() *Traced { return op.traced }

// TracedIn gives ops, the subscriptions that ctx's request runs, and returns, a Traced whose
// spans are children of ctx's, when ctx is traced; nil otherwise. PrepareIn's, and REST's change
// stream's, whose operations (ChangesOf) are not prepared from a request but share its span.
func (s *Schema) TracedIn(ctx context.Context, ops ...*Operation) *Traced {
	if !spans.Traced(ctx) {
		return nil
	}
	s.svc.KeepOrigins()
	t := &Traced{ctx: spans.Carry(context.Background(), ctx), svc: s.svc}
	for _, op := range ops {
		op.traced = t
	}
	return t
}

// fromReplay notes that the response to the event at position comes from a replay, for its
// Delivery (Sequence.release); nothing for a nil t.
func (t *Traced) fromReplay(position int64) {
	if t == nil || position == 0 || !spans.Traced(t.ctx) { // none to label once tracing is off
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.replayed == nil {
		t.replayed = map[int64]struct{}{}
	}
	t.replayed[position] = struct{}{}
}

// wasReplayed says whether the response to position came from a replay, and forgets it.
func (t *Traced) wasReplayed(position int64) bool {
	if position == 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.replayed[position]
	delete(t.replayed, position)
	return ok
}

// Delivery starts the span of the delivery of payload, a response of t's subscription, which its
// transport ends once it has sent it (or failed to): graphql.subscription.event, a child of the
// subscribe's span, linked to the span of the write that made the event, on whichever instance
// it ran (store.Event.Trace). It says how the event came (posts.event.via: own, this instance's
// write; relay, another's, read from the log; replay, read again from the log for a resume or a
// subscriber that fell behind; log, one this instance no longer remembers), its position, and
// the delay from the log's taking it to the send, in milliseconds.
func (t *Traced) Delivery(payload json.RawMessage) spans.Span {
	if t == nil || !spans.Traced(t.ctx) { // not traced, or no longer (a reload turned tracing off)
		return spans.Span{}
	}
	origin, known := t.svc.OriginOf(CursorOf(payload))
	replayed := t.wasReplayed(origin.Position)
	span := spans.StartLinked(t.ctx, "graphql.subscription.event", origin.Trace)
	if !span.On() {
		return span
	}
	via := "log"
	switch {
	case replayed:
		via = "replay"
	case known && origin.Relayed:
		via = "relay"
	case known:
		via = "own"
	}
	span.String("posts.event.via", via)
	if origin.Position > 0 {
		span.Int("posts.event.position", origin.Position)
	}
	if known {
		span.Set(attribute.Float64("posts.event.delay_ms", spans.Since(origin.At)))
	}
	return span
}

// replaySpan starts the span of a replay of t's subscription from the event after from,
// graphql.subscription.replay, a child of the subscribe's span; its count is set as it ends
// (endReplay).
func (t *Traced) replaySpan(from int64) spans.Span {
	if t == nil {
		return spans.Span{}
	}
	_, span := spans.Start(t.ctx, "graphql.subscription.replay")
	span.Int("posts.replay.after", from)
	return span
}
