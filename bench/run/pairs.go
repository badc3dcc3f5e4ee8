package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"math"
	"net/url"
	"slices"
)

// A pair is one line of the table: a metric of side a against the same metric of side b,
// measured in alternating runs of the load tool.
type pair struct {
	id     string // the target number; "i" for a line given as information
	what   string
	a, b   side
	metric metric
	diff   bool   // compare as a − b, in the metric's unit; otherwise a ÷ b
	target string // for the table, e.g. "≥ 0.90"; "" for information
	met    func(float64) bool
	// rate, when set, gives the total requests per second of every run (fixed rate, open
	// loop); otherwise each run is closed loop at the harness's concurrency.
	rate func() float64
	// conc, when set, is the concurrency of every run, instead of the harness's; requests,
	// when set, is the number of requests of a run, instead of its duration.
	conc, requests int
	// of, when set, is the pair whose runs this one reads with its own metric, instead of
	// running its own.
	of *pair

	out outcome
}

// side is one of the two things a pair compares: requests under hey, or, for a WebSocket
// side, the fan-out of fanOut on fresh servers that ws starts.
type side struct {
	name string
	req  request
	bare bool // served by the bare baseline in this process (profiled with runtime/pprof)
	ws   func(context.Context) (*wsServer, error)
}

// metric is what a run is reduced to.
type metric struct {
	name string
	unit string
	of   func(result) float64 // in unit
}

var (
	throughput = metric{"throughput", "req/s", result.throughput}
	p50        = metric{"p50", "ms", func(r result) float64 { return r.quantile(0.50) * 1e3 }}
	p99        = metric{"p99", "ms", func(r result) float64 { return r.quantile(0.99) * 1e3 }}
	memory     = metric{"RSS", "KiB/conn", func(r result) float64 { return r.perConn / 1024 }}
)

func atLeast(t float64) func(float64) bool { return func(v float64) bool { return v >= t } }
func atMost(t float64) func(float64) bool  { return func(v float64) bool { return v <= t } }

// outcome is what the rounds of a pair measured: the runs of each side, their metric and the
// comparisons.
type outcome struct {
	runsA, runsB []result
	a, b, cmp    []float64
}

// record adds one round's runs of the two sides, and logs them.
func (p *pair) record(ra, rb result) {
	a, b := p.metric.of(ra), p.metric.of(rb)
	cmp := a / b
	if p.diff {
		cmp = a - b
	}
	o := &p.out
	o.runsA, o.runsB = append(o.runsA, ra), append(o.runsB, rb)
	o.a, o.b, o.cmp = append(o.a, a), append(o.b, b), append(o.cmp, cmp)
	log.Printf("pair %s round %d: %s %s, %s %s: %s", p.id, len(o.cmp), p.a.name, p.metric.format(a), p.b.name, p.metric.format(b), p.formatCmp(cmp))
}

