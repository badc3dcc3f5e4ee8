// GraphQL over server-sent events: graphql-sse's distinct connections mode (one operation per
// request; github.com/enisdenjo/graphql-sse, PROTOCOL.md), with each event's cursor as its id,
// so that an EventSource that reconnects sends it back as Last-Event-ID and resumes after it.

package stream

import (
	"encoding/json"
	"time"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/schema"
)

// SSE frames a stream as text/event-stream.
type SSE struct{}

func (SSE) name() string        { return metrics.SSE }
func (SSE) contentType() string { return "text/event-stream; charset=utf-8" }

// keepAliveEvery is the WebSockets' ping interval (ws_keepalive): well under the idle timeouts
// of the proxies and load balancers in between.
func (SSE) keepAliveEvery(cfg live.Subscriptions) time.Duration { return cfg.KeepAlive }

// open is a comment: the client sees the stream established before any event.
func (SSE) open(b []byte) []byte      { return append(b, ":\n\n"...) }
func (SSE) keepAlive(b []byte) []byte { return append(b, ":\n\n"...) }

// result is a next event; an event of a subscription carries its cursor as its id, from which
// EventSource resumes (Last-Event-ID); a query's, whose cursor is in its extensions, has none, as
// a query is not resumed. A JSON text has no line break, so it is one data line.
func (SSE) result(b []byte, payload json.RawMessage, event bool) []byte {
	if cursor := schema.CursorOf(payload); event && cursor != "" {
		b = append(append(append(b, "id: "...), cursor...), '\n')
	}
	b = append(b, "event: next\ndata: "...)
	return append(append(b, payload...), "\n\n"...)
}

func (SSE) complete(b []byte) []byte { return append(b, "event: complete\ndata:\n\n"...) }

// failed tells the operation's errors in a next event, then completes. The transport's own end
// (too slow, a restart) is the response's end alone: EventSource reconnects, with Last-Event-ID.
func (f SSE) failed(b []byte, errs []*gqlerrors.QueryError, reconnect bool) []byte {
	if reconnect {
		return b
	}
	return f.complete(f.result(b, answer.MustJSON(map[string]any{"errors": errs}), false))
}
