//go:build integration

// Subscriptions that resume from a cursor (issue 25), through real processes: subscribers whose
// connections a proxy cuts every few seconds connect again and resume each subscription from the
// cursor of the last event it received, on the embedded store, across the relay's two instances,
// and across an instance's SIGKILL. The refusals are in process_resume_refusals_test.go, a long
// replay beside live subscribers in process_resume_replay_test.go.
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/openapi/openapitest"
)

// TestResumingThroughCutConnections runs 20 subscribers (three subscriptions each: created,
// updated, deleted) and 5 clients of REST's change stream (as EventSource: Last-Event-ID)
// through a proxy that cuts each of their connections 0.5 to 3s after it opened, while 8
// writers make 5,000 writes on the embedded store, half through REST and half through GraphQL:
// each subscriber, resuming each subscription (or its stream) from its last cursor, gets every
// event once, each post's in the order written, and nothing else.
func TestResumingThroughCutConnections(t *testing.T) {
	t.Run("every subscriber gets every write once and in order, though its connection is cut every 0.5 to 3s", func(t *testing.T) {
		port := freePort(t)
		p := startProcess(t, processConfig("off", port, "\t\tdata_dir "+t.TempDir()), port)
		proxy := startCutProxy(t, p.url, 500*time.Millisecond, 3*time.Second)
		clients := make([]*resumingClient, 25)
		for i := range clients {
			if i < 20 {
				clients[i] = startResumingClient(t, fmt.Sprint("S", i+1), proxy.wsURL, everyWrite, nil)
			} else { // REST's change stream, as EventSource reads it
				clients[i] = startChangesClient(t, fmt.Sprint("E", i-19), proxy.baseURL, "")
			}
		}
		w := newResumeWriter(t, false)
		ignore := warmUp(t, w, p.url, clients)
		proxy.startCutting()
		start := time.Now()
		w.writeChains(8, func(int, int) string { return p.url }, chainsUpTo(0, 5000/4))
		took := time.Since(start)
		proxy.stopCutting()
		want, decided := w.settle(p.url)
		checkResumed(t, w, p.url, clients, want, ignore, decided)
		t.Logf("%d writes in %v (%.0f/s), %d cuts; %s; every event delivered %v after the first write",
			w.writes, took.Round(time.Millisecond), float64(w.writes)/took.Seconds(), proxy.cuts.Load(), connectionStats(clients), time.Since(start).Round(time.Millisecond))
	})
}

