package caddymodule

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// relayWrites is how many writes TestTwoCaddiesRelayEveryWrite spreads over its two instances;
// the issue asks for 10,000 (-relay.writes 10000), which on the in-process FerretDB (it scans the
// events at each poll) takes minutes, so make test runs fewer.
var relayWrites = flag.Int("relay.writes", 1000, "writes spread over the two instances of the relay's process test")

// relaySubscriber is a graphql-ws connection subscribed to every write, keeping, per post, what
// it received in order: "c1" (created at version 1), "u2", "d".
type relaySubscriber struct {
	ws   *websocket.Conn
	mu   sync.Mutex
	got  map[string][]string
	lags []time.Duration
}

func (p *caddyProcess) subscribeToWrites(t *testing.T) *relaySubscriber {
	t.Helper()
	ctx := context.Background()
	ws, _, err := websocket.Dial(ctx, strings.Replace(p.url, "http", "ws", 1)+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(1 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	msgs := []string{`{"type":"connection_init","payload":{}}`,
		`{"id":"c","type":"subscribe","payload":{"query":"subscription { postCreated { id version } }"}}`,
		`{"id":"u","type":"subscribe","payload":{"query":"subscription { postUpdated { id version } }"}}`,
		`{"id":"d","type":"subscribe","payload":{"query":"subscription { postDeleted }"}}`}
	for _, m := range msgs {
		if err := ws.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ack, err := ws.Read(ctx); err != nil || !strings.Contains(string(ack), "connection_ack") {
		t.Fatalf("connection_init: %s %v", ack, err)
	}
	s := &relaySubscriber{ws: ws, got: map[string][]string{}}
	go func() {
		for {
			_, data, err := ws.Read(ctx)
			if err != nil {
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
				continue
			}
			var post struct {
				ID      string
				Version int
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
			s.mu.Unlock()
		}
	}()
	time.Sleep(100 * time.Millisecond) // the subscribe messages are read after the ack
	return s
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

// check compares what s received with want (per post), waiting up to 10s for it all.
func (s *relaySubscriber) check(t *testing.T, name string, want map[string][]string) {
	t.Helper()
	total := 0
	for _, entries := range want {
		total += len(entries)
	}
	for deadline := time.Now().Add(10 * time.Second); s.count() < total && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // and nothing more comes
	s.mu.Lock()
	defer s.mu.Unlock()
	lost, extra, disordered := 0, 0, 0
	var examples []string
	for id, w := range want {
		g := s.got[id]
		// Each subscription is a feed of its own, so a post's create, updates and delete may
		// interleave on the connection; within one subscription they keep their order.
		for _, kind := range []string{"c", "u", "d"} {
			wk, gk := ofKind(w, kind), ofKind(g, kind)
			switch {
			case slices.Equal(gk, wk):
				continue
			case len(gk) < len(wk):
				lost += len(wk) - len(gk)
			case len(gk) > len(wk):
				extra += len(gk) - len(wk)
			default:
				disordered++
			}
			if len(examples) < 5 {
				examples = append(examples, fmt.Sprintf("%s: got %v, want %v", id, g, w))
			}
		}
	}
	for id, g := range s.got {
		if _, ok := want[id]; !ok {
			extra += len(g)
			examples = append(examples, fmt.Sprintf("%s: got %v, want none", id, g))
		}
	}
	if lost+extra+disordered > 0 {
		t.Errorf("%s: %d events lost, %d duplicated or not wanted, %d posts out of order, of %d; for instance %v",
			name, lost, extra, disordered, total, examples[:min(len(examples), 5)])
	}
}

// ofKind is the entries of one subscription: "c", "u" or "d".
func ofKind(entries []string, kind string) []string {
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e, kind) {
			out = append(out, e)
		}
	}
	return out
}

// relayWriter writes chains of create, updates and delete, each post through both instances.
type relayWriter struct {
	t      *testing.T
	client *http.Client
	mu     sync.Mutex
	want   map[string][]string
	writes int
}

func (w *relayWriter) do(p *caddyProcess, method, path, body string, status int) []byte {
	req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := w.client.Do(req)
	if err != nil {
		w.t.Errorf("%s %s: %v", method, path, err)
		return nil
	}
	defer res.Body.Close()
	var out json.RawMessage
	_ = json.NewDecoder(res.Body).Decode(&out)
	if res.StatusCode != status {
		w.t.Errorf("%s %s: %d %s", method, path, res.StatusCode, out)
		return nil
	}
	return out
}

// chain writes one post: created on first, updated on second then first, deleted on second.
func (w *relayWriter) chain(first, second *caddyProcess, n int) {
	var post struct{ ID string }
	if json.Unmarshal(w.do(first, "POST", "/posts", fmt.Sprintf(`{"title":"chain %d"}`, n), http.StatusCreated), &post) != nil || post.ID == "" {
		return
	}
	w.do(second, "PATCH", "/posts/"+post.ID, `{"title":"second"}`, http.StatusOK)
	w.do(first, "PATCH", "/posts/"+post.ID, `{"title":"third"}`, http.StatusOK)
	w.do(second, "DELETE", "/posts/"+post.ID, "", http.StatusNoContent)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.want[post.ID] = []string{"c1", "u2", "u3", "d"}
	w.writes += 4
}

// run writes chains from goroutines until n writes are done, alternating which instance
// creates; it returns the per-post events expected.
func (w *relayWriter) run(a, b *caddyProcess, n int) map[string][]string {
	w.want = map[string][]string{}
	var wg sync.WaitGroup
	chains := make(chan int)
	for range 8 {
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
	for i := range n / 4 {
		chains <- i
	}
	close(chains)
	wg.Wait()
	return w.want
}

func TestTwoCaddiesRelayEveryWrite(t *testing.T) {
	uri := mongotest.FerretDB(t).URI
	config := func(port int) string {
		return processConfig("off", port, "\t\tmongodb_uri "+uri+"\n\t\tdatabase relay\n\t\ttimeout 10s")
	}
	portA, portB := freePort(t), freePort(t)
	a, b := startProcess(t, config(portA), portA), startProcess(t, config(portB), portB)
	writer := &relayWriter{t: t, client: keyed()}

	t.Run("every write reaches every subscriber of both once, each post's in order", func(t *testing.T) {
		subs := map[string]*relaySubscriber{"A1": a.subscribeToWrites(t), "A2": a.subscribeToWrites(t), "B1": b.subscribeToWrites(t)}
		start := time.Now()
		want := writer.run(a, b, *relayWrites)
		t.Logf("%d writes through two instances in %s", writer.writes, time.Since(start).Round(time.Millisecond))
		for name, s := range subs {
			s.check(t, name, want)
		}
	})

	t.Run("a killed instance: the other keeps delivering, the restarted one's new subscribers get only new events", func(t *testing.T) {
		onA := a.subscribeToWrites(t)
		writer.want = map[string][]string{}
		done := make(chan struct{})
		go func() { // creates through A all along
			defer close(done)
			for i := range 60 {
				var post struct{ ID string }
				if json.Unmarshal(writer.do(a, "POST", "/posts", fmt.Sprintf(`{"title":"during %d"}`, i), http.StatusCreated), &post) == nil && post.ID != "" {
					writer.mu.Lock()
					writer.want[post.ID] = []string{"c1"}
					writer.mu.Unlock()
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		time.Sleep(300 * time.Millisecond)
		b.kill()
		b = startProcess(t, config(portB), portB)
		<-done
		onA.check(t, "A's subscriber across B's kill", writer.want)

		time.Sleep(time.Second) // longer than the look-back: what was written is past
		onB := b.subscribeToWrites(t)
		after := writer.run(a, b, 200)
		onB.check(t, "the restarted B's new subscriber", after)
	})
}
