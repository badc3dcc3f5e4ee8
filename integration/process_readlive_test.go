//go:build integration

// From a read to live (issue 40), through a real process: clients that read the list of posts,
// then subscribe from the read's cursor, and apply the events to what they read, end with the
// store's list while writes run; the same clients subscribing without the cursor do not.
package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/events"
)

// TestFromAReadToLive runs 20 clients, each in a loop: it reads every post with its version
// (GET /posts, or the GraphQL query posts, in turn), waits as a page that renders would, then
// subscribes to every write (created, updated, deleted on one WebSocket) from the read's cursor,
// and keeps what it read and what the events say, for 0.2 to 0.8 s, before it starts over;
// meanwhile writes run at 50 a second, creates, updates and deletes through REST and GraphQL.
// Once the writes stop, each client's last view is the store's list: 0 differences. The same
// loop subscribing without the cursor ends with differences, which the test counts, so that the
// check is shown to fail where it should.
func TestFromAReadToLive(t *testing.T) {
	differences := map[bool]int{}
	for _, fromCursor := range []bool{true, false} {
		name := map[bool]string{true: "clients that subscribe from their read's cursor end with the store's list", false: "clients that subscribe without it miss writes"}[fromCursor]
		t.Run(name, func(t *testing.T) {
			port := freePort(t)
			p := startProcess(t, processConfig("off", port, "\t\tdata_dir "+t.TempDir()), port)
			wsURL := "ws" + strings.TrimPrefix(p.url, "http") + "/graphql"
			w := &liveWriter{t: t, url: p.url, client: keyed()}
			clients, store, total := readThenLive(t, w, 50, 20, p.url, wsURL, fromCursor, 10*time.Second)
			differences[fromCursor] = total
			t.Logf("%d writes (%d posts at the end); %d reads and subscriptions in all; %d differences from the store over 20 clients", w.writes.Load(), len(store), readsOf(clients), total)
			if fromCursor {
				missNothing(t, clients, store)
			}
		})
	}
	if differences[false] == 0 {
		t.Error("subscribing without the cursor missed nothing: the check cannot tell the two apart")
	}
}

// TestFromAReadToLiveAcrossTwoCaddies runs the loop of TestFromAReadToLive on the relay: two
// instances on one FerretDB, the writes through both in turn, each client reading from A and
// subscribing on B from the read's cursor. On MongoDB a read may show a change that comes again
// (at a version the read gave or below), which a view takes as it is: nothing may be missing.
// Scaled down to 10 clients and 10 writes a second, as the relay on FerretDB writes 4 to 85 a
// second on 2 cores (TestResumingAcrossTwoCaddies).
func TestFromAReadToLiveAcrossTwoCaddies(t *testing.T) {
	ownProcesses(t)
	pair := startRelayPair(t, "")
	wsB := "ws" + strings.TrimPrefix(pair.b.url, "http") + "/graphql"
	w := &liveWriter{t: t, url: pair.a.url, client: keyed(), also: pair.b.url}
	clients, store, total := readThenLive(t, w, 10, 10, pair.a.url, wsB, true, 20*time.Second)
	t.Logf("%d writes (%d posts at the end); %d reads on A and subscriptions on B; %d differences from the store over 10 clients", w.writes.Load(), len(store), readsOf(clients), total)
	missNothing(t, clients, store)
}

// missNothing fails t for each client whose view is not store, the store's list.
func missNothing(t *testing.T, clients []*readLiveClient, store map[string]int) {
	for _, c := range clients {
		if d := c.differences(store); d > 0 {
			t.Errorf("a client (GraphQL read %v, change stream %v) ends with %d differences from the store: %s", c.graphQL, c.changes, d, c.describe(store))
		}
	}
}

