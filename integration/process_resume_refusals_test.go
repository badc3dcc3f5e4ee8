//go:build integration

// Resuming from cursors the log no longer keeps, or never made: the refusals of issue 25, each
// an error message for its operation, on a connection that stays open.
package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestResumeRefusals writes 1,501 posts on an embedded store that keeps 1,000 events
// (events_max 1000), restarts its process on the same data_dir (the expiry runs at the start),
// and resumes from cursors: the first event's is expired, a late one resumes with exactly what
// came after it; malformed, altered and another store's cursors are refused, and so is one more
// than max_resume_events behind; each refusal leaves the connection open, where a subscription
// without resumeFrom gets the next write. The legacy graphql-ws protocol carries cursors too.
func TestResumeRefusals(t *testing.T) {
	ownProcesses(t)
	dir := t.TempDir()
	config := func(port int) string {
		return processConfig("off", port, "\t\tdata_dir "+dir+"\n\t\tevents_max 1000\n\t\thealth_path /healthz")
	}
	port := freePort(t)
	p := startProcess(t, config(port), port)
	w := newResumeWriter(t, false)

	// A cursor of the log's first events, then 1,500 creates, each event's cursor kept.
	conn := dialResume(t, p.url, "graphql-transport-ws")
	conn.subscribe("c", resumeQueries["c"], nil)
	_, firstCursor := conn.awaitActive(w, p.url, "c")
	ids := w.creates(t, p.url, "filler", 1500, 8)
	var order, cursors []string // in the order of the log, as the subscription gets them
	for range ids {
		id, cursor := conn.anyEvent("c")
		order, cursors = append(order, id), append(cursors, cursor)
	}
	if !slices.Equal(slices.Sorted(slices.Values(order)), slices.Sorted(slices.Values(ids))) {
		t.Fatalf("the subscription got other events than the 1,500 creates")
	}
	conn.quiet()
	kept, missed := cursors[1399], order[1400:] // the 1,400th of the 1,500, and those after it
	p.stop()
	port = freePort(t)
	p = startProcess(t, config(port), port)
	// The expiry at the start runs beside the first requests: wait for it (a resume before it
	// may replay the events it is deleting: TestAResumeBesideTheExpiry).
	awaitExpiry(t, p.url, 1000)

	var afterRestart []string // the posts written since, in order
	t.Run("a cursor whose next events the log no longer keeps is refused with CURSOR_EXPIRED after a restart, and the connection stays", func(t *testing.T) {
		c := dialResume(t, p.url, "graphql-transport-ws")
		c.subscribe("old", resumeQueries["c"], firstCursor)
		c.refused("old", "CURSOR_EXPIRED")
		c.quiet()
		c.subscribe("fresh", resumeQueries["c"], nil)
		probes, _ := c.awaitActive(w, p.url, "fresh")
		afterRestart = append(afterRestart, probes...)
		next := w.creates(t, p.url, "after the expiry", 1, 1)[0]
		afterRestart = append(afterRestart, next)
		c.event("fresh", next)
		c.quiet()
	})

	t.Run("a cursor from before the restart that the log still keeps resumes with exactly the events after it, then live", func(t *testing.T) {
		c := dialResume(t, p.url, "graphql-transport-ws")
		c.subscribe("kept", resumeQueries["c"], kept)
		var got []string
		for range missed {
			id, _ := c.anyEvent("kept")
			got = append(got, id)
		}
		if !slices.Equal(got, missed) {
			t.Errorf("resumed after the 1,400th of the 1,500 events: got %d events %v…, want the %d after it %v…", len(got), got[:min(3, len(got))], len(missed), missed[:3])
		}
		// Then the writes of the last subtest, after the restart, and a new one, live.
		for _, id := range afterRestart {
			c.event("kept", id)
		}
		c.quiet()
		c.event("kept", w.creates(t, p.url, "live", 1, 1)[0])
		c.quiet()
	})

	other := t.TempDir()
	otherPort := freePort(t)
	q := startProcess(t, processConfig("off", otherPort, "\t\tdata_dir "+other+"\n\t\tmax_resume_events 10"), otherPort)
	qc := dialResume(t, q.url, "graphql-transport-ws")
	qc.subscribe("c", resumeQueries["c"], nil)
	qc.awaitActive(w, q.url, "c")
	otherCursor := qc.event("c", w.creates(t, q.url, "another store", 1, 1)[0])

	t.Run("malformed, altered and another store's cursors are refused with BAD_USER_INPUT, and the connection stays", func(t *testing.T) {
		c := dialResume(t, p.url, "graphql-transport-ws")
		bad := map[string]any{
			"a word": "cursor", "an empty string": "", "a number": 42, "an object": map[string]any{"cursor": kept},
			"a list": []string{kept}, "true": true, "a 1,000-character string": strings.Repeat("A", 1000),
			"random letters of a cursor's length": randomString(len(kept)), "a cursor with a character more": kept + "A",
			"a cursor with a character less": kept[1:], "non-ASCII": "é" + kept[2:], "another store's cursor": otherCursor,
		}
		for i := range len(kept) {
			b := []byte(kept)
			b[i] = cursorLetters[(strings.IndexByte(cursorLetters, b[i])+1+rand.N(62))%64]
			bad[fmt.Sprintf("the cursor with its character %d changed", i+1)] = string(b)
		}
		n := 0
		for what, value := range bad {
			n++
			id := fmt.Sprint("bad", n)
			c.subscribe(id, resumeQueries["c"], value)
			if code := c.refusal(id); code != "BAD_USER_INPUT" {
				t.Errorf("resumeFrom %s (%v): refused with %q; want BAD_USER_INPUT", what, value, code)
			}
		}
		c.quiet()
		c.subscribe("fresh", resumeQueries["c"], nil)
		c.awaitActive(w, p.url, "fresh")
		c.event("fresh", w.creates(t, p.url, "after the refusals", 1, 1)[0])
		c.quiet()
		if out := p.out.String(); strings.Contains(out, "panic") {
			i := strings.Index(out, "panic")
			t.Errorf("the process logged a panic:\n%s", out[max(0, i-200):min(len(out), i+2000)])
		}
	})

	t.Run("a cursor more than max_resume_events behind is refused with RESUME_TOO_LONG, and the connection stays", func(t *testing.T) {
		more := w.creates(t, q.url, "behind", 20, 1)
		var cursors []string
		for _, id := range more {
			cursors = append(cursors, qc.event("c", id))
		}
		c := dialResume(t, q.url, "graphql-transport-ws")
		c.subscribe("far", resumeQueries["c"], otherCursor) // 20 behind, 10 allowed
		c.refused("far", "RESUME_TOO_LONG")
		c.quiet()
		c.subscribe("near", resumeQueries["c"], cursors[14]) // 5 behind
		for _, id := range more[15:] {
			c.event("near", id)
		}
		c.quiet()
		c.send(map[string]any{"id": "near", "type": "complete"}) // so that the next writes are fresh's alone
		c.quiet()
		c.subscribe("fresh", resumeQueries["c"], nil)
		c.awaitActive(w, q.url, "fresh")
		c.event("fresh", w.creates(t, q.url, "after", 1, 1)[0])
		c.quiet()
	})

	t.Run("the legacy graphql-ws protocol carries each event's cursor and resumes from it", func(t *testing.T) {
		c := dialResume(t, p.url, "graphql-ws")
		c.subscribe("c", resumeQueries["c"], nil)
		c.awaitActive(w, p.url, "c")
		written := w.creates(t, p.url, "legacy", 3, 1)
		cursor := c.event("c", written[0])
		c.event("c", written[1])
		c.event("c", written[2])
		r := dialResume(t, p.url, "graphql-ws")
		r.subscribe("r", resumeQueries["c"], cursor)
		r.event("r", written[1])
		r.event("r", written[2])
		r.subscribe("bad", resumeQueries["c"], cursor[1:])
		if code := r.refusal("bad"); code != "BAD_USER_INPUT" {
			t.Errorf("a bad cursor over graphql-ws: refused with %q; want BAD_USER_INPUT", code)
		}
		r.quiet()
		r.event("r", w.creates(t, p.url, "legacy live", 1, 1)[0])
		r.quiet()
	})
}