// TestResumingAcrossTwoCaddies runs the load of TestResumingThroughCutConnections on the relay:
// two instances on one FerretDB process, the writes spread over both, each subscriber's
// connections cut as there and resumed on the other instance half of the time, with the
// cursors the first made; then the same with one instance killed (SIGKILL) under it.
//
// Scaled down from 5,000 writes to 100 a run: the relay on FerretDB makes 4 to 85 writes a
// second on 2 cores under these cuts (100 took 1s to 13s in runs of this test, 200 up to 48s,
// the breaker answering some 503 in the slow ones). A chain of writes starts every chainPeriod
// at most, so that the writes last 10s at least and each subscriber's connection is cut some
// five times or more, however fast the relay writes.
func TestResumingAcrossTwoCaddies(t *testing.T) {
	ownProcesses(t)
	const writes, writers, subscribers = 100, 8, 20
	const chainPeriod = 400 * time.Millisecond
	t.Run("every subscriber gets every write once and in order, though cut every 0.5 to 3s and resumed on the other instance half of the time", func(t *testing.T) {
		pair := startRelayPair(t, "")
		proxies := [2]*cutProxy{startCutProxy(t, pair.a.url, 500*time.Millisecond, 3*time.Second), startCutProxy(t, pair.b.url, 500*time.Millisecond, 3*time.Second)}
		var switched atomic.Int64
		clients := make([]*resumingClient, subscribers)
		for i := range clients {
			clients[i] = startResumingClient(t, fmt.Sprint("S", i+1), eitherInstance(i%2, proxies, nil, &switched), everyWrite, nil)
		}
		w := newResumeWriter(t, true)
		ignore := warmUp(t, w, pair.a.url, clients)
		proxies[0].startCutting()
		proxies[1].startCutting()
		start := time.Now()
		w.writeChains(writers, bothInstances(pair, nil), chainsEvery(writes/4, chainPeriod, nil))
		took := time.Since(start)
		proxies[0].stopCutting()
		proxies[1].stopCutting()
		want, decided := w.settle(pair.b.url)
		checkResumed(t, w, pair.b.url, clients, want, ignore, decided)
		t.Logf("%d writes acknowledged in %v (%.0f/s), %d of unknown outcome (%d made); %d cuts; %s, %d of them on the other instance than the one before",
			w.writes, took.Round(time.Millisecond), float64(w.writes)/took.Seconds(), len(w.failures), made(decided), proxies[0].cuts.Load()+proxies[1].cuts.Load(), connectionStats(clients), switched.Load())
	})
	t.Run("the subscribers of an instance killed with SIGKILL resume on the other, and lose and repeat nothing", func(t *testing.T) {
		pair := startRelayPair(t, "")
		proxies := [2]*cutProxy{startCutProxy(t, pair.a.url, 500*time.Millisecond, 3*time.Second), startCutProxy(t, pair.b.url, 500*time.Millisecond, 3*time.Second)}
		var killed atomic.Bool
		var switched atomic.Int64
		clients := make([]*resumingClient, subscribers)
		for i := range clients {
			clients[i] = startResumingClient(t, fmt.Sprint("S", i+1), eitherInstance(i%2, proxies, &killed, &switched), everyWrite, nil)
		}
		w := newResumeWriter(t, true)
		ignore := warmUp(t, w, pair.a.url, clients)
		proxies[0].startCutting()
		proxies[1].startCutting()
		var onA int
		var kill sync.WaitGroup
		start := time.Now()
		w.writeChains(writers, bothInstances(pair, &killed), chainsEvery(writes/4, chainPeriod, func(n int) {
			if n == writes/4/3 { // a third in: A dies under the load
				kill.Go(func() {
					onA = connectedTo(clients, proxies[0])
					killed.Store(true) // no more writes nor connections to A from now on
					pair.a.kill()
				})
			}
		}))
		took := time.Since(start)
		kill.Wait()
		proxies[0].stopCutting()
		proxies[1].stopCutting()
		// A's writes cut by its death may be stored with their events pending, which an instance
		// logs when it looks for such writes: RecoverAfter (the timeout, 5s) after it starts,
		// every RecoverAfter for a minute after another instance's writes stop, and every minute.
		// B logs them within two RecoverAfters of A's death; A restarted, as a supervisor would,
		// 5s after its start. Nothing connects to it.
		portA, _ := strconv.Atoi(pair.a.url[strings.LastIndex(pair.a.url, ":")+1:])
		startProcess(t, pair.config(portA), portA)
		want, decided := w.settle(pair.b.url)
		checkResumed(t, w, pair.b.url, clients, want, ignore, decided)
		t.Logf("A killed with %d of %d subscribers connected to it; %d writes acknowledged in %v (%.0f/s), %d got no answer or a 5xx, of which the store holds %d; %d cuts; %s",
			onA, subscribers, w.writes, took.Round(time.Millisecond), float64(w.writes)/took.Seconds(), len(w.failures), made(decided),
			proxies[0].cuts.Load()+proxies[1].cuts.Load(), connectionStats(clients))
		if len(w.failures) > 0 {
			t.Logf("for instance: %s", w.failures[0])
		}
	})
}

// eitherInstance is the URL of a subscriber's connections: first through proxies[home], then
// through the other proxy half of the time (counted in switched); only through the second's
// (B's) once killed is set.
func eitherInstance(home int, proxies [2]*cutProxy, killed *atomic.Bool, switched *atomic.Int64) func() string {
	on, first := home, true
	return func() string {
		if !first && rand.N(2) == 0 {
			on = 1 - on
			switched.Add(1)
		}
		first = false
		if killed != nil && killed.Load() {
			on = 1
		}
		return proxies[on].wsURL()
	}
}