// readThenLive runs w for 5 s at perSecond writes, beside n readLiveClients that read from
// readURL and subscribe at wsURL (from the read's cursor, with fromCursor), then waits up to
// settle for their views to match the store's list, and returns the clients, that list and
// their differences from it. The clients' last subscriptions end with the test.
func readThenLive(t *testing.T, w *liveWriter, perSecond, n int, readURL, wsURL string, fromCursor bool, settle time.Duration) ([]*readLiveClient, map[string]int, int) {
	writing := make(chan struct{})
	go func() { w.run(5*time.Second, perSecond); close(writing) }()
	clients := make([]*readLiveClient, n)
	var loops sync.WaitGroup
	for i := range clients {
		clients[i] = &readLiveClient{t: t, url: readURL, wsURL: wsURL, graphQL: i%3 == 1, changes: i%3 == 2, fromCursor: fromCursor, r: rand.New(rand.NewPCG(uint64(i), 40))}
		loops.Go(func() { clients[i].loop(writing) })
	}
	loops.Wait() // each ends once writing is closed
	store, _ := readREST(t, readURL)
	total := 0
	for deadline := time.Now().Add(settle); ; time.Sleep(100 * time.Millisecond) {
		total = 0
		for _, c := range clients {
			total += c.differences(store)
		}
		if total == 0 || time.Now().After(deadline) {
			return clients, store, total
		}
	}
}

// liveWriter writes at a steady rate: creates, and updates and deletes of the posts it created,
// half through REST and half through GraphQL, keeping at most 60 posts.
type liveWriter struct {
	t      *testing.T
	url    string
	also   string // when set, every other write goes through this instance
	client *http.Client
	live   []string
	writes atomic.Int64
}

func (w *liveWriter) run(d time.Duration, perSecond int) {
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	r := rand.New(rand.NewPCG(40, 40))
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		n := w.writes.Add(1)
		graphQL := n%2 == 0
		switch k := r.IntN(10); {
		case len(w.live) < 10 || k < 4 && len(w.live) < 60:
			if id := w.create(graphQL, fmt.Sprint("post ", n)); id != "" {
				w.live = append(w.live, id)
			}
		case k < 8:
			w.update(graphQL, w.live[r.IntN(len(w.live))], fmt.Sprint("changed ", n))
		default:
			i := r.IntN(len(w.live))
			w.remove(graphQL, w.live[i])
			w.live = append(w.live[:i], w.live[i+1:]...)
		}
	}
}