// awaitExpiry waits until the health of the process at base says its event log holds keep
// events at most: its expiry has run.
func awaitExpiry(t *testing.T, base string, keep int64) {
	t.Helper()
	var events int64
	if !awaitClients(10*time.Second, func() bool {
		var read bool
		events, _, read = logHealth(t, base)
		return read && events <= keep
	}) {
		t.Fatalf("the event log holds %d events after 10s; want %d at most", events, keep)
	}
}

// logHealth is what the health of the process at base says of its event log: how many events
// it held at the start or its last expiry, and the last position handed to its subscribers;
// read is false while the log is not read yet (the health has no event_log then).
func logHealth(t *testing.T, base string) (events, handed int64, read bool) {
	t.Helper()
	var health struct {
		EventLog *struct {
			Events         int64 `json:"events"`
			HandedPosition int64 `json:"handed_position"`
		} `json:"event_log"`
	}
	res, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&health); err != nil {
		t.Fatal(err)
	}
	if health.EventLog == nil {
		return 0, 0, false
	}
	return health.EventLog.Events, health.EventLog.HandedPosition, true
}

// cursorLetters are those of base64url, a cursor's alphabet.
const cursorLetters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func randomString(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = cursorLetters[rand.N(len(cursorLetters))]
	}
	return string(b)
}