// bothInstances spreads each chain's writes over the pair's two instances, in turn; only
// through B once killed is set.
func bothInstances(pair *relayPair, killed *atomic.Bool) func(n, step int) string {
	return func(n, step int) string {
		if (n+step)%2 == 1 || killed != nil && killed.Load() {
			return pair.b.url
		}
		return pair.a.url
	}
}

// connectedTo is how many clients have a connection open through proxy now.
func connectedTo(clients []*resumingClient, proxy *cutProxy) int {
	n := 0
	for _, c := range clients {
		c.mu.Lock()
		if c.ws != nil && c.lastURL == proxy.wsURL() {
			n++
		}
		c.mu.Unlock()
	}
	return n
}

// resumeQueries are the subscriptions of a resumingClient, by their operation id.
var resumeQueries = map[string]string{
	"c": "subscription { postCreated { id version } }",
	"u": "subscription { postUpdated { id version } }",
	"d": "subscription { postDeleted }",
}

// everyWrite are the operation ids of the three subscriptions that see every write.
var everyWrite = []string{"c", "u", "d"}

// resumingClient is a graphql-transport-ws client with subscriptions (of resumeQueries) on one
// connection, which keeps what each received, and the cursor of the last event of each: when
// its connection ends, whatever the reason, it connects again, to the URL url gives then, and
// subscribes each again with extensions.resumeFrom that cursor (without, for a subscription
// that has received nothing yet).
type resumingClient struct {
	name string
	subs []string
	url  func() string
	// changes makes it a client of REST's change stream rather (changes.go): one stream of
	// every write, from the site url gives, resumed as EventSource resumes it.
	changes *changesClient

	mu          sync.Mutex
	got         map[string][]string  // by post id, in the order received: "c1", "u2", "d"
	order       []string             // "<post id> <entry>", in the order received
	at          map[string]time.Time // by "<post id> <entry>", when it first came
	cursors     map[string]string    // by operation id, the cursor of its last event
	connections int
	ends        map[string]int  // why connections ended
	trouble     []string        // anything but events, pings and pongs
	ws          *websocket.Conn // the connection open now, if any
	lastURL     string          // of the last connection

	stopping chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// startResumingClient connects a client with the subscriptions subs, resuming them from cursors
// (by operation id; nil for none), and stops it when the test ends.
func startResumingClient(t *testing.T, name string, url func() string, subs []string, cursors map[string]string) *resumingClient {
	c := &resumingClient{name: name, subs: subs, url: url, got: map[string][]string{}, at: map[string]time.Time{},
		cursors: map[string]string{}, ends: map[string]int{}, stopping: make(chan struct{}), done: make(chan struct{})}
	for id, cursor := range cursors {
		c.cursors[id] = cursor
	}
	go c.run()
	t.Cleanup(c.stop)
	return c
}

func (c *resumingClient) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stopping:
			return
		default:
		}
		why := c.session(c.url())
		c.mu.Lock()
		c.ends[why]++
		c.mu.Unlock()
		if why != "cut" {
			// A refused dial (an instance killed) or a refusal: a little while before the next.
			select {
			case <-c.stopping:
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// session is one connection to url, until it ends; it returns why it ended.
func (c *resumingClient) session(url string) string {
	if c.changes != nil {
		return c.changes.session(c, url)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dialCtx, dialCancel := context.WithTimeout(ctx, 5*time.Second)
	ws, _, err := websocket.Dial(dialCtx, url, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	dialCancel()
	if err != nil {
		return "dial failed"
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	c.mu.Lock()
	select {
	case <-c.stopping:
		c.mu.Unlock()
		return "stopped"
	default:
	}
	c.ws, c.lastURL = ws, url
	c.connections++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.ws = nil
		c.mu.Unlock()
	}()
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"connection_init","payload":{}}`)); err != nil {
		return ended(err)
	}
	for acked := false; !acked; {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return ended(err)
		}
		acked = bytes.Contains(data, []byte(`"connection_ack"`))
	}
	// No event comes before the subscriptions: the cursors are those the last connection left.
	c.mu.Lock()
	var subscribes [][]byte
	for _, id := range c.subs {
		payload := map[string]any{"query": resumeQueries[id]}
		if cursor := c.cursors[id]; cursor != "" {
			payload["extensions"] = map[string]any{"resumeFrom": cursor}
		}
		msg, _ := json.Marshal(map[string]any{"id": id, "type": "subscribe", "payload": payload})
		subscribes = append(subscribes, msg)
	}
	c.mu.Unlock()
	for _, msg := range subscribes {
		if err := ws.Write(ctx, websocket.MessageText, msg); err != nil {
			return ended(err)
		}
	}
	for {
		_, data, err := ws.Read(ctx)
		now := time.Now()
		if err != nil {
			return ended(err)
		}
		if refused := c.handle(ctx, ws, data, now); refused {
			return "refused"
		}
	}
}

// ended names why a connection ended: a close the server sent, or a cut.
func ended(err error) string {
	if status := websocket.CloseStatus(err); status != -1 {
		return fmt.Sprint("closed ", int(status))
	}
	return "cut"
}

// handle keeps one message; refused says a subscription ended (an error, a complete), after
// which the client connects again and resumes every subscription.
func (c *resumingClient) handle(ctx context.Context, ws *websocket.Conn, data []byte, now time.Time) (refused bool) {
	var m struct {
		ID      string
		Type    string
		Payload json.RawMessage
	}
	if json.Unmarshal(data, &m) != nil {
		c.troubled(string(data))
		return false
	}
	switch m.Type {
	case "next":
	case "ping":
		_ = ws.Write(ctx, websocket.MessageText, []byte(`{"type":"pong"}`))
		return false
	case "pong":
		return false
	default:
		c.troubled(string(data))
		return m.Type == "error" || m.Type == "complete"
	}
	var payload struct {
		Data       map[string]json.RawMessage
		Errors     json.RawMessage
		Extensions struct{ Cursor string }
	}
	_ = json.Unmarshal(m.Payload, &payload)
	var post struct {
		ID      string
		Version int
	}
	for _, raw := range payload.Data {
		if m.ID == "d" {
			_ = json.Unmarshal(raw, &post.ID)
		} else {
			_ = json.Unmarshal(raw, &post)
		}
	}
	if post.ID == "" || payload.Errors != nil {
		c.troubled(string(data))
		return false
	}
	entry := "d"
	if m.ID != "d" {
		entry = fmt.Sprintf("%s%d", m.ID, post.Version)
	}
	key := post.ID + " " + entry
	c.mu.Lock()
	defer c.mu.Unlock()
	if payload.Extensions.Cursor == "" {
		c.trouble = append(c.trouble, "an event without extensions.cursor: "+string(data))
	} else {
		c.cursors[m.ID] = payload.Extensions.Cursor
	}
	c.got[post.ID] = append(c.got[post.ID], entry)
	c.order = append(c.order, key)
	if _, ok := c.at[key]; !ok {
		c.at[key] = now
	}
	return false
}

func (c *resumingClient) troubled(msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trouble = append(c.trouble, msg)
}

// stop ends the client and waits for it.
func (c *resumingClient) stop() {
	c.stopOnce.Do(func() {
		close(c.stopping)
		c.mu.Lock()
		if c.ws != nil {
			c.ws.CloseNow()
		}
		if c.changes != nil && c.changes.cancel != nil {
			c.changes.cancel()
		}
		c.mu.Unlock()
		<-c.done
	})
}

// has says whether c received entry of the post id.
func (c *resumingClient) has(id, entry string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.at[id+" "+entry]
	return ok
}

// count is how many events c received.
func (c *resumingClient) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.order)
}

// received is a copy of what c received, by post id.
func (c *resumingClient) received() map[string][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string][]string, len(c.got))
	for id, entries := range c.got {
		out[id] = slices.Clone(entries)
	}
	return out
}

// cursor is the cursor of the last event of the subscription id.
func (c *resumingClient) cursor(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cursors[id]
}

// awaitClients polls cond until it holds or timeout passes, and says whether it held.
func awaitClients(timeout time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// cutProxy is a TCP proxy in front of a process, which cuts each connection (both sides, with
// an RST or a FIN) after a random time, and again the next, while cutting.
type cutProxy struct {
	t        *testing.T
	ln       net.Listener
	target   string
	min, max time.Duration
	cutting  atomic.Bool
	cuts     atomic.Int64
	mu       sync.Mutex
	conns    map[net.Conn]bool
	closed   bool
}

// startCutProxy starts a proxy to the site of baseURL (http://host:port) that cuts each
// connection min to max after it opened once startCutting is called.
func startCutProxy(t *testing.T, baseURL string, min, max time.Duration) *cutProxy {
	t.Helper()
	u, err := url.Parse(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{t: t, ln: ln, target: u.Host, min: min, max: max, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// wsURL is the /graphql WebSocket URL through the proxy.
func (p *cutProxy) wsURL() string { return "ws://" + p.ln.Addr().String() + "/graphql" }

// baseURL is the site's URL through the proxy.
func (p *cutProxy) baseURL() string { return "http://" + p.ln.Addr().String() }

func (p *cutProxy) startCutting() { p.cutting.Store(true) }
func (p *cutProxy) stopCutting()  { p.cutting.Store(false) }

func (p *cutProxy) serve() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.relay(down)
	}
}

// track adds (or, with add false, removes) conns, and says whether the proxy still runs.
func (p *cutProxy) track(add bool, conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		if add && !p.closed {
			p.conns[c] = true
		} else {
			delete(p.conns, c)
		}
	}
	return !p.closed
}

func (p *cutProxy) relay(down net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		down.(*net.TCPConn).SetLinger(0)
		down.Close()
		return
	}
	if !p.track(true, down, up) {
		down.Close()
		up.Close()
		return
	}
	var once sync.Once
	ended := make(chan struct{})
	end := func(reset bool) {
		once.Do(func() {
			if reset {
				down.(*net.TCPConn).SetLinger(0)
				up.(*net.TCPConn).SetLinger(0)
			}
			down.Close()
			up.Close()
			p.track(false, down, up)
			close(ended)
		})
	}
	go func() { // the cut: after min to max, again while not cutting
		for {
			select {
			case <-time.After(p.min + rand.N(p.max-p.min)):
				if p.cutting.Load() {
					p.cuts.Add(1)
					end(rand.N(2) == 0)
					return
				}
			case <-ended:
				return
			}
		}
	}()
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(up, down); end(false) })
	wg.Go(func() { io.Copy(down, up); end(false) })
	wg.Wait()
}

func (p *cutProxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
}

// resumeWriter writes chains of a post's create, two updates and delete, each write through
// REST or GraphQL in turn, and keeps the events of the writes answered as done, and when each
// was answered. tolerant: a write that got no answer, or a 5xx, ends its chain with its outcome
// unknown (decided later from the store by settle); otherwise it fails the test.
type resumeWriter struct {
	t        *testing.T
	client   *http.Client
	tolerant bool

	mu        sync.Mutex
	want      map[string][]string  // by post id, the events of acknowledged writes
	answered  map[string]time.Time // by "<post id> <entry>"
	uncertain map[string]string    // by post id, the entry of its write of unknown outcome
	lost      map[string]bool      // titles of the creates of unknown outcome
	writes    int
	failures  []string
}

func newResumeWriter(t *testing.T, tolerant bool) *resumeWriter {
	// Many writers at once: a pool of connections as large, and a long timeout (a write the
	// client gave up on but the server made would be an event the test does not expect). Its
	// REST answers are held to the OpenAPI description, as those of http.DefaultTransport.
	base := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	var transport http.RoundTripper = base
	if checked, ok := http.DefaultTransport.(openapitest.Checked); ok {
		checked.Base = base
		transport = checked
	}
	client := &http.Client{Timeout: time.Minute, Transport: keyTransport{transport}}
	return &resumeWriter{t: t, client: client, tolerant: tolerant, want: map[string][]string{},
		answered: map[string]time.Time{}, uncertain: map[string]string{}, lost: map[string]bool{}}
}

// chainEntries are the events of a chain's writes, by step.
var chainEntries = [4]string{"c1", "u2", "u3", "d"}

// outcome is what a write's answer says.
type outcome int

const (
	done    outcome = iota // answered as made
	unknown                // no answer, or a 5xx: made or not
	failed                 // answered as not made, or otherwise than it should be
)

// write sends step (0 create, 1 and 2 update, 3 delete) of the post id (titled title) through
// the site at base, over GraphQL or REST; it returns the post's id and what the answer says.
func (w *resumeWriter) write(base string, step int, id, title string, graphQL bool) (string, outcome, string) {
	var method, path, body string
	if graphQL {
		method, path = "POST", "/graphql"
		var query string
		vars := map[string]any{"id": id}
		switch step {
		case 0:
			query, vars = `mutation($input: PostInput!) { createPost(input: $input) { id version } }`, map[string]any{"input": map[string]any{"title": title}}
		case 1, 2:
			query, vars["input"] = `mutation($id: ID!, $input: PostPatch!) { updatePost(id: $id, input: $input) { id version } }`, map[string]any{"title": fmt.Sprintf("%s v%d", title, step+1)}
		case 3:
			query = `mutation($id: ID!) { deletePost(id: $id) }`
		}
		b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
		body = string(b)
	} else {
		switch step {
		case 0:
			method, path, body = "POST", "/posts", fmt.Sprintf(`{"title":%q}`, title)
		case 1, 2:
			method, path, body = "PATCH", "/posts/"+id, fmt.Sprintf(`{"title":"%s v%d"}`, title, step+1)
		case 3:
			method, path = "DELETE", "/posts/"+id
		}
	}
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := w.client.Do(req)
	if err != nil {
		return "", unknown, fmt.Sprintf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	what := fmt.Sprintf("%s %s %s: %d %s", method, path, body, res.StatusCode, raw)
	if res.StatusCode >= 500 {
		return "", unknown, what
	}
	var post struct {
		ID      string
		Version int
	}
	if graphQL {
		var answer struct {
			Data   map[string]json.RawMessage
			Errors []struct{ Extensions struct{ Code string } }
		}
		if json.Unmarshal(raw, &answer) != nil || len(answer.Errors) > 0 || answer.Data == nil {
			if len(answer.Errors) > 0 && answer.Errors[0].Extensions.Code == "UNAVAILABLE" {
				return "", unknown, what
			}
			return "", failed, what
		}
		for _, field := range answer.Data {
			if step == 3 {
				_ = json.Unmarshal(field, &post.ID)
				post.Version = 0
			} else {
				_ = json.Unmarshal(field, &post)
			}
		}
	} else {
		want := map[int]int{0: http.StatusCreated, 1: http.StatusOK, 2: http.StatusOK, 3: http.StatusNoContent}[step]
		if res.StatusCode != want {
			return "", failed, what
		}
		if step < 3 {
			_ = json.Unmarshal(raw, &post)
		} else {
			post.ID = id
		}
	}
	if post.ID == "" || step > 0 && post.ID != id || step < 3 && post.Version != step+1 {
		return "", failed, what
	}
	return post.ID, done, ""
}

// chain writes the chain n, each step through the site pick(n, step) names, the steps over
// GraphQL and REST in turn; it stops at a write not answered as done.
func (w *resumeWriter) chain(n int, pick func(n, step int) string) {
	title := fmt.Sprintf("chain %d", n)
	var id string
	for step := range 4 {
		newID, out, what := w.write(pick(n, step), step, id, title, (n+step)%2 == 1)
		answered := time.Now()
		w.mu.Lock()
		switch {
		case out == done:
			if step == 0 {
				id = newID
			}
			w.want[id] = append(w.want[id], chainEntries[step])
			w.answered[id+" "+chainEntries[step]] = answered
			w.writes++
		case out == unknown && w.tolerant:
			if step == 0 {
				w.lost[title] = true
			} else {
				w.uncertain[id] = chainEntries[step]
			}
			w.failures = append(w.failures, what)
		default:
			w.t.Errorf("a write of chain %d: %s", n, what)
			if step > 0 {
				w.uncertain[id] = chainEntries[step] // the store tells
			}
		}
		w.mu.Unlock()
		if out != done {
			return
		}
	}
}

// writeChains writes the chains of feed from writers goroutines, and returns once feed has
// returned and every chain is written.
func (w *resumeWriter) writeChains(writers int, pick func(n, step int) string, feed func(chan<- int)) {
	chains := make(chan int)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for n := range chains {
				w.chain(n, pick)
			}
		})
	}
	feed(chains)
	close(chains)
	wg.Wait()
}

// chainsUpTo feeds the chains from first to first+n-1.
func chainsUpTo(first, n int) func(chan<- int) {
	return func(chains chan<- int) {
		for i := range n {
			chains <- first + i
		}
	}
}

// chainsEvery feeds the chains 0 to n-1, one every period at most, calling before (if not nil)
// with each chain's number before it.
func chainsEvery(n int, period time.Duration, before func(n int)) func(chan<- int) {
	return func(chains chan<- int) {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := range n {
			if before != nil {
				before(i)
			}
			chains <- i
			<-tick.C
		}
	}
}

// settle decides the writes of unknown outcome from what the store at base holds now (an update
// was made if the post is at its version, a delete if the post is gone, a create if a post has
// its title) and returns the events expected of every post, and the posts of those writes (the
// creates' that the store holds), each with whether it was made.
func (w *resumeWriter) settle(base string) (map[string][]string, map[string]bool) {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	want := map[string][]string{}
	for id, entries := range w.want {
		want[id] = slices.Clone(entries)
	}
	decided := map[string]bool{}
	for id, entry := range w.uncertain {
		res, err := w.client.Get(base + "/posts/" + id)
		if err != nil {
			w.t.Fatalf("reading post %s to decide its write of unknown outcome: %v", id, err)
		}
		var post struct{ Version int }
		_ = json.NewDecoder(res.Body).Decode(&post)
		res.Body.Close()
		made := false
		switch res.StatusCode {
		case http.StatusNotFound:
			made = entry == "d"
		case http.StatusOK:
			made = entry == fmt.Sprintf("u%d", post.Version)
		default:
			w.t.Fatalf("reading post %s: %d", id, res.StatusCode)
		}
		if made {
			want[id] = append(want[id], entry)
		}
		decided[id] = made
	}
	if len(w.lost) > 0 {
		for next := base + "/posts?limit=100"; next != ""; {
			res, err := w.client.Get(next)
			if err != nil {
				w.t.Fatalf("listing the posts: %v", err)
			}
			var page []struct{ ID, Title string }
			_ = json.NewDecoder(res.Body).Decode(&page)
			res.Body.Close()
			for _, p := range page {
				if w.lost[p.Title] {
					want[p.ID], decided[p.ID] = []string{"c1"}, true
				}
			}
			next = ""
			if link := res.Header.Get("Link"); strings.Contains(link, `rel="next"`) {
				next = base + link[strings.Index(link, "<")+1:strings.Index(link, ">")]
			}
		}
	}
	return want, decided
}

// warmUp writes chains through base until every client has every event of one, so that
// each of their subscriptions is running and holds a cursor; it returns the posts it wrote,
// whose events the checks leave out (the clients that subscribed late miss some).
func warmUp(t *testing.T, w *resumeWriter, base string, clients []*resumingClient) map[string]bool {
	t.Helper()
	posts := map[string]bool{}
	for attempt := range 10 {
		id := w.sentinel(base, fmt.Sprintf("warm-up %d", attempt))
		posts[id] = true
		if awaitClients(5*time.Second, func() bool {
			for _, c := range clients {
				for _, sub := range c.subs {
					if !c.has(id, map[string]string{"c": "c1", "u": "u2", "d": "d"}[sub]) {
						return false
					}
				}
			}
			return true
		}) {
			return posts
		}
	}
	t.Fatal("the clients did not all receive a warm-up chain in 10 tries")
	return nil
}

// sentinel writes a post's create, two updates and delete through REST at base, outside the
// writer's expectations, and returns its id.
func (w *resumeWriter) sentinel(base, title string) string {
	w.t.Helper()
	var id string
	for step := range 4 {
		newID, out, what := w.write(base, step, id, title, false)
		if out != done {
			w.t.Fatalf("a write outside the load: %s", what)
		}
		if step == 0 {
			id = newID
		}
	}
	return id
}

// checkResumed waits until every client has every event of want (by post id), then writes a
// sentinel chain through base and waits for it too (every client has then every event logged
// before it, each connection's events coming in the log's order); then it checks that each
// client got every event of want once, each post's in order, and nothing else but the events
// of ignore's posts. decided are the posts of writes of unknown outcome, decided from the store:
// a subscriber with a different outcome is reported, and whether the others agree with it.
func checkResumed(t *testing.T, w *resumeWriter, base string, clients []*resumingClient, want map[string][]string, ignore, decided map[string]bool) {
	t.Helper()
	complete := func(c *resumingClient) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for id, entries := range want {
			if len(c.got[id]) < len(entries) {
				return false
			}
		}
		return true
	}
	waited := time.Now()
	all := awaitClients(60*time.Second, func() bool {
		for _, c := range clients {
			if !complete(c) {
				return false
			}
		}
		return true
	})
	if !all {
		t.Errorf("not every client had every expected event 60s after the last write")
	}
	t.Logf("every client had every expected event %v after the last write", time.Since(waited).Round(time.Millisecond))
	ignore = clone(ignore)
	sentinel := w.sentinel(base, "sentinel")
	ignore[sentinel] = true
	if !awaitClients(20*time.Second, func() bool {
		for _, c := range clients {
			if !c.has(sentinel, "d") {
				return false
			}
		}
		return true
	}) {
		t.Errorf("not every client received the sentinel's delete in 20s")
	}
	total := 0
	for _, entries := range want {
		total += len(entries)
	}
	unanswered := func(id string) string {
		if _, ok := decided[id]; ok {
			return " (its last write got no answer; want decided from the store)"
		}
		return ""
	}
	received := map[string]map[string][]string{}
	for _, c := range clients {
		got := c.received()
		received[c.name] = got
		// ignore's posts (the warm-ups and the sentinel) are none of want's: leaving them out
		// leaves out only their events.
		lost, extra, disordered, examples := compareEvents(got, want, ignore, unanswered)
		if lost+extra+disordered > 0 {
			t.Errorf("%s: %d events lost, %d repeated or not wanted, %d posts out of order, of %d; for instance %v",
				c.name, lost, extra, disordered, total, examples)
		}
		c.mu.Lock()
		if len(c.trouble) > 0 {
			t.Errorf("%s: besides events, %d messages, the first: %s", c.name, len(c.trouble), c.trouble[0])
		}
		c.mu.Unlock()
	}
	// A write of unknown outcome reaches every subscriber or none.
	for id := range decided {
		var had []string
		for _, c := range clients {
			if slices.Equal(received[c.name][id], received[clients[0].name][id]) {
				had = append(had, c.name)
			}
		}
		if len(had) != len(clients) {
			t.Errorf("post %s, whose last write got no answer: %d of %d subscribers got what %s got (%v): a write reached some and not others",
				id, len(had), len(clients), clients[0].name, received[clients[0].name][id])
		}
	}
}

// made counts the writes of unknown outcome that the store holds.
func made(decided map[string]bool) int {
	n := 0
	for _, m := range decided {
		if m {
			n++
		}
	}
	return n
}

func clone(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// connectionStats sums the clients' connections and why they ended, for the log.
func connectionStats(clients []*resumingClient) string {
	connections, ends := 0, map[string]int{}
	for _, c := range clients {
		c.mu.Lock()
		connections += c.connections
		for why, n := range c.ends {
			ends[why] += n
		}
		c.mu.Unlock()
	}
	var whys []string
	for why, n := range ends {
		whys = append(whys, fmt.Sprintf("%s %d", why, n))
	}
	sort.Strings(whys)
	return fmt.Sprintf("%d connections (ended: %s)", connections, strings.Join(whys, ", "))
}