// do sends a write and fails the test (Errorf: the writer has a goroutine of its own) unless it
// answers want.
func (w *liveWriter) do(method, path, body string, want int) []byte {
	url := w.url
	if w.also != "" && w.writes.Load()%4 >= 2 {
		url = w.also
	}
	req, err := http.NewRequest(method, url+path, strings.NewReader(body))
	if err != nil {
		w.t.Error(err)
		return nil
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := w.client.Do(req)
	if err != nil {
		w.t.Errorf("%s %s: %v", method, path, err)
		return nil
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want || bytes.Contains(b, []byte(`"errors"`)) {
		w.t.Errorf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	return b
}

func (w *liveWriter) graphql(query string) []byte {
	body, _ := json.Marshal(map[string]string{"query": query})
	return w.do("POST", "/graphql", string(body), http.StatusOK)
}

func (w *liveWriter) create(graphQL bool, title string) string {
	var out struct {
		ID   string
		Data struct{ CreatePost struct{ ID string } }
	}
	if graphQL {
		_ = json.Unmarshal(w.graphql(fmt.Sprintf(`mutation { createPost(input: {title: %q}) { id } }`, title)), &out)
		return out.Data.CreatePost.ID
	}
	_ = json.Unmarshal(w.do("POST", "/posts", fmt.Sprintf(`{"title": %q}`, title), http.StatusCreated), &out)
	return out.ID
}

func (w *liveWriter) update(graphQL bool, id, title string) {
	if graphQL {
		w.graphql(fmt.Sprintf(`mutation { updatePost(id: %q, input: {title: %q}) { id } }`, id, title))
		return
	}
	w.do("PATCH", "/posts/"+id, fmt.Sprintf(`{"title": %q}`, title), http.StatusOK)
}

func (w *liveWriter) remove(graphQL bool, id string) {
	if graphQL {
		w.graphql(fmt.Sprintf(`mutation { deletePost(id: %q) }`, id))
		return
	}
	w.do("DELETE", "/posts/"+id, "", http.StatusNoContent)
}

// readREST reads every post of the process at url, each id's version, and the read's cursor
// (Posts-Cursor); readGraphQL the same through the query posts (extensions.cursor). They fail t
// with Errorf, as they run in the clients' goroutines, and return nothing then.
func readREST(t *testing.T, url string) (map[string]int, string) {
	res, err := http.Get(url + "/posts?limit=100")
	if err != nil {
		t.Error(err)
		return nil, ""
	}
	defer res.Body.Close()
	var page []struct {
		ID      string
		Version int
	}
	if err := json.NewDecoder(res.Body).Decode(&page); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("GET /posts: %d %v", res.StatusCode, err)
		return nil, ""
	}
	posts := map[string]int{}
	for _, p := range page {
		posts[p.ID] = p.Version
	}
	return posts, res.Header.Get("Posts-Cursor")
}

func readGraphQL(t *testing.T, url string) (map[string]int, string) {
	res, err := http.Post(url+"/graphql", "application/json", strings.NewReader(`{"query": "{ posts(limit: 100) { id version } }"}`))
	if err != nil {
		t.Error(err)
		return nil, ""
	}
	defer res.Body.Close()
	var out struct {
		Data struct {
			Posts []struct {
				ID      string
				Version int
			}
		}
		Extensions struct{ Cursor string }
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("POST /graphql: %d %v", res.StatusCode, err)
		return nil, ""
	}
	posts := map[string]int{}
	for _, p := range out.Data.Posts {
		posts[p.ID] = p.Version
	}
	return posts, out.Extensions.Cursor
}

// readLiveClient reads, then subscribes, in a loop, until writing is closed; its last read and
// subscription stay, for differences.
type readLiveClient struct {
	t                   *testing.T
	url, wsURL          string
	graphQL, fromCursor bool
	changes             bool // it follows REST's change stream rather than subscribing over wsURL's instance's WebSocket
	r                   *rand.Rand

	reads int
	read  map[string]int // the last read: each post's version
	live  *resumingClient
}

func (c *readLiveClient) loop(writing <-chan struct{}) {
	for {
		read, cursor := readREST, ""
		if c.graphQL {
			read = readGraphQL
		}
		c.read, cursor = read(c.t, c.url)
		c.reads++
		if c.read == nil {
			return
		}
		if len(cursor) != events.CursorLength {
			c.t.Errorf("a read gave cursor %q; want one of %d characters", cursor, events.CursorLength)
			return
		}
		time.Sleep(20*time.Millisecond + time.Duration(c.r.IntN(30))*time.Millisecond) // a page renders
		var cursors map[string]string
		if c.fromCursor {
			cursors = map[string]string{"c": cursor, "u": cursor, "d": cursor}
		}
		if c.changes {
			site := "http" + strings.TrimSuffix(strings.TrimPrefix(c.wsURL, "ws"), "/graphql")
			c.live = startChangesClient(c.t, "reader", func() string { return site }, cursors["c"])
		} else {
			c.live = startResumingClient(c.t, "reader", func() string { return c.wsURL }, everyWrite, cursors)
		}
		select {
		case <-writing:
			return // the last: it stays
		case <-time.After(200*time.Millisecond + time.Duration(c.r.IntN(600))*time.Millisecond):
			c.live.stop()
		}
	}
}

// view is what the client shows: what it read, with the events it got applied, each post at
// the highest version it has seen, none that it saw deleted.
func (c *readLiveClient) view() map[string]int {
	v := map[string]int{}
	for id, version := range c.read {
		v[id] = version
	}
	if c.live == nil {
		return v
	}
	c.live.mu.Lock()
	defer c.live.mu.Unlock()
	deleted := map[string]bool{}
	for id, entries := range c.live.got {
		for _, e := range entries {
			if e == "d" {
				deleted[id] = true
				continue
			}
			var version int
			fmt.Sscan(e[1:], &version)
			v[id] = max(v[id], version)
		}
	}
	for id := range deleted {
		delete(v, id)
	}
	return v
}

// differences counts the posts whose version the client's view and the store disagree on, or
// that one of them lacks.
func (c *readLiveClient) differences(store map[string]int) int {
	v, n := c.view(), 0
	for id, version := range store {
		if v[id] != version {
			n++
		}
	}
	for id := range v {
		if _, ok := store[id]; !ok {
			n++
		}
	}
	return n
}

func (c *readLiveClient) describe(store map[string]int) string {
	v := c.view()
	var out []string
	for id, version := range store {
		if v[id] != version {
			out = append(out, fmt.Sprintf("%s: store %d, view %d", id, version, v[id]))
		}
	}
	for id, version := range v {
		if _, ok := store[id]; !ok {
			out = append(out, fmt.Sprintf("%s: view %d, not stored", id, version))
		}
	}
	return strings.Join(out, "; ")
}

func readsOf(clients []*readLiveClient) int {
	n := 0
	for _, c := range clients {
		n += c.reads
	}
	return n
}
