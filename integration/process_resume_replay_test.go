//go:build integration

// A long replay beside live subscribers: what it costs them.
package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/internal/race"
)

// TestALongReplayBesideLiveSubscribers writes 10,000 posts, then measures how long 10 live
// subscribers take to receive creates written at 100 a second (from each write's answer to
// each receipt), first alone for 3s, then while a client resumes from the cursor before the
// 10,000 and replays them, three times over (one replay takes 300ms to 600ms on 2 cores: 30 to
// 60 writes, too few for a p99): the p99 with the replays is at most twice that without, and
// 5ms (checked without the race detector only). Each replay gets every event after the cursor
// once, in the log's order, as a client subscribed all along did, up to the live ones. Then a
// client resumes as far behind while 500 creates are written at full speed: it gets them all.
//
// The replaying client keeps its messages unread until it is closed: reading 10,000 messages
// in 300ms beside the live clients, as they read theirs, took the test process's 2 cores from
// them (p99 12ms to 15ms, the client's cost, not the server's). Measured on 2 cores, this test
// alone: p99 0.7ms to 0.9ms without a replay, 0.9ms to 1.3ms with them (the bound is then about
// 6.5ms); before the replay rested after each 16 events, 5ms to 28ms. It measures time, so it
// runs alone (TIMED), without the race detector: it does not call ownProcesses.
func TestALongReplayBesideLiveSubscribers(t *testing.T) {
	port := freePort(t)
	p := startProcess(t, processConfig("off", port, "\t\tdata_dir "+t.TempDir()), port)
	url := func() string { return fmt.Sprintf("ws://127.0.0.1:%d/graphql", port) }
	w := newResumeWriter(t, false)
	created := []string{"c"}

	// A client subscribed all along, whose first event's cursor the replays resume from.
	all := startResumingClient(t, "all along", url, created, nil)
	warmUp(t, w, p.url, []*resumingClient{all})
	from, before := all.cursor("c"), all.count() // the events up to the cursor's
	start := time.Now()
	w.creates(t, p.url, "before", 10_000, 8)
	prefill := time.Since(start)

	t.Run("replays of 10,000 events leave live subscribers' p99 latency within twice its own and 5ms, and get every event once, in order", func(t *testing.T) {

		live := make([]*resumingClient, 10)
		for i := range live {
			live[i] = startResumingClient(t, fmt.Sprint("L", i+1), url, created, nil)
		}
		warmUp(t, w, p.url, live)

		// Creates at 100 a second, for at least minimum, then until until() says (30s at most).
		steady := func(minimum time.Duration, until func() bool) (ids []string, answered []time.Time) {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for begin := time.Now(); time.Since(begin) < minimum || !until(); <-tick.C {
				if time.Since(begin) > minimum+20*time.Second {
					t.Errorf("the replay had not caught up after 20s")
					break
				}
				id, out, what := w.write(p.url, 0, "", fmt.Sprint("steady ", len(ids)), false)
				if out != done {
					t.Fatalf("a steady create: %s", what)
				}
				ids, answered = append(ids, id), append(answered, time.Now())
			}
			return ids, answered
		}
		alone, aloneAt := steady(3*time.Second, func() bool { return true })
		var beside []string
		var besideAt []time.Time
		var replays []time.Duration
		for round := range 3 {
			began := time.Now()
			r := startReplayReader(t, url(), from)
			ids, at := steady(0, func() bool { return r.count() >= all.count()-before || r.ended() }) // caught up
			replays = append(replays, time.Since(began))
			beside, besideAt = append(beside, ids...), append(besideAt, at...)
			r.check(t, fmt.Sprint("replay ", round+1), all, before)
			if t.Failed() {
				t.FailNow()
			}
		}

		withoutLat := liveLatencies(t, live, alone, aloneAt)
		withLat := liveLatencies(t, live, beside, besideAt)
		p99 := func(d []time.Duration) time.Duration { return d[len(d)*99/100] }
		t.Logf("10,000 creates in %v (%.0f/s) before; three replays of them, each caught up with the live ones in %v, beside %d writes",
			prefill.Round(time.Millisecond), 10_000/prefill.Seconds(), replays, len(beside))
		t.Logf("live latency, from the write's answer to receipt, without a replay: %s", percentiles(withoutLat))
		t.Logf("live latency, from the write's answer to receipt, with a replay:    %s", percentiles(withLat))
		if !race.Enabled && p99(withLat) > 2*p99(withoutLat)+5*time.Millisecond {
			t.Errorf("p99 with a replay %v; want at most twice that without (%v), and 5ms", p99(withLat), p99(withoutLat))
		}
		for _, c := range append(live, all) {
			c.mu.Lock()
			if len(c.trouble) > 0 {
				t.Errorf("%s got, besides events, %d messages, the first: %s", c.name, len(c.trouble), c.trouble[0])
			}
			c.mu.Unlock()
		}
	})

	// The replay's own live events: past a quarter of the connection's queue of 256 held back
	// while it replays, the replay waits for them to go, and they wait for it.
	t.Run("a client that resumes 10,000 events behind while 500 more are written at full speed gets every one of them once, in order", func(t *testing.T) {
		r := startReplayReader(t, url(), from)
		if !awaitClients(10*time.Second, func() bool { return r.count() > 0 }) { // the replay has begun: its seam is fixed
			t.Fatal("no event replayed in 10s")
		}
		w.creates(t, p.url, "meanwhile", 500, 8)
		if !awaitClients(20*time.Second, func() bool { return r.count() >= all.count()-before || r.ended() }) {
			t.Errorf("the replay had not caught up 20s after the writes")
		}
		r.check(t, "the replay", all, before)
	})
}

