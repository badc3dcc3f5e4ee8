//go:build integration

// REST's change stream (GET /posts as text/event-stream), read as EventSource reads it: a
// resumingClient whose one stream carries every write, which reconnects after a cut with the
// last event's id in Last-Event-ID, its first request's URL kept (with the read's cursor as
// lastEventID, for a client that read first).
package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// changesClient is the change stream's session of a resumingClient.
type changesClient struct {
	http    *http.Client
	first   string             // the lastEventID of its URL, the cursor of a read; "" for none
	lastID  string             // the id of the last event received: Last-Event-ID
	cancel  context.CancelFunc // ends the session under way; guarded by the client's mu
	refused []string           // the refusals' statuses and bodies
}

// startChangesClient starts a client of the change stream of the site url gives, from the
// cursor of a read (first; "" for none), stopped when the test ends.
func startChangesClient(t *testing.T, name string, url func() string, first string) *resumingClient {
	c := &resumingClient{name: name, subs: everyWrite, url: url, got: map[string][]string{}, at: map[string]time.Time{},
		cursors: map[string]string{}, ends: map[string]int{}, stopping: make(chan struct{}), done: make(chan struct{}),
		changes: &changesClient{first: first, http: &http.Client{Transport: &http.Transport{
			DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext, ResponseHeaderTimeout: 10 * time.Second}}}}
	go c.run()
	t.Cleanup(c.stop)
	return c
}

// session is one request of the stream, until it ends: as EventSource, the same URL each time,
// and the last event's id in Last-Event-ID once there is one.
func (s *changesClient) session(c *resumingClient, base string) string {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	target := base + "/posts"
	if s.first != "" {
		target += "?lastEventID=" + url.QueryEscape(s.first)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return "bad request"
	}
	req.Header.Set("Accept", "text/event-stream")
	c.mu.Lock()
	select {
	case <-c.stopping:
		c.mu.Unlock()
		return "stopped"
	default:
	}
	if s.lastID != "" {
		req.Header.Set("Last-Event-ID", s.lastID)
	}
	s.cancel, c.lastURL = cancel, base
	c.mu.Unlock()
	res, err := s.http.Do(req)
	if err != nil {
		return "dial failed"
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<10))
		c.troubled(fmt.Sprintf("%d %s", res.StatusCode, b))
		return "refused"
	}
	c.mu.Lock()
	c.connections++
	c.mu.Unlock()
	lines := bufio.NewReader(res.Body)
	var id, kind, data string
	for {
		line, err := lines.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				return "ended"
			}
			return "cut"
		}
		line = strings.TrimSuffix(line, "\n")
		field, value, _ := strings.Cut(line, ": ")
		switch {
		case line == "": // the end of an event
			if kind != "" {
				c.handleChange(id, kind, data, time.Now())
			}
			id, kind, data = "", "", ""
		case strings.HasPrefix(line, ":"): // a comment: the opening, a keep-alive
		case field == "id":
			id = value
		case field == "event":
			kind = value
		case field == "data":
			data = value
		default:
			c.troubled("a line " + line)
		}
	}
}

// handleChange keeps one event of the stream as handle keeps a subscription's: "c1", "u2", "d".
func (c *resumingClient) handleChange(id, kind, data string, now time.Time) {
	var post struct {
		ID      string
		Version int
	}
	entry := map[string]string{"created": "c", "updated": "u", "deleted": "d"}[kind]
	if json.Unmarshal([]byte(data), &post) != nil || post.ID == "" || entry == "" || id == "" {
		c.troubled(fmt.Sprintf("an event %q of id %q: %s", kind, id, data))
		return
	}
	if entry != "d" {
		entry += fmt.Sprint(post.Version)
	}
	key := post.ID + " " + entry
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changes.lastID = id
	c.got[post.ID] = append(c.got[post.ID], entry)
	c.order = append(c.order, key)
	if _, ok := c.at[key]; !ok {
		c.at[key] = now
	}
}