// creates creates n posts through REST at base, titled prefix and a number, from writers
// goroutines, and returns their ids in the order answered.
func (w *resumeWriter) creates(t *testing.T, base, prefix string, n, writers int) []string {
	t.Helper()
	var mu sync.Mutex
	var ids []string
	next := make(chan int)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for i := range next {
				id, out, what := w.write(base, 0, "", fmt.Sprintf("%s %d", prefix, i), false)
				if out != done {
					t.Errorf("a create: %s", what)
					continue
				}
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(ids) != n {
		t.Fatalf("%d creates of %d answered 201", len(ids), n)
	}
	return ids
}

// resumeConn is a WebSocket connection to /graphql, acknowledged, in either subprotocol, whose
// messages the test reads one at a time.
type resumeConn struct {
	t        *testing.T
	ws       *websocket.Conn
	legacy   bool
	messages chan resumeMessage // closed when the connection ends
	end      error              // why, once messages is closed
	queries  int                // of quiet, over graphql-ws
}

// dialResume connects to the process at base with subprotocol, and waits for its ack.
func dialResume(t *testing.T, base, subprotocol string) *resumeConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/graphql", &websocket.DialOptions{Subprotocols: []string{subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	ws.SetReadLimit(1 << 20)
	c := &resumeConn{t: t, ws: ws, legacy: subprotocol == "graphql-ws", messages: make(chan resumeMessage, 1<<16)}
	go func() { // a read with a deadline would close the connection: the deadlines are tryRead's
		defer close(c.messages)
		for {
			_, data, err := ws.Read(context.Background())
			if err != nil {
				c.end = err
				return
			}
			var m resumeMessage
			if err := json.Unmarshal(data, &m); err != nil {
				m.Type = "not JSON"
			}
			m.raw = string(data)
			c.messages <- m
		}
	}()
	c.send(map[string]any{"type": "connection_init", "payload": map[string]any{}})
	if m := c.read(); m.Type != "connection_ack" {
		t.Fatalf("connection_init answered %s", m.raw)
	}
	return c
}

func (c *resumeConn) send(msg any) {
	c.t.Helper()
	b, _ := json.Marshal(msg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("sending %s: %v", b, err)
	}
}

// resumeMessage is a message read.
type resumeMessage struct {
	ID      string
	Type    string
	Payload json.RawMessage
	raw     string
}

// tryRead returns the next message but keep-alives, or false if none comes within d.
func (c *resumeConn) tryRead(d time.Duration) (resumeMessage, bool) {
	c.t.Helper()
	timeout := time.After(d)
	for {
		select {
		case m, open := <-c.messages:
			if !open {
				c.t.Fatalf("reading the next message: the connection ended: %v", c.end)
			}
			switch m.Type {
			case "ka":
				continue
			case "ping":
				c.send(map[string]any{"type": "pong"})
				continue
			}
			return m, true
		case <-timeout:
			return resumeMessage{}, false
		}
	}
}

// read returns the next message but keep-alives, within 10s.
func (c *resumeConn) read() resumeMessage {
	c.t.Helper()
	m, ok := c.tryRead(10 * time.Second)
	if !ok {
		c.t.Fatal("no message in 10s")
	}
	return m
}