// median is the median of v; NaN for none.
func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// pairs are the lines of the table, in the order they run. To add one, append it here.
func pairs(e *env) []*pair {
	get := request{url: e.read + "/posts/" + e.postID, status: 200}
	bearer := get
	bearer.headers = []string{"Authorization: Bearer " + e.token}
	apiKey := "X-API-Key: " + e.apiKey
	post := func(base string) request {
		return request{method: "POST", url: base + "/posts", body: `{"title": "benchmark", "body": "a post written over and over"}`,
			headers: []string{apiKey}, status: 201}
	}
	graphQL := func(query string, variables map[string]string) request {
		body, _ := json.Marshal(map[string]any{"query": query, "variables": variables})
		return request{method: "POST", url: e.read + "/graphql", body: string(body), status: 200}
	}
	list := "/posts?" + url.Values{"userId": {e.listUser}, "limit": {"10"}}.Encode()

	module := side{name: "module", req: get}
	bare := side{name: "bare", req: request{url: e.bareRead + "/posts/" + e.postID, status: 200}, bare: true}
	p8 := &pair{id: "8", what: "idle subscribed WebSocket connections at 10,000: resident memory per connection, module ÷ ws-bare",
		a: side{name: "module", ws: e.moduleWS}, b: side{name: "ws-bare", ws: bareWS},
		metric: memory, target: "≤ 1.25", met: atMost(1.25)}
	p1 := &pair{id: "1", what: "`GET /posts/{id}` throughput, module ÷ bare", a: module, b: bare,
		metric: throughput, target: "≥ 0.90", met: atLeast(0.90)}
	return []*pair{
		p1,
		{id: "2", what: "`GET /posts/{id}` p50 at half the bare maximum, module − bare", a: module, b: bare,
			metric: p50, diff: true, target: "≤ 0.3 ms", met: atMost(0.3),
			rate: func() float64 { return median(p1.out.b) / 2 }},
		{id: "3", what: "`GET /posts/{id}` throughput, RS256 bearer (reused) ÷ anonymous",
			a: side{name: "bearer", req: bearer}, b: side{name: "anonymous", req: get},
			metric: throughput, target: "≥ 0.90", met: atLeast(0.90)},
		{id: "4", what: "`POST /posts` throughput, module ÷ bare insert",
			a: side{name: "module", req: post(e.write)}, b: side{name: "bare", req: post(e.bareWrite), bare: true},
			metric: throughput, target: "≥ 0.85", met: atLeast(0.85)},
		{id: "5", what: "`post(id)` throughput, GraphQL ÷ REST `GET /posts/{id}`",
			a:      side{name: "graphql", req: graphQL(postQuery, map[string]string{"id": e.postID})},
			b:      side{name: "rest", req: get},
			metric: throughput, target: "≥ 0.70", met: atLeast(0.70)},
		{id: "6", what: "`user(id){posts(limit:10){title createdAt}}` p99, GraphQL ÷ REST `GET /posts?userId=&limit=10`",
			a:      side{name: "graphql", req: graphQL(userPostsQuery, map[string]string{"id": e.listUser})},
			b:      side{name: "rest", req: request{url: e.read + list, status: 200}},
			metric: p99, target: "≤ 2.0", met: atMost(2.0)},
		{id: "7a", what: "`GET /posts?limit=20` latency of one client, 200,000 ÷ 2,000 posts, first page",
			a: side{name: "200,000", req: request{url: e.pages["large first"], status: 200}}, b: side{name: "2,000", req: request{url: e.pages["small first"], status: 200}},
			conc: 1, requests: 1, metric: p50, target: "≤ 1.3", met: atMost(1.3)},
		{id: "7b", what: "`GET /posts?limit=20` latency of one client, 200,000 ÷ 2,000 posts, page 50",
			a: side{name: "200,000", req: request{url: e.pages["large page 50"], status: 200}}, b: side{name: "2,000", req: request{url: e.pages["small page 50"], status: 200}},
			conc: 1, requests: 1, metric: p50, target: "≤ 1.3", met: atMost(1.3)},
		p8,
		{id: "9", what: "one event to 10,000 subscribers, all delivered: p99 time to the last, module ÷ ws-bare",
			a: p8.a, b: p8.b, of: p8, metric: p99, target: "≤ 1.5", met: atMost(1.5)},
		{id: "i", what: "`GET /posts/{id}` throughput, module ÷ `respond` (the ceiling)", a: module,
			b:      side{name: "respond", req: request{url: e.respond + "/posts/" + e.postID, status: 200}},
			metric: throughput},
	}
}

// The GraphQL reads: post(id) with every field of the REST answer, and a user's latest posts.
const (
	postQuery      = `query($id: ID!) { post(id: $id) { id userId title body createdAt updatedAt } }`
	userPostsQuery = `query($id: ID!) { user(id: $id) { posts(limit: 10) { title createdAt } } }`
)

// format writes a value of the metric for the table.
func (m metric) format(v float64) string {
	switch m.unit {
	case "ms":
		return fmt.Sprintf("%.2f ms", v)
	case "KiB/conn":
		return fmt.Sprintf("%.1f %s", v, m.unit)
	}
	return fmt.Sprintf("%.0f %s", v, m.unit)
}

// formatCmp writes a comparison of the pair for the table.
func (p *pair) formatCmp(v float64) string {
	if p.diff {
		return fmt.Sprintf("%+.2f %s", v, p.metric.unit)
	}
	return fmt.Sprintf("%.2f", v)
}
