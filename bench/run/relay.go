package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/postsedge/caddy-posts/bench/wsload"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// The relay's figures (issue 18), measured on two ./caddy processes with bench/Caddyfile.relay
// on one FerretDB that the harness runs, behind a proxy that counts the commands the instances
// send it:
//   - relay lag: a post created through instance A, timed from just before its POST until the
//     median of relaySubscribers subscribers on instance B has it; and, at the same time, on A
//     itself, whose own writes its follower hands at once (row 18c);
//   - the database's cost: commands per second with `events relay` against `events local`, at
//     idle and under relayLoad writes per second spread over both instances.
const (
	relayPoll        = 100 * time.Millisecond
	relaySubscribers = 10
	relayEvents      = 300
	relayPace        = 50 * time.Millisecond // between the events timed
	relayLoad        = 40                    // writes per second of the load
	relayWindow      = 10 * time.Second      // of each count of commands
	ownTarget        = 10 * time.Millisecond // p50 of A's writes to A's own subscribers
	relaySettle      = 20 * time.Second      // for an event before the timed ones (timeEvents)
)

// relayFigures are what measureRelay found.
type relayFigures struct {
	remote, local []time.Duration // lag of each event, to B's and to A's subscribers
	answered      []time.Duration // the time of each event's POST, to its answer
	idle, loaded  map[string]float64
	commandsRelay string // the commands of the loaded relay run, by name
}

// measureRelay starts FerretDB and, for each mode, the two instances, and measures.
func measureRelay(ctx context.Context, cfg config, dir string) (fig relayFigures, err error) {
	db, err := startCountedFerretDB(filepath.Join(dir, "ferretdb"))
	if err != nil {
		return fig, err
	}
	defer db.close()
	apiKey := "relay-" + rand.Text()
	fig.idle, fig.loaded = map[string]float64{}, map[string]float64{}
	for _, mode := range []string{"local", "relay"} {
		a, err := startRelayInstance(ctx, cfg, filepath.Join(dir, mode+"-a"), db.uri, mode, apiKey)
		if err != nil {
			return fig, err
		}
		b, err := startRelayInstance(ctx, cfg, filepath.Join(dir, mode+"-b"), db.uri, mode, apiKey)
		if err != nil {
			a.stop()
			return fig, err
		}
		err = func() error {
			defer a.stop()
			defer b.stop()
			time.Sleep(time.Second) // past the first polls and the driver's connections
			fig.idle[mode] = db.rate(ctx, relayWindow, nil)
			fig.loaded[mode] = db.rate(ctx, relayWindow, func(ctx context.Context) error {
				return writeAtRate(ctx, []string{a.base, b.base}, apiKey, relayLoad)
			})
			if mode == "local" {
				return nil
			}
			fig.commandsRelay = db.lastByName()
			fig.remote, fig.local, fig.answered, err = timeEvents(ctx, a, b, apiKey)
			return err
		}()
		if err != nil {
			return fig, fmt.Errorf("events %s: %w", mode, err)
		}
	}
	return fig, nil
}

// relayInstance is one ./caddy of the relay figures.
type relayInstance struct {
	base string // http://127.0.0.1:port
	proc *process
}

func (i *relayInstance) stop() { i.proc.stop() }

func startRelayInstance(ctx context.Context, cfg config, dir, uri, mode, apiKey string) (*relayInstance, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addrs, err := freeAddrs(1)
	if err != nil {
		return nil, err
	}
	_, port, _ := strings.Cut(addrs[0], ":")
	home := filepath.Join(dir, "home")
	vars := []string{
		"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"RELAY_DIR=" + dir, "RELAY_PORT=" + port, "RELAY_MONGODB_URI=" + uri, "RELAY_API_KEY=" + apiKey,
		"RELAY_EVENTS=" + mode, "RELAY_POLL=" + relayPoll.String(),
	}
	caddyfile := filepath.Join(filepath.Dir(cfg.caddyfile), "Caddyfile.relay")
	p, err := spawn(cfg.caddy, []string{"run", "--config", caddyfile, "--adapter", "caddyfile"}, vars, filepath.Join(dir, "caddy.log"))
	if err != nil {
		return nil, err
	}
	if err := p.listening(ctx, addrs[0]); err != nil {
		p.stop()
		return nil, err
	}
	return &relayInstance{base: "http://" + addrs[0], proc: p}, nil
}