// awaitActive writes posts through base until the subscription id, just subscribed, gets the
// event of one: it runs then (a subscription without resumeFrom runs once its feed has
// subscribed to the events, after its subscribe is answered, if at all). Events of other
// operations are passed over. It returns the posts it wrote, in order (the log's), and the
// cursor of the last, whose event it got.
func (c *resumeConn) awaitActive(w *resumeWriter, base, id string) ([]string, string) {
	c.t.Helper()
	var probes []string
	for range 20 {
		probes = append(probes, w.creates(c.t, base, "probe", 1, 1)[0])
		for {
			m, ok := c.tryRead(time.Second)
			if !ok {
				break // another probe
			}
			post, cursor := c.eventOf(m)
			if m.ID != id {
				continue
			}
			i := slices.Index(probes, post)
			if i < 0 {
				c.t.Fatalf("waiting for the event of a probe: got %s", m.raw)
			}
			for _, later := range probes[i+1:] { // these come too, after it
				for m.ID != id || post != later {
					m = c.read()
					post, cursor = c.eventOf(m)
				}
			}
			return probes, cursor
		}
	}
	c.t.Fatalf("%s got no event of 20 posts written after it was subscribed, a second apart", id)
	return nil, ""
}

// eventOf is the post and cursor of m, an event; anything else fails the test.
func (c *resumeConn) eventOf(m resumeMessage) (string, string) {
	c.t.Helper()
	var payload struct {
		Data       map[string]struct{ ID string }
		Extensions struct{ Cursor string }
	}
	_ = json.Unmarshal(m.Payload, &payload)
	if next := map[bool]string{false: "next", true: "data"}[c.legacy]; m.Type != next || len(payload.Data) != 1 {
		c.t.Fatalf("want an event; got %s", m.raw)
	}
	if payload.Extensions.Cursor == "" {
		c.t.Errorf("an event without extensions.cursor: %s", m.raw)
	}
	for _, post := range payload.Data {
		return post.ID, payload.Extensions.Cursor
	}
	return "", ""
}

// subscribe starts the operation id with query, and extensions.resumeFrom unless it is nil.
func (c *resumeConn) subscribe(id, query string, resumeFrom any) {
	c.t.Helper()
	payload := map[string]any{"query": query}
	if resumeFrom != nil {
		payload["extensions"] = map[string]any{"resumeFrom": resumeFrom}
	}
	kind := "subscribe"
	if c.legacy {
		kind = "start"
	}
	c.send(map[string]any{"id": id, "type": kind, "payload": payload})
}

// anyEvent reads the next message, which must be an event of the operation id, and returns the
// post's id and the event's cursor.
func (c *resumeConn) anyEvent(id string) (string, string) {
	c.t.Helper()
	m := c.read()
	post, cursor := c.eventOf(m)
	if m.ID != id {
		c.t.Fatalf("want an event of %s; got %s", id, m.raw)
	}
	return post, cursor
}

// event reads the next message, which must be the event of the operation id about post, and
// returns its cursor.
func (c *resumeConn) event(id, post string) string {
	c.t.Helper()
	got, cursor := c.anyEvent(id)
	if got != post {
		c.t.Fatalf("want the event of %s about post %s; got post %s", id, post, got)
	}
	return cursor
}

// refusal reads the next message, which must be the error of the operation id, and returns its
// first error's code.
func (c *resumeConn) refusal(id string) string {
	c.t.Helper()
	m := c.read()
	var errs []struct {
		Message    string
		Extensions struct{ Code string }
	}
	if m.Type != "error" || m.ID != id || json.Unmarshal(m.Payload, &errs) != nil || len(errs) == 0 {
		c.t.Errorf("want an error message for %s, its payload an array of errors; got %s", id, m.raw)
		return ""
	}
	return errs[0].Extensions.Code
}

// refused reads the error of the operation id, which must have code.
func (c *resumeConn) refused(id, code string) {
	c.t.Helper()
	if got := c.refusal(id); got != code {
		c.t.Errorf("%s refused with %q; want %s", id, got, code)
	}
}

// quiet checks the connection is open, has sent nothing more, and has read every message sent
// before: a ping is answered by the next message, a pong (graphql-transport-ws); over graphql-ws,
// which has no ping, a query's data and complete.
func (c *resumeConn) quiet() {
	c.t.Helper()
	if c.legacy {
		c.queries++
		id := fmt.Sprint("quiet", c.queries)
		c.send(map[string]any{"id": id, "type": "start", "payload": map[string]any{"query": "{ __typename }"}})
		if m := c.read(); m.Type != "data" || m.ID != id {
			c.t.Fatalf("a query: want its data, and nothing before it; got %s", m.raw)
		}
		if m := c.read(); m.Type != "complete" || m.ID != id {
			c.t.Fatalf("a query: want its complete after its data; got %s", m.raw)
		}
		return
	}
	c.send(map[string]any{"type": "ping"})
	if m := c.read(); m.Type != "pong" {
		c.t.Fatalf("a ping: want a pong, and nothing before it; got %s", m.raw)
	}
}

