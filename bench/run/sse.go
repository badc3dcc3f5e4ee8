package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/postsedge/caddy-posts/bench/sseload"
)

// The stream rows (S): GraphQL over server-sent events, subscribed to as row 8's WebSockets are
// and measured in its rounds with the fan-out of ws.go (wsConns subscribers, then wsEvents
// events, on a fresh Caddy each run), against its two sides. On HTTP/2, the streams share
// h2Conns connections, h2Streams each (under the 250 streams a connection Go's server allows).
const (
	h2Conns   = 100
	h2Streams = wsConns / h2Conns
)

// streamSides are the SSE subscribers of the S rows, over HTTP/1.1 (a connection each) and over
// HTTP/2 without TLS (h2c), on the site of Caddyfile.bench that speaks it.
func streamSides(e *env) (h1, h2 side) {
	stream := func(ctx context.Context) (*wsServer, error) { return e.module(ctx, "STREAM") }
	return side{name: "sse-h1", ws: stream, open: openSSE(e.apiKey, 0)},
		side{name: "sse-h2", ws: stream, open: openSSE(e.apiKey, h2Conns)}
}

// openSSE opens SSE subscribers with the API key: over HTTP/1.1, a connection each, or, with
// conns, as HTTP/2 streams spread over that many connections (of the subscribers a run opens:
// its warm-up's few take one each).
func openSSE(apiKey string, conns int) opener {
	return func(ctx context.Context, srv *wsServer, n int) (fleet, error) {
		opts := sseload.Options{Headers: http.Header{"Authorization": {"ApiKey " + apiKey}}}
		if conns > 0 {
			opts.HTTP2Conns = min(conns, n)
		}
		f, err := sseload.Open(ctx, srv.http, n, opts)
		if err != nil {
			return nil, err
		}
		return sseFleet{f}, nil
	}
}

// sseFleet is an SSE fleet, which has no close handshake.
type sseFleet struct{ *sseload.Fleet }

func (f sseFleet) Close(bool) { f.Fleet.Close() }

// streamPairs are the S rows, which read the runs of p8 (whose rounds run h1 and h2 too): an
// idle SSE subscriber's memory against an idle WebSocket's of ws-bare, over HTTP/1.1 and
// HTTP/2, and one event to every SSE subscriber against the same to the module's WebSockets
// (row 9's module side).
func streamPairs(p8 *pair, h1, h2 side) []*pair {
	wsBare, moduleWS := p8.b, p8.a
	return []*pair{
		{id: "Sa", what: "idle GraphQL over SSE subscriptions at 10,000, HTTP/1.1 (a connection each): resident memory per subscription, module ÷ ws-bare's idle WebSocket (row 8's)",
			a: h1, b: wsBare, of: p8, metric: memory, target: "≤ 1.0", met: atMost(1.0)},
		{id: "Sb", what: fmt.Sprintf("idle GraphQL over SSE subscriptions at 10,000, HTTP/2 without TLS (%d connections × %d streams): resident memory per subscription, module ÷ ws-bare's idle WebSocket (row 8's)", h2Conns, h2Streams),
			a: h2, b: wsBare, of: p8, metric: memory, target: "≤ 1.0", met: atMost(1.0)},
		{id: "Sc", what: "one event to 10,000 subscribers, all delivered: p99 time to the last, GraphQL over SSE (HTTP/1.1) ÷ the module's WebSockets (row 9's)",
			a: h1, b: moduleWS, of: p8, metric: p99, target: "≤ 1.2", met: atMost(1.2)},
		{id: "Sd", what: "idle subscribers at 10,000: resident memory per subscription, SSE (HTTP/1.1) ÷ the module's WebSockets (row 8's)",
			a: h1, b: moduleWS, of: p8, metric: memory},
		{id: "Se", what: fmt.Sprintf("one event to 10,000 subscribers: p99 time to the last, SSE over HTTP/2 (%d connections) ÷ the module's WebSockets (row 9's)", h2Conns),
			a: h2, b: moduleWS, of: p8, metric: p99},
	}
}