// replayReader is a connection subscribed to postCreated with resumeFrom a cursor, which keeps
// its messages as they came, to be read once it is closed.
type replayReader struct {
	ws   *websocket.Conn
	mu   sync.Mutex
	msgs [][]byte
	end  error // why the connection ended
	done chan struct{}
}

func startReplayReader(t *testing.T, url, cursor string) *replayReader {
	t.Helper()
	ctx := context.Background()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	ws.SetReadLimit(1 << 20)
	r := &replayReader{ws: ws, done: make(chan struct{})}
	subscribe, _ := json.Marshal(map[string]any{"id": "c", "type": "subscribe", "payload": map[string]any{
		"query": resumeQueries["c"], "extensions": map[string]any{"resumeFrom": cursor}}})
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"connection_init","payload":{}}`)); err != nil {
		t.Fatal(err)
	}
	if _, ack, err := ws.Read(ctx); err != nil || !json.Valid(ack) {
		t.Fatalf("connection_init: %s %v", ack, err)
	}
	if err := ws.Write(ctx, websocket.MessageText, subscribe); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.done)
		for {
			_, data, err := ws.Read(ctx)
			if err != nil {
				r.mu.Lock()
				r.end = err
				r.mu.Unlock()
				return
			}
			r.mu.Lock()
			r.msgs = append(r.msgs, data)
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *replayReader) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

// ended says whether the connection ended.
func (r *replayReader) ended() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end != nil
}

// check closes r, and checks that it got, as events with a cursor, the creates that the client
// all along got after its first before (up to the cursor r resumed from), in the same order, at
// least up to when it caught up, and that its connection did not end before.
func (r *replayReader) check(t *testing.T, name string, all *resumingClient, before int) {
	t.Helper()
	if r.ended() {
		t.Errorf("%s: the connection ended: %v", name, r.end)
	}
	r.ws.CloseNow()
	<-r.done
	got := r.posts(t)
	all.mu.Lock()
	want := slices.Clone(all.order[before:])
	all.mu.Unlock()
	for i := range want {
		want[i] = want[i][:len(want[i])-len(" c1")]
	}
	if len(got) < len(want)-1 || len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		last := ""
		if len(r.msgs) > 0 {
			last = string(r.msgs[len(r.msgs)-1])
		}
		t.Errorf("%s: got %d events; want the %d after the cursor, as the client subscribed all along got them; the first difference at %d: got %v, want %v; the last message: %.300s",
			name, len(got), len(want), i, got[i:min(i+3, len(got))], want[i:min(i+3, len(want))], last)
	}
}

// posts are the post ids of the events r received, in order; anything else fails the test.
func (r *replayReader) posts(t *testing.T) []string {
	t.Helper()
	var ids []string
	for _, data := range r.msgs {
		var m struct {
			ID, Type string
			Payload  struct {
				Data       struct{ PostCreated struct{ ID string } }
				Extensions struct{ Cursor string }
			}
		}
		if json.Unmarshal(data, &m) != nil || m.Type != "next" || m.ID != "c" || m.Payload.Extensions.Cursor == "" || m.Payload.Data.PostCreated.ID == "" {
			if m.Type != "ping" {
				t.Errorf("the replaying client got, besides events with a cursor: %s", data)
			}
			continue
		}
		ids = append(ids, m.Payload.Data.PostCreated.ID)
	}
	return ids
}

// liveLatencies waits until every client has the creates of ids, and returns, sorted, the time
// from each one's answer (at) to each client's receipt of it, 0 for one received before.
func liveLatencies(t *testing.T, clients []*resumingClient, ids []string, at []time.Time) []time.Duration {
	t.Helper()
	if !awaitClients(20*time.Second, func() bool {
		for _, c := range clients {
			for _, id := range ids {
				if !c.has(id, "c1") {
					return false
				}
			}
		}
		return true
	}) {
		t.Fatalf("not every live client received the %d creates in 20s", len(ids))
	}
	var lat []time.Duration
	for _, c := range clients {
		c.mu.Lock()
		for i, id := range ids {
			lat = append(lat, max(c.at[id+" c1"].Sub(at[i]), 0))
		}
		c.mu.Unlock()
	}
	slices.Sort(lat)
	return lat
}