// TestAResumeBesideTheExpiry resumes, right after each restart of a process that keeps 1,000
// events, from the cursor of the oldest event the log kept before it: the expiry at the start
// deletes that event and the next ones, beside the first requests. The resume either comes
// after it (CURSOR_EXPIRED), or before, and then replays every event after the cursor, or those
// it read before the expiry cut in and then CURSOR_EXPIRED: never a gap without a refusal. A race: up to 8 restarts, 10
// resumes at once after each.
func TestAResumeBesideTheExpiry(t *testing.T) {
	ownProcesses(t)
	t.Run("a resume that the expiry at the start overtakes is refused or replays every event, and never skips some", func(t *testing.T) {
		dir := t.TempDir()
		config := func(port int) string {
			return processConfig("off", port, "\t\tdata_dir "+dir+"\n\t\tevents_max 1000\n\t\thealth_path /healthz")
		}
		w := newResumeWriter(t, false)
		port := freePort(t)
		p := startProcess(t, config(port), port)
		// The posts of the log's events and their cursors, from position first on, as a
		// subscription resumed across the restarts gets them.
		lc := dialResume(t, p.url, "graphql-transport-ws")
		lc.subscribe("c", resumeQueries["c"], nil)
		log, cursor := lc.awaitActive(w, p.url, "c")
		cursors := []string{cursor}
		log = log[len(log)-1:]
		_, first, _ := logHealth(t, p.url) // the last probe's, handed to lc
		write := func(n int) {
			for range w.creates(t, p.url, "post", n, 8) {
				id, cursor := lc.anyEvent("c")
				log, cursors = append(log, id), append(cursors, cursor)
			}
		}
		write(1599)
		oldest := first // position of the oldest event the log keeps, of those known
		expired, replayed := 0, 0
		for round := range 8 {
			p.stop()
			port = freePort(t)
			p = startProcess(t, config(port), port)
			var resumes []*resumeConn // ten at once: more chances to come before the expiry
			for range 10 {
				c := dialResume(t, p.url, "graphql-transport-ws")
				c.subscribe("r", resumeQueries["c"], cursors[oldest-first])
				resumes = append(resumes, c)
			}
			last := first + int64(len(log)) - 1
			cut := last - 1000 // what the start's expiry deletes: up to this position
			for _, c := range resumes {
				switch m := c.read(); {
				case m.Type == "error":
					if !strings.Contains(m.raw, "CURSOR_EXPIRED") {
						t.Fatalf("round %d: %s", round, m.raw)
					}
					expired++
				case m.Type == "next":
					// The replay began: let the expiry run, then read on.
					awaitExpiry(t, p.url, 1000)
					// Every event in order, or, once the expiry has cut into what is still to
					// be read, CURSOR_EXPIRED after those read: never a gap.
					want := log[oldest-first+1:]
					post, _ := c.eventOf(m)
					got := []string{post}
					cutIn := false
					for len(got) < len(want) && got[len(got)-1] == want[len(got)-1] {
						m := c.read()
						if m.Type == "error" && strings.Contains(m.raw, "CURSOR_EXPIRED") {
							cutIn = true
							break
						}
						if m.Type != "next" {
							t.Fatalf("round %d: want an event or CURSOR_EXPIRED; got %s", round, m.raw)
						}
						id, _ := c.eventOf(m)
						got = append(got, id)
					}
					if i := len(got) - 1; got[i] != want[i] {
						came := first + int64(slices.Index(log, got[i]))
						t.Fatalf("round %d, resumed after position %d while the expiry at the start deleted up to %d: after %d events in order, that of position %d came where %d was due: %d events skipped without a refusal",
							round, oldest, cut, i, came, oldest+int64(i)+1, came-(oldest+int64(i)+1))
					}
					if cutIn {
						expired++
					} else {
						replayed++
					}
				default:
					t.Fatalf("round %d: %s", round, m.raw)
				}
				c.ws.CloseNow()
			}
			oldest = cut + 1
			lc = dialResume(t, p.url, "graphql-transport-ws")
			lc.subscribe("c", resumeQueries["c"], cursors[len(cursors)-1])
			lc.quiet()
			write(600)
		}
		t.Logf("of 80 resumes right after a restart, %d were refused as expired, %d replayed every event", expired, replayed)
	})
}