// timeEvents times relayEvents posts created through a, each until the median of
// relaySubscribers subscribers on b (remote) and on a itself (local) has it: both at once, so
// that they are measured alike; and each POST until its answer.
func timeEvents(ctx context.Context, a, b *relayInstance, apiKey string) (remote, local, answered []time.Duration, err error) {
	fleets := make([]*wsload.Fleet, 2)
	for i, to := range []*relayInstance{b, a} {
		if fleets[i], err = wsload.Open(ctx, strings.Replace(to.base, "http://", "ws://", 1)+"/graphql", relaySubscribers, wsload.Init(apiKey)); err != nil {
			return nil, nil, nil, err
		}
		defer fleets[i].Close(true)
	}
	time.Sleep(500 * time.Millisecond) // every subscription in place
	// Events until one reaches every subscriber of both instances, which are not timed: a write
	// of the load that failed (a 503 of a slow FerretDB) may have left its event to be logged by
	// the recovery (RecoverAfter later), and the events after it wait for it, in order.
	for try := 1; ; try++ {
		seq := relayEvents + try
		rounds := []*wsload.Round{fleets[0].Begin(seq), fleets[1].Begin(seq)}
		status, body, err := do(ctx, "POST", a.base+"/posts", fmt.Sprintf(`{"title": "ev-%d"}`, seq), "Authorization: ApiKey "+apiKey)
		if err == nil && status != http.StatusCreated {
			err = fmt.Errorf("POST /posts: %d %s", status, body)
		}
		if err == nil && rounds[0].Wait(relaySettle) && rounds[1].Wait(relaySettle) {
			break
		}
		if try == 3 {
			return nil, nil, nil, fmt.Errorf("no event of 3 reached every subscriber within %s: %v", relaySettle, err)
		}
	}
	for seq := 1; seq <= relayEvents; seq++ {
		rounds := []*wsload.Round{fleets[0].Begin(seq), fleets[1].Begin(seq)}
		post, cancel := context.WithTimeout(ctx, 30*time.Second)
		began := time.Now()
		status, body, err := do(post, "POST", a.base+"/posts", fmt.Sprintf(`{"title": "ev-%d"}`, seq), "Authorization: ApiKey "+apiKey)
		answered = append(answered, time.Since(began))
		cancel()
		if err == nil && status != http.StatusCreated {
			err = fmt.Errorf("POST /posts: %d %s", status, body)
		}
		if err != nil {
			return nil, nil, nil, err
		}
		for i, r := range rounds {
			if !r.Wait(5 * time.Second) {
				return nil, nil, nil, fmt.Errorf("event %d reached %d of %d subscribers in 5s (%v)", seq, r.Got(), fleets[i].Len(), fleets[i].Ends())
			}
		}
		remote, local = append(remote, rounds[0].Stats().Median), append(local, rounds[1].Stats().Median)
		time.Sleep(relayPace)
	}
	return remote, local, answered, nil
}

// writeAtRate creates posts at perSecond, through each base in turn, until ctx ends.
func writeAtRate(ctx context.Context, bases []string, apiKey string, perSecond int) error {
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return failed
		case <-tick.C:
		}
		wg.Go(func() {
			post, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			status, body, err := do(post, "POST", bases[i%len(bases)]+"/posts", `{"title": "load"}`, "Authorization: ApiKey "+apiKey)
			if err == nil && status != http.StatusCreated {
				err = fmt.Errorf("POST /posts: %d %s", status, body)
			}
			if err != nil {
				mu.Lock()
				if failed == nil {
					failed = err
				}
				mu.Unlock()
			}
		})
	}
}

// countedFerretDB is FerretDB with mongotest's one-write-at-a-time proxy, behind a proxy of
// ours that counts the commands it forwards, by name.
type countedFerretDB struct {
	uri   string
	close func()

	mu     sync.Mutex
	counts map[string]int
	last   map[string]int // the counts of the last window
}

func startCountedFerretDB(dir string) (*countedFerretDB, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	srv, err := mongotest.Start(dir)
	if err != nil {
		return nil, err
	}
	inner, stopInner, err := mongotest.OneWriteAtATime(srv.Socket)
	if err != nil {
		srv.Close()
		return nil, err
	}
	innerSocket, err := socketOf(inner)
	if err != nil {
		stopInner()
		srv.Close()
		return nil, err
	}
	db := &countedFerretDB{counts: map[string]int{}}
	sockDir, err := os.MkdirTemp("", "relay-count-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(sockDir, "mongodb.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	var conns sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { db.forward(c, innerSocket) })
		}
	}()
	db.uri = "mongodb://" + url.QueryEscape(path) + "/"
	db.close = func() {
		ln.Close()
		stopInner() // closes the connections, so the forwards end
		conns.Wait()
		srv.Close()
		os.RemoveAll(sockDir)
	}
	return db, nil
}

// socketOf is the path of a mongodb:// URI on a unix socket.
func socketOf(uri string) (string, error) {
	host := strings.TrimSuffix(strings.TrimPrefix(uri, "mongodb://"), "/")
	return url.QueryUnescape(host)
}

