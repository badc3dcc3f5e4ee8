//go:build !race

// Benchmarks only, which go test -race does not run: left out of its build rather than linked
// with the race detector for nothing.

// BenchmarkSubscriptions: the memory of idle subscribed WebSockets and the fan-out of one event.

package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/bench/wsload"
)

// BenchmarkSubscriptions measures GraphQL subscriptions over WebSocket (graphql-transport-ws on
// /graphql) with subscribers idle connections, each initialised with the API key and subscribed
// to `subscription { postCreated { id title } }`, through a real Caddy in this process:
//
//   - memory per idle subscribed connection: the process's HeapInuse, StackInuse (goroutine
//     stacks are not in the heap) and VmRSS, each taken after a GC that returns freed memory to
//     the OS, before the connections open and once all of them are subscribed and idle. A
//     subscription counts as active only when a warm-up event, published after it was sent,
//     has reached it: events are published again until one reaches all of them.
//   - fan-out: the time from just before a REST POST /posts (API key) until the last of the
//     subscribers has read its `next` message, each read timed by the client's reader goroutine
//     as soon as Read returns.
//
// The clients live in this process, so the memory measured with Caddy (total-*) is the
// server's and the clients' together. Two baselines, measured the same way before Caddy starts,
// separate them:
//
//   - client-*: the same clients against a raw listener that completes the WebSocket handshake
//     by hand, writes the two messages the clients wait for, and then only holds the socket, with
//     no goroutine and no buffer: what is left is the clients' own cost. server-* is total-*
//     minus client-*.
//   - floor-*: the same clients against a minimal net/http + coder/websocket server (Accept,
//     write the two messages, one goroutine blocked in Read), minus client-*: what any server on
//     this stack pays per connection, to compare server-* with.
//
// All are reported per connection (B/conn; goroutines/conn). Socket buffers are kernel memory,
// in none of them. Heap and stack count whole allocated spans, RSS only the pages touched: a
// buffer allocated but never written (a large, empty channel buffer; the unused part of a
// stack) is in the first and not in the second, so server heap+stack can exceed server RSS.
// The connections are measured about 100ms after the warm-up event, before the server's first
// keep-alive ping.
//
// Fan-out is reported over all the events measured, at least minFanouts: fanout-p50-ms and
// fanout-last-ms are the median and the largest time until the last subscriber had the event,
// fanout-first-ms the median time until the first one had it, fanout-sub-p50-ms the median over
// the events of the median subscriber, post-ms the median time of the POST itself, and
// post-nosub-ms that of minFanouts POSTs made before any connection opened (the write without
// the fan-out). The clients' reads share the 2 cores with the server, so they count in these
// times.
//
// Only the fan-out depends on b.N: the connections open once (b.Loop runs the function body
// once), each iteration (ns/op) is one event published and received by every subscriber, and
// events are added after the loop until minFanouts were measured, so -benchtime 1x measures
// minFanouts events and -benchtime 50x fifty. Everything is closed, and waited for, at the end.
func BenchmarkSubscriptions(b *testing.B) {
	const n = subscribers

	// The clients alone.
	raw, err := startRawServer()
	if err != nil {
		b.Fatal(err)
	}
	client := idlePhase(b, "client-only", "ws://"+raw.ln.Addr().String()+"/graphql", n, false, false, waitRound0)
	raw.close()

	// The clients and a minimal coder/websocket server.
	floorURL, stopFloor := startFloorServer(b)
	floor := idlePhase(b, "floor", floorURL, n, true, false, waitRound0)
	stopFloor()

	// The clients and Caddy.
	s := startServer(b)
	seq := 0
	var quiet []time.Duration // POSTs without subscribers: the write without the fan-out
	for range minFanouts {
		seq++
		d, err := s.createPost(fmt.Sprintf("ev-%d", seq))
		if err != nil {
			b.Fatal(err)
		}
		quiet = append(quiet, d)
	}
	slices.Sort(quiet)
	warm := func(b *testing.B, f *wsload.Fleet) {
		b.Helper()
		for attempt := 1; ; attempt++ {
			seq++
			r := f.Begin(seq)
			if _, err := s.createPost(fmt.Sprintf("ev-%d", seq)); err != nil {
				b.Fatal(err)
			}
			if r.Wait(5 * time.Second) {
				return
			}
			if attempt == 5 {
				b.Fatalf("%d warm-up events: the last reached %d of %d subscribers", attempt, r.Got(), f.Len())
			}
			b.Logf("warm-up event %d reached %d of %d subscribers; publishing another", seq, r.Got(), f.Len())
		}
	}
	total := idlePhase(b, "caddy", strings.Replace(s.base, "http://", "ws://", 1)+"/graphql", n, true, true, warm)
	f := total.fleet

	var rounds []roundStats
	fanout := func() {
		seq++
		r := f.Begin(seq)
		post, err := s.createPost(fmt.Sprintf("ev-%d", seq))
		if err != nil {
			b.Fatal(err)
		}
		if !r.Wait(30 * time.Second) {
			b.Fatalf("event %d reached %d of %d subscribers in 30s", seq, r.Got(), f.Len())
		}
		rounds = append(rounds, roundStats{r.Stats(), post})
	}
	for b.Loop() {
		fanout()
	}
	for len(rounds) < minFanouts {
		fanout()
	}

	f.Close(true)
	lingering := settleGoroutines(total.before.goroutines, 10*time.Second) - total.before.goroutines
	if err := f.Check(websocket.StatusNormalClosure); err != nil {
		b.Error(err)
	}

	// Memory, per connection.
	per := func(v int64) float64 { return float64(v) / n }
	server := total.delta.minus(client.delta)
	floorServer := floor.delta.minus(client.delta)
	b.ReportMetric(per(total.delta.heap), "total-heap-B/conn")
	b.ReportMetric(per(total.delta.stack), "total-stack-B/conn")
	b.ReportMetric(per(client.delta.heap), "client-heap-B/conn")
	b.ReportMetric(per(client.delta.stack), "client-stack-B/conn")
	b.ReportMetric(per(server.heap), "server-heap-B/conn")
	b.ReportMetric(per(server.stack), "server-stack-B/conn")
	b.ReportMetric(per(floorServer.heap), "floor-heap-B/conn")
	b.ReportMetric(per(floorServer.stack), "floor-stack-B/conn")
	if total.before.rss > 0 {
		b.ReportMetric(per(total.delta.rss), "total-rss-B/conn")
		b.ReportMetric(per(client.delta.rss), "client-rss-B/conn")
		b.ReportMetric(per(server.rss), "server-rss-B/conn")
		b.ReportMetric(per(floorServer.rss), "floor-rss-B/conn")
	}
	b.ReportMetric(per(int64(server.goroutines)), "server-goroutines/conn")

	// Fan-out.
	pick := func(of func(roundStats) time.Duration) []time.Duration {
		var ds []time.Duration
		for _, r := range rounds {
			ds = append(ds, of(r))
		}
		slices.Sort(ds)
		return ds
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	lasts := pick(func(r roundStats) time.Duration { return r.Last })
	b.ReportMetric(ms(median(lasts)), "fanout-p50-ms")
	b.ReportMetric(ms(lasts[len(lasts)-1]), "fanout-last-ms")
	b.ReportMetric(ms(median(pick(func(r roundStats) time.Duration { return r.First }))), "fanout-first-ms")
	b.ReportMetric(ms(median(pick(func(r roundStats) time.Duration { return r.Median }))), "fanout-sub-p50-ms")
	b.ReportMetric(ms(median(pick(func(r roundStats) time.Duration { return r.post }))), "post-ms")
	b.ReportMetric(ms(median(quiet)), "post-nosub-ms")

	var buf strings.Builder
	fmt.Fprintf(&buf, "%d connections; per phase: before → after (Δ per connection)\n", n)
	for _, p := range []*phase{client, floor, total} {
		fmt.Fprintf(&buf, "  %-11s heap %7.1f → %7.1f MiB (%6.0f B)  stack %6.1f → %6.1f MiB (%6.0f B)  RSS %7.1f → %7.1f MiB (%6.0f B)  goroutines %5d → %5d (%.1f)\n",
			p.name, mib(p.before.heap), mib(p.after.heap), per(p.delta.heap),
			mib(p.before.stack), mib(p.after.stack), per(p.delta.stack),
			mib(p.before.rss), mib(p.after.rss), per(p.delta.rss),
			p.before.goroutines, p.after.goroutines, per(int64(p.delta.goroutines)))
	}
	fmt.Fprintf(&buf, "  server = caddy - client-only: heap %.0f B, stack %.0f B, RSS %.0f B, %.1f goroutines per connection\n",
		per(server.heap), per(server.stack), per(server.rss), per(int64(server.goroutines)))
	fmt.Fprintf(&buf, "%d events, time until the last subscriber had it (ms):", len(rounds))
	for _, r := range rounds {
		fmt.Fprintf(&buf, " %.1f", ms(r.Last))
	}
	fmt.Fprintf(&buf, "\nafter closing (1000) here: %d goroutines more than before the connections opened; the readers ended with %v",
		lingering, f.Ends())
	b.Log(buf.String())
}

const (
	subscribers  = 1000 // the connections measured
	minFanouts   = 5    // the fewest events the fan-out is measured over
	prewarmConns = 16   // connections opened and closed before a phase, so its code paths are warm
)

var (
	initMessage = wsload.Init(apiKey)
	// nextMessage is the event the baseline servers send: event 0.
	nextMessage = wsload.Next("0", 0)
)

// createPost publishes an event: it creates a post titled title, with the API key.
func (s *server) createPost(title string) (time.Duration, error) {
	body, err := json.Marshal(map[string]string{"title": title, "body": "fan-out"})
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequest(http.MethodPost, s.base+"/posts", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "ApiKey "+apiKey)
	start := time.Now()
	res, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	answer, err := io.ReadAll(res.Body)
	res.Body.Close()
	elapsed := time.Since(start)
	if err != nil {
		return 0, err
	}
	if res.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("POST /posts: status %d, body %s; want 201", res.StatusCode, answer)
	}
	return elapsed, nil
}
