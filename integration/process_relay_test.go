//go:build integration

// Harness of the relay's multi-process tests (process_relay_*_test.go): two caddy processes on
// one standalone FerretDB process, subscribers on each, and writers that go through both.
package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// relayPair is two caddy processes, A and B, on one FerretDB process, relaying through it.
type relayPair struct {
	db     *ferretProcess
	a, b   *caddyProcess
	config func(port int) string
	portB  int
}

// startRelayPair starts a FerretDB process and two caddy processes on it, whose posts sites
// have the directives of extra besides the database's.
func startRelayPair(t *testing.T, extra string) *relayPair {
	t.Helper()
	db := startFerretProcess(t)
	return startRelayPairOn(t, db, db.URI, extra)
}

// startRelayPairOn starts two caddy processes on db: A reaches it through uriA (a proxy of the
// test's, say), B directly.
func startRelayPairOn(t *testing.T, db *ferretProcess, uriA, extra string) *relayPair {
	t.Helper()
	config := func(uri string) func(port int) string {
		return func(port int) string {
			return processConfig("off", port, "\t\tmongodb_uri "+uri+"\n\t\tdatabase relay\n\t\thealth_path /healthz"+extra)
		}
	}
	portA, portB := freePort(t), freePort(t)
	return &relayPair{db: db, a: startProcess(t, config(uriA)(portA), portA), b: startProcess(t, config(db.URI)(portB), portB), config: config(db.URI), portB: portB}
}

// relaySubscriber is a graphql-ws connection subscribed to every write, keeping, per post, what
// it received in order ("c1": created at version 1, "u2": updated to version 2, "d": deleted),
// when, and the post's updatedAt; and anything else than events that came (errors, a close).
type relaySubscriber struct {
	ws      *websocket.Conn
	mu      sync.Mutex
	got     map[string][]string
	at      map[string]received // by post id and entry: "<id> u2"
	order   []string            // the keys of at, in the order received
	trouble []string
}

// received is when a subscriber got an event, and the post's updatedAt in it (zero for "d").
type received struct{ at, updatedAt time.Time }