// forward relays one client connection to socket, counting the commands.
func (db *countedFerretDB) forward(client net.Conn, socket string) {
	defer client.Close()
	server, err := net.Dial("unix", socket)
	if err != nil {
		return
	}
	defer server.Close()
	go func() {
		defer client.Close()
		for {
			msg, err := mongotest.ReadMessage(server)
			if err != nil {
				return
			}
			if _, err := client.Write(msg); err != nil {
				return
			}
		}
	}()
	for {
		msg, err := mongotest.ReadMessage(client)
		if err != nil {
			return
		}
		if name := mongotest.CommandName(msg); name != "" {
			db.mu.Lock()
			db.counts[name]++
			db.mu.Unlock()
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// rate counts the commands per second over relayWindow while work (if any) runs.
func (db *countedFerretDB) rate(ctx context.Context, window time.Duration, work func(context.Context) error) float64 {
	db.mu.Lock()
	before := maps.Clone(db.counts)
	db.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	began := time.Now()
	if work != nil {
		if err := work(wctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			log.Printf("relay figures: a write of the load failed: %v", err)
		}
	}
	<-wctx.Done()
	seconds := time.Since(began).Seconds()
	db.mu.Lock()
	defer db.mu.Unlock()
	db.last = map[string]int{}
	total := 0
	for name, n := range db.counts {
		if d := n - before[name]; d > 0 {
			db.last[name] = d
			total += d
		}
	}
	return float64(total) / seconds
}

// lastByName lists the commands of the last window, most first.
func (db *countedFerretDB) lastByName() string {
	db.mu.Lock()
	defer db.mu.Unlock()
	names := make([]string, 0, len(db.last))
	for name := range db.last {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return db.last[b] - db.last[a] })
	var parts []string
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s %d", name, db.last[name]))
	}
	return strings.Join(parts, ", ")
}

// renderRelay writes the relay's table, in Markdown.
func renderRelay(fig relayFigures) string {
	q := func(ds []time.Duration, p float64) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1e3
	}
	target := 3 * float64(relayPoll.Milliseconds())
	met := "**no**"
	if q(fig.remote, 0.99) <= target {
		met = "yes"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## The relay between instances\n\nTwo ./caddy processes (bench/Caddyfile.relay) on one FerretDB that the harness runs, "+
		"`events_poll_interval %s`; %d posts created through instance A, %s apart, each timed from just before its POST until the median of "+
		"%d subscribers (graphql-transport-ws) has it.\n\n", relayPoll, relayEvents, relayPace, relaySubscribers)
	b.WriteString("| # | measured | target | value | met |\n|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| 18a | relay lag, A's write to B's subscribers: p50 | — | %.1f ms | info |\n", q(fig.remote, 0.5))
	fmt.Fprintf(&b, "| 18a | relay lag, A's write to B's subscribers: p99 | ≤ %.0f ms (3 × the poll interval) | %.1f ms | %s |\n", target, q(fig.remote, 0.99), met)
	// A write's own event is handed before the write is answered: what its own subscribers wait
	// beyond the write itself is the time from its answer (negative: they had it first).
	afterAnswer, remoteAfterAnswer := make([]time.Duration, len(fig.local)), make([]time.Duration, len(fig.remote))
	for i := range fig.local {
		afterAnswer[i], remoteAfterAnswer[i] = fig.local[i]-fig.answered[i], fig.remote[i]-fig.answered[i]
	}
	fmt.Fprintf(&b, "| 18a | the same, from the write's answer (FerretDB's time for the write left out): p50 / p99 | — | %.1f / %.1f ms | info |\n", q(remoteAfterAnswer, 0.5), q(remoteAfterAnswer, 0.99))
	own := "**no**"
	if q(afterAnswer, 0.5) <= float64(ownTarget.Milliseconds()) {
		own = "yes"
	}
	fmt.Fprintf(&b, "| 18c | A's write to A's own subscribers, from the write's answer (handed at once, before it: ≤ 0): p50 | ≤ %d ms | %.1f ms | %s |\n", ownTarget.Milliseconds(), q(afterAnswer, 0.5), own)
	fmt.Fprintf(&b, "| 18c | the same: p99 | — | %.1f ms | info |\n", q(afterAnswer, 0.99))
	fmt.Fprintf(&b, "| 18c | A's write to A's own subscribers, from just before its POST (the write's own time included): p50 / p99 | — | %.1f / %.1f ms | info |\n", q(fig.local, 0.5), q(fig.local, 0.99))
	fmt.Fprintf(&b, "| 18c | the POST itself, to its answer (on FerretDB, four commands that scan): p50 / p99 | — | %.1f / %.1f ms | info |\n", q(fig.answered, 0.5), q(fig.answered, 0.99))
	fmt.Fprintf(&b, "| 18b | database commands/s of both instances at idle: relay, local, added | — | %.1f, %.1f, +%.1f | info |\n",
		fig.idle["relay"], fig.idle["local"], fig.idle["relay"]-fig.idle["local"])
	fmt.Fprintf(&b, "| 18b | database commands/s under %d writes/s (through both in turn): relay, local, added | — | %.1f, %.1f, +%.1f | info |\n",
		relayLoad, fig.loaded["relay"], fig.loaded["local"], fig.loaded["relay"]-fig.loaded["local"])
	fmt.Fprintf(&b, "\nThe commands of the relay's %s under load, by name: %s.\n", relayWindow, fig.commandsRelay)
	return b.String()
}
