//go:build !race

// Benchmarks only, which go test -race does not run: left out of its build rather than linked
// with the race detector for nothing.

// BenchmarkSubscriptions' measurements: memory snapshots, phases of idle connections, medians.

package bench

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/bench/wsload"
)

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