func (p *caddyProcess) subscribeToWrites(t *testing.T) *relaySubscriber {
	t.Helper()
	ctx := context.Background()
	ws, _, err := websocket.Dial(ctx, strings.Replace(p.url, "http", "ws", 1)+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(1 << 20)
	s := &relaySubscriber{ws: ws, got: map[string][]string{}, at: map[string]received{}}
	closing := make(chan struct{})
	t.Cleanup(func() {
		close(closing)
		ws.CloseNow()
	})
	msgs := []string{`{"type":"connection_init","payload":{}}`,
		`{"id":"c","type":"subscribe","payload":{"query":"subscription { postCreated { id version updatedAt } }"}}`,
		`{"id":"u","type":"subscribe","payload":{"query":"subscription { postUpdated { id version updatedAt } }"}}`,
		`{"id":"d","type":"subscribe","payload":{"query":"subscription { postDeleted }"}}`}
	for _, m := range msgs {
		if err := ws.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ack, err := ws.Read(ctx); err != nil || !strings.Contains(string(ack), "connection_ack") {
		t.Fatalf("connection_init: %s %v", ack, err)
	}
	go s.read(closing)
	time.Sleep(100 * time.Millisecond) // the subscribe messages are read after the ack
	return s
}

// read keeps what comes until the connection ends; an end before closing is trouble.
func (s *relaySubscriber) read(closing chan struct{}) {
	for {
		_, data, err := s.ws.Read(context.Background())
		now := time.Now()
		if err != nil {
			select {
			case <-closing:
			default:
				s.mu.Lock()
				s.trouble = append(s.trouble, "the connection ended: "+err.Error())
				s.mu.Unlock()
			}
			return
		}
		var m struct {
			ID      string
			Type    string
			Payload struct {
				Data map[string]json.RawMessage
			}
		}
		if json.Unmarshal(data, &m) != nil || m.Type != "next" {
			if m.Type != "ping" && m.Type != "pong" {
				s.mu.Lock()
				s.trouble = append(s.trouble, string(data))
				s.mu.Unlock()
			}
			continue
		}
		var post struct {
			ID        string
			Version   int
			UpdatedAt time.Time
		}
		for _, raw := range m.Payload.Data {
			if m.ID == "d" {
				_ = json.Unmarshal(raw, &post.ID)
			} else {
				_ = json.Unmarshal(raw, &post)
			}
		}
		entry := "d"
		if m.ID != "d" {
			entry = fmt.Sprintf("%s%d", m.ID, post.Version)
		}
		s.mu.Lock()
		s.got[post.ID] = append(s.got[post.ID], entry)
		s.at[post.ID+" "+entry] = received{now, post.UpdatedAt}
		s.order = append(s.order, post.ID+" "+entry)
		s.mu.Unlock()
	}
}

func (s *relaySubscriber) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, entries := range s.got {
		n += len(entries)
	}
	return n
}

// has says whether s received entry of the post id.
func (s *relaySubscriber) has(id, entry string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.at[id+" "+entry]
	return ok
}

// check compares what s received with want (per post), waiting up to 20s for it all; the posts
// of ignore (whose writes' outcome is unknown) are left out.
func (s *relaySubscriber) check(t *testing.T, name string, want map[string][]string, ignore map[string]bool) {
	t.Helper()
	total := 0
	for _, entries := range want {
		total += len(entries)
	}
	for deadline := time.Now().Add(20 * time.Second); s.count() < total && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // and nothing more comes
	s.mu.Lock()
	defer s.mu.Unlock()
	// The connection's three subscriptions are three feeds, yet one order: a post's create,
	// updates and delete come in the order written.
	lost, extra, disordered, examples := compareEvents(s.got, want, ignore, nil)
	if lost+extra+disordered > 0 {
		t.Errorf("%s: %d events lost, %d duplicated or not wanted, %d posts out of order, of %d; for instance %v",
			name, lost, extra, disordered, total, examples)
	}
	if len(s.trouble) > 0 {
		t.Errorf("%s: besides events, %d messages or a close, the first: %s", name, len(s.trouble), s.trouble[0])
	}
}

// compareEvents compares the events a subscriber got with want, both by post id, each post's
// in the order written: it counts the events lost, the events repeated or of a post not wanted,
// and the posts whose events came out of order, and gives up to 5 of the posts that differ as
// examples. The posts of ignore are left out. note, when not nil, adds its text to the example
// of a wanted post (say, why that post's events are what they are).
func compareEvents(got, want map[string][]string, ignore map[string]bool, note func(id string) string) (lost, extra, disordered int, examples []string) {
	for id, w := range want {
		if ignore[id] {
			continue
		}
		g := got[id]
		switch {
		case slices.Equal(g, w):
			continue
		case len(g) < len(w):
			lost += len(w) - len(g)
		case len(g) > len(w):
			extra += len(g) - len(w)
		default:
			disordered++
		}
		if len(examples) < 5 {
			more := ""
			if note != nil {
				more = note(id)
			}
			examples = append(examples, fmt.Sprintf("%s: got %v, want %v%s", id, g, w, more))
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok && !ignore[id] {
			extra += len(g)
			if len(examples) < 5 {
				examples = append(examples, fmt.Sprintf("%s: got %v, want none", id, g))
			}
		}
	}
	return lost, extra, disordered, examples
}

// relayWriter writes chains of create, updates and delete, each post through both instances,
// and keeps the events that the writes it had acknowledged make, with where each was written.
type relayWriter struct {
	t      *testing.T
	client *http.Client
	mu     sync.Mutex
	want   map[string][]string
	by     map[string]*caddyProcess // by post id and entry: "<id> u2"
	writes int
	on503  func(step int, id string, s chainStep, body []byte)
}

// newRelayWriter is a writer whose client waits long: a write that the client gave up on but
// the server made would be an event the test cannot expect.
func newRelayWriter(t *testing.T) *relayWriter {
	client := keyed()
	client.Timeout = time.Minute
	return &relayWriter{t: t, client: client, want: map[string][]string{}, by: map[string]*caddyProcess{}}
}

// write sends one write and returns its status (0 when no answer came), body and Retry-After.
func (w *relayWriter) write(p *caddyProcess, method, path, body string) (int, []byte, string) {
	req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := w.client.Do(req)
	if err != nil {
		w.t.Errorf("%s %s: %v", method, path, err)
		return 0, nil, ""
	}
	defer res.Body.Close()
	var out json.RawMessage
	_ = json.NewDecoder(res.Body).Decode(&out)
	if res.StatusCode >= 500 && res.StatusCode != http.StatusServiceUnavailable {
		w.t.Errorf("%s %s answered %d %s: a fault, never what a store outage gives", method, path, res.StatusCode, out)
	}
	return res.StatusCode, out, res.Header.Get("Retry-After")
}

// createdID is the id of the post a create answered with, or "".
func createdID(body []byte) string {
	var post struct{ ID string }
	_ = json.Unmarshal(body, &post)
	return post.ID
}

// chainStep is one write of a chain: where, what, and the entry its event makes.
type chainStep struct {
	on           *caddyProcess
	method, path string
	body         string
	status       int
	entry        string
}

// chainSteps are the writes of one post: created on first, updated on second then first,
// deleted on second; id is "" for the create.
func chainSteps(first, second *caddyProcess, n int, id string) []chainStep {
	return []chainStep{
		{first, "POST", "/posts", fmt.Sprintf(`{"title":"chain %d"}`, n), http.StatusCreated, "c1"},
		{second, "PATCH", "/posts/" + id, `{"title":"second"}`, http.StatusOK, "u2"},
		{first, "PATCH", "/posts/" + id, `{"title":"third"}`, http.StatusOK, "u3"},
		{second, "DELETE", "/posts/" + id, "", http.StatusNoContent, "d"},
	}
}

// acknowledged keeps the event of a write answered as it should be.
func (w *relayWriter) acknowledged(id string, s chainStep) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.want[id] = append(w.want[id], s.entry)
	w.by[id+" "+s.entry] = s.on
	w.writes++
}

// chain writes one post's chain, stopping at a write not answered as it should be: a 503 is
// told to on503 if set (the step, the post's id, the answer), else fails the test, as anything
// else does.
func (w *relayWriter) chain(first, second *caddyProcess, n int) {
	var id string
	for i := range 4 {
		s := chainSteps(first, second, n, id)[i]
		status, body, retryAfter := w.write(s.on, s.method, s.path, s.body)
		if status == http.StatusServiceUnavailable && w.on503 != nil {
			if retryAfter != "1" {
				w.t.Errorf("%s %s: 503 with Retry-After %q; want 1", s.method, s.path, retryAfter)
			}
			w.on503(i, id, s, body)
			return
		}
		if status != s.status {
			w.t.Errorf("%s %s: %d %s", s.method, s.path, status, body)
			return
		}
		if i == 0 {
			if id = createdID(body); id == "" {
				w.t.Errorf("a create answered %s", body)
				return
			}
		}
		w.acknowledged(id, s)
	}
}

// run writes chains from writers goroutines until n writes are done, alternating which
// instance creates; it returns the per-post events expected, of these chains and earlier ones.
func (w *relayWriter) run(a, b *caddyProcess, n, writers int) map[string][]string {
	w.writeChains(a, b, writers, func(chains chan<- int) {
		for i := range n / 4 {
			chains <- i
		}
	})
	return w.want
}

// writeChains writes the chains that feed sends from writers goroutines, the even ones created
// through a and the odd ones through b, and returns once feed has returned and every chain is
// written.
func (w *relayWriter) writeChains(a, b *caddyProcess, writers int, feed func(chan<- int)) {
	var wg sync.WaitGroup
	chains := make(chan int)
	for range writers {
		wg.Go(func() {
			for i := range chains {
				if i%2 == 0 {
					w.chain(a, b, i)
				} else {
					w.chain(b, a, i)
				}
			}
		})
	}
	feed(chains)
	close(chains)
	wg.Wait()
}

// relayLags are the times from a post's updatedAt to a subscriber's receipt of its create or
// update, of the events that subscribers on processes other than the writer's received.
func relayLags(w *relayWriter, subs map[*relaySubscriber]*caddyProcess) []time.Duration {
	var lags []time.Duration
	for s, on := range subs {
		s.mu.Lock()
		for key, r := range s.at {
			if by := w.by[key]; by != nil && by != on && !r.updatedAt.IsZero() {
				lags = append(lags, r.at.Sub(r.updatedAt))
			}
		}
		s.mu.Unlock()
	}
	slices.Sort(lags)
	return lags
}

// percentiles formats the p50, p99 and max of sorted durations.
func percentiles(d []time.Duration) string {
	if len(d) == 0 {
		return "none"
	}
	return fmt.Sprintf("p50 %v, p99 %v, max %v (of %d)", d[len(d)/2], d[len(d)*99/100], d[len(d)-1], len(d))
}

// relayEveryWrite spreads writes over the two instances of a relay pair from writers goroutines,
// with conns subscribers (connections of three subscriptions each) on each instance: each gets
// every event once, each post's in the order written. On a machine loaded enough that FerretDB
// answers nothing for a second while calls wait (beside another make test), the breaker opens
// and answers some writes 503: those are checked as the fault tests check them, reaching every
// subscriber or none.
func relayEveryWrite(t *testing.T, writes, writers, conns int, extra string) {
	pair := startRelayPair(t, extra)
	a, b := pair.a, pair.b
	subs := map[*relaySubscriber]*caddyProcess{}
	var names []string
	byName := map[string]*relaySubscriber{}
	for i := range 2 * conns {
		on, name := a, fmt.Sprint("A", i+1)
		if i >= conns {
			on, name = b, fmt.Sprint("B", i-conns+1)
		}
		s := on.subscribeToWrites(t)
		subs[s], byName[name] = on, s
		names = append(names, name)
	}
	writer := newTolerantWriter(t)
	start := time.Now()
	want := writer.relayWriter.run(a, b, writes, writers)
	took := time.Since(start)
	if writer.failures == 0 {
		for _, name := range names {
			byName[name].check(t, name, want, nil)
		}
	} else {
		writer.checkNeverHalf(t, byName)
	}
	t.Logf("%d writes through two instances from %d writers in %v (%.0f/s); relay lag, from updatedAt to a subscriber of the other instance: %s",
		writer.writes, writers, took.Round(time.Millisecond), float64(writer.writes)/took.Seconds(), percentiles(relayLags(writer.relayWriter, subs)))
}