// TestTheChangeStreamsRefusals asks ./caddy for change streams it must refuse, each with REST's
// error and a status on which EventSource stops: nothing streamed.
func TestTheChangeStreamsRefusalsThroughCaddy(t *testing.T) {
	port := freePort(t)
	p := startProcess(t, processConfig("off", port, "\t\tdata_dir "+t.TempDir()+"\n\t\tmax_resume_events 2"), port)
	w := &liveWriter{t: t, url: p.url, client: keyed()}
	first := w.create(false, "one")
	_, cursor := readREST(t, p.url)
	for i := range 4 {
		w.update(i%2 == 0, first, fmt.Sprint("changed ", i))
	}
	for _, tc := range []struct {
		name, query, lastEventID string
		status                   int
		message                  string
	}{
		{"a lastEventID that is no cursor", "lastEventID=AAAAAAAAAAAAAAAAAAAAAAA", "", 400, "is not a cursor of this server's event log"},
		{"a Last-Event-ID altered by a character", "", altered(cursor), 400, "is not a cursor"},
		{"a cursor more than max_resume_events behind", "lastEventID=" + url.QueryEscape(cursor), "", 410, "max_resume_events"},
		{"a search of punctuation alone", "q=%2A%2A", "", 400, "q"},
		{"a time that is not RFC 3339", "since=yesterday", "", 400, "since must be an RFC 3339 time"},
		{"a repeated userId", "userId=a&userId=b", "", 400, `"userId" is given more than once`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, p.url+"/posts?"+tc.query, nil)
			req.Header.Set("Accept", "text/event-stream")
			if tc.lastEventID != "" {
				req.Header.Set("Last-Event-ID", tc.lastEventID)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var e struct{ Error string }
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.status || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, tc.message) ||
				!strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
				t.Errorf("%d %s %s; want %d and JSON whose error says %q", res.StatusCode, res.Header.Get("Content-Type"), b, tc.status, tc.message)
			}
		})
	}
}

// altered is cursor with its middle character changed.
func altered(cursor string) string {
	b := []byte(cursor)
	if b[len(b)/2] == 'A' {
		b[len(b)/2] = 'B'
	} else {
		b[len(b)/2] = 'A'
	}
	return string(b)
}

// TestTheChangeStreamsDelivery runs 10 clients of REST's change stream beside 10 WebSocket
// subscribers (three subscriptions each) while 8 writers make 2,000 writes: each gets every event
// once and in order (checkResumed), and the test logs how long each kind took to deliver them,
// from the write's answer to the event's arrival, side by side: the figure of the issue that
// brought the stream. A figure, not a bound: it is not asserted.
func TestTheChangeStreamsDelivery(t *testing.T) {
	port := freePort(t)
	p := startProcess(t, processConfig("off", port, "\t\tdata_dir "+t.TempDir()), port)
	wsURL := "ws" + strings.TrimPrefix(p.url, "http") + "/graphql"
	var streams, sockets []*resumingClient
	for i := range 10 {
		streams = append(streams, startChangesClient(t, fmt.Sprint("E", i+1), func() string { return p.url }, ""))
		sockets = append(sockets, startResumingClient(t, fmt.Sprint("S", i+1), func() string { return wsURL }, everyWrite, nil))
	}
	clients := append(slices.Clone(streams), sockets...)
	w := newResumeWriter(t, false)
	ignore := warmUp(t, w, p.url, clients)
	w.writeChains(8, func(int, int) string { return p.url }, chainsUpTo(0, 2000/4))
	want, decided := w.settle(p.url)
	checkResumed(t, w, p.url, clients, want, ignore, decided)
	for _, kind := range []struct {
		name    string
		clients []*resumingClient
	}{{"REST's change stream", streams}, {"a WebSocket (graphql-transport-ws)", sockets}} {
		t.Logf("delivery over %s, from the write's answer: %s", kind.name, percentiles(w.delays(kind.clients)))
	}
}

// delays are, sorted, how long after its write was answered each event of w reached each of
// clients (0 for one that came before the answer).
func (w *resumeWriter) delays(clients []*resumingClient) []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var d []time.Duration
	for _, c := range clients {
		c.mu.Lock()
		for key, at := range c.at {
			if answered, ok := w.answered[key]; ok {
				d = append(d, max(0, at.Sub(answered)))
			}
		}
		c.mu.Unlock()
	}
	slices.Sort(d)
	return d
}
