package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
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
	req.Header.Set("X-API-Key", apiKey)
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

// memSnap is the process's memory and goroutines at one time.
type memSnap struct {
	heap, stack, rss int64 // bytes
	goroutines       int
}

func (m memSnap) minus(o memSnap) memSnap {
	return memSnap{m.heap - o.heap, m.stack - o.stack, m.rss - o.rss, m.goroutines - o.goroutines}
}

// snapshot collects garbage, returns the freed memory to the OS, and reads what is left.
func snapshot() memSnap {
	runtime.GC() // a second cycle frees what finalizers and sync.Pool's victim cache held
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memSnap{heap: int64(m.HeapInuse), stack: int64(m.StackInuse), rss: rss(), goroutines: runtime.NumGoroutine()}
}

// rss is this process's resident set size, or 0 if unknown.
func rss() int64 {
	n, _ := wsload.ResidentMemory(os.Getpid())
	return n
}

func mib(v int64) float64 { return float64(v) / (1 << 20) }

// settleGoroutines waits until at most target goroutines run, or d has passed, and says how
// many run.
func settleGoroutines(target int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		n := runtime.NumGoroutine()
		if n <= target || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// phase is the memory of one set of n idle subscribed connections.
type phase struct {
	name                 string
	before, after, delta memSnap
	fleet                *wsload.Fleet // still open
}

// idlePhase opens prewarmConns connections to url, warms them with warm and closes them; then
// it measures the memory, opens n connections, warms them and measures again. With keep, the n
// connections stay open in the phase's fleet, for the caller to close; else they are closed
// (with the close handshake or at once), and their goroutines waited for.
func idlePhase(b *testing.B, name, url string, n int, handshake, keep bool, warm func(*testing.B, *wsload.Fleet)) *phase {
	b.Helper()
	start := runtime.NumGoroutine()
	pre := openFleet(b, url, prewarmConns)
	warm(b, pre)
	pre.Close(handshake)
	if err := pre.Check(websocket.StatusNormalClosure); err != nil {
		b.Error(err)
	}
	settleGoroutines(start, 10*time.Second)

	p := &phase{name: name, before: snapshot()}
	p.fleet = openFleet(b, url, n)
	warm(b, p.fleet)
	time.Sleep(100 * time.Millisecond) // idle: the last writes and their timers are done
	p.after = snapshot()
	p.delta = p.after.minus(p.before)
	if !keep {
		p.fleet.Close(handshake)
		if err := p.fleet.Check(websocket.StatusNormalClosure); err != nil {
			b.Error(err)
		}
		p.fleet = nil
		settleGoroutines(p.before.goroutines, 10*time.Second)
	}
	return p
}

// waitRound0 waits until every connection has the event the baseline servers send.
func waitRound0(b *testing.B, f *wsload.Fleet) {
	b.Helper()
	if r := f.Current(); !r.Wait(10 * time.Second) {
		b.Fatalf("event 0 reached %d of %d clients", r.Got(), f.Len())
	}
}

// roundStats is one event's fan-out and the time of the POST that published it.
type roundStats struct {
	wsload.Stats
	post time.Duration
}

// openFleet opens n connections to url, closed by b's cleanup if not before.
func openFleet(b *testing.B, url string, n int) *wsload.Fleet {
	b.Helper()
	f, err := wsload.Open(context.Background(), url, n, initMessage)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close(false) })
	return f
}

func median(sorted []time.Duration) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[len(sorted)/2]
}

// rawServer completes the WebSocket handshake by hand, writes connection_ack and event 0, and
// then only holds the connections: no goroutine, no buffer, nothing read.
type rawServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func startRawServer() (*rawServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &rawServer{ln: ln}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.handshake(c) })
		}
	})
	return s, nil
}

func (s *rawServer) handshake(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		c.Close()
		return
	}
	sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	var out bytes.Buffer
	fmt.Fprintf(&out, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: %s\r\n\r\n",
		base64.StdEncoding.EncodeToString(sum[:]), wsload.Subprotocol)
	for _, m := range [][]byte{wsload.Ack, nextMessage} {
		out.WriteByte(0x81) // FIN, text
		if len(m) < 126 {
			out.WriteByte(byte(len(m)))
		} else {
			out.Write([]byte{126, byte(len(m) >> 8), byte(len(m))})
		}
		out.Write(m)
	}
	if _, err := c.Write(out.Bytes()); err != nil {
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.mu.Unlock()
}

func (s *rawServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
	s.mu.Unlock()
	s.wg.Wait()
}

// startFloorServer starts a minimal WebSocket server on net/http and coder/websocket: it
// accepts, writes connection_ack and event 0, and reads (and drops) messages until the client
// leaves. stop stops it, once its clients have left.
func startFloorServer(b *testing.B) (url string, stop func()) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var handlers sync.WaitGroup
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handlers.Add(1)
			defer handlers.Done()
			c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{wsload.Subprotocol}})
			if err != nil {
				return
			}
			defer c.CloseNow()
			ctx := context.Background()
			if c.Write(ctx, websocket.MessageText, wsload.Ack) != nil || c.Write(ctx, websocket.MessageText, nextMessage) != nil {
				return
			}
			for {
				if _, _, err := c.Read(ctx); err != nil {
					return
				}
			}
		}),
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = srv.Close() // not the hijacked connections: their clients close them
			<-served
			handlers.Wait()
		})
	}
	b.Cleanup(stop)
	return "ws://" + ln.Addr().String() + "/graphql", stop
}
