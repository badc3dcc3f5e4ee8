// Live search end to end: postCreated and postUpdated with search, over a WebSocket
// (graphql-transport-ws) and GraphQL over SSE, through the in-process Caddy: only the posts that
// match, in the order written, resumable, and a bad search refused before it starts.
package caddymodule

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/events/eventstest"
)

// The expected events of each test are decided from the rules of package words by hand, not by
// its code: every word of a search is a whole word of the post's title or body, the last one the
// beginning of one, case, accents and compatibility forms aside, hyphens and apostrophes between
// words.
func TestLiveSearch(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	for _, tr := range liveTransports(t) {
		t.Run(tr.name+`: postCreated(search: "edge") gets the created posts that match, in the order written, and no other`, func(t *testing.T) {
			edge := tr.subscribe(t, `subscription { postCreated(search: "edge") { id title } }`, nil, "")
			edgeCa := tr.subscribe(t, `subscription($q: String) { postCreated(search: $q) { id title } }`, map[string]any{"q": "edge ca"}, "")
			var wantEdge, wantEdgeCa []string
			for _, w := range []struct {
				key, title, body string
				edge, edgeCa     bool // found by "edge"; by "edge ca" (edge whole, a word that begins with ca)
			}{
				{asAlice, "Edge cases", "", true, true},                    // case
				{asBob, "A hedge fund", "hedges and ledges", false, false}, // hedge does not begin with edge
				{asAlice, "edges of the map", "", true, false},             // the last word a prefix; not a whole word
				{asBob, "ÉDGE LORDS", "", true, false},                     // accent and case
				{asAlice, "edgy humour", "", false, false},                 // edgy does not begin with edge
				{asAlice, "Plain title", "cutting-edge café", true, true},  // the body; a hyphen between words; café begins with ca
				{asAlice, "edg", "", false, false},                         // edg does not begin with edge
				{asBob, "knowledge is power", "", false, false},            // inside a word
				{asAlice, "The edge's reach", "", true, false},             // an apostrophe between words
				{asAlice, "ｅｄｇｅ in full width", "", true, false},           // full-width letters
				{asAlice, "Nothing here", "sailing EdgeWise", true, false}, // the body, a prefix
				{asAlice, "Caveat: an edge, last", "", true, true},         // the last write, which both find
			} {
				p := writePost(t, c, w.key, w.title, w.body)
				if w.edge {
					wantEdge = append(wantEdge, createdLine(p))
				}
				if w.edgeCa {
					wantEdgeCa = append(wantEdgeCa, createdLine(p))
				}
			}
			// Each reads up to the last write, which both find: any other event would come before it.
			expectEvents(t, `"edge"`, edge, "postCreated", wantEdge)
			expectEvents(t, `"edge ca"`, edgeCa, "postCreated", wantEdgeCa)
		})

		t.Run(tr.name+": postUpdated(search) gets each update after which the post matches, and none after which it does not", func(t *testing.T) {
			sub := tr.subscribe(t, `subscription($q: String) { postUpdated(search: $q) { id title version } }`, map[string]any{"q": "edge"}, "")
			p1 := writePost(t, c, asAlice, "draft one", "nothing yet")
			p2 := writePost(t, c, asAlice, "edge from the start", "") // created, not updated: not for postUpdated
			var want []string
			for _, u := range []struct {
				post  postOut
				patch string
				found bool
			}{
				{p1, `{"title": "still a draft"}`, false},
				{p1, `{"body": "now about the edge"}`, true},
				{p2, `{"title": "moved on", "body": "a hedge"}`, false}, // it matched before the update, not after
				{p1, `{"body": "edited, still at the EDGE"}`, true},     // it matched before and after
				{p1, `{"title": "a ledge", "body": null}`, false},
				{p2, `{"title": "Edges again"}`, true}, // the last write
			} {
				if p := patchPost(t, c, asAlice, u.post.ID, u.patch); u.found {
					want = append(want, updatedLine(p))
				}
			}
			expectEvents(t, `"edge"`, sub, "postUpdated", want)
		})

		t.Run(tr.name+": search with userId gets the matching posts of that user alone", func(t *testing.T) {
			created := tr.subscribe(t, `subscription($q: String) { postCreated(userId: "alice", search: $q) { id title version } }`, map[string]any{"q": "edge"}, "")
			updated := tr.subscribe(t, `subscription($u: ID, $q: String) { postUpdated(userId: $u, search: $q) { id title version } }`, map[string]any{"u": "bob", "q": "edge"}, "")
			a1 := writePost(t, c, asAlice, "alice on the edge", "")
			b1 := writePost(t, c, asBob, "bob on the edge", "") // bob's
			writePost(t, c, asAlice, "alice in the hedge", "")
			b2 := writePost(t, c, asBob, "bob in the hedge", "")
			b2 = patchPost(t, c, asBob, b2.ID, `{"title": "bob over the edge"}`)
			a3 := writePost(t, c, asAlice, "alice edges closer", "")
			patchPost(t, c, asAlice, a3.ID, `{"title": "alice's edge, updated"}`) // alice's
			patchPost(t, c, asBob, b1.ID, `{"title": "bob off the ledge"}`)
			b1 = patchPost(t, c, asBob, b1.ID, `{"title": "bob back on the edge"}`) // the last update
			a4 := writePost(t, c, asAlice, "alice at the edge, last", "")           // the last write
			expectEvents(t, `alice's "edge"`, created, "postCreated", []string{updatedLine(a1), updatedLine(a3), updatedLine(a4)})
			expectEvents(t, `bob's updated "edge"`, updated, "postUpdated", []string{updatedLine(b2), updatedLine(b1)})
		})

		t.Run(tr.name+": a subscriber back with its last event's cursor gets the matching posts it missed, in order, then the live ones, none twice", func(t *testing.T) {
			const query = `subscription($q: String) { postCreated(search: $q) { id title } }`
			vars := map[string]any{"q": "edge"}
			first := tr.subscribe(t, query, vars, "")
			var want []string
			for _, w := range []struct {
				key, title string
				found      bool
			}{{asAlice, "edge one", true}, {asAlice, "a hedge", false}, {asBob, "edge two", true}} {
				if p := writePost(t, c, w.key, w.title, ""); w.found {
					want = append(want, createdLine(p))
				}
			}
			seen := expectEvents(t, "before the disconnect", first, "postCreated", want)
			if t.Failed() {
				t.FailNow()
			}
			first.close()

			want = nil
			write := func(key, title string, found bool) {
				if p := writePost(t, c, key, title, ""); found {
					want = append(want, createdLine(p))
				}
			}
			write(asAlice, "missed: edge A", true)
			write(asAlice, "missed: a ledge", false)
			write(asBob, "missed: ÉDGE B", true)
			write(asBob, "missed: edgy", false)
			write(asAlice, "missed: edges C", true)
			back := tr.subscribe(t, query, vars, seen[len(seen)-1].cursor)
			replayed := expectEvents(t, "replayed", back, "postCreated", want)

			want = nil
			write(asAlice, "live: edge D", true)
			write(asBob, "live: knowledge", false)
			write(asAlice, "live: edge E", true) // the last write
			live := expectEvents(t, "live after the replay", back, "postCreated", want)

			cursors := map[string]string{}
			for _, e := range slices.Concat(seen, replayed, live) {
				if other, ok := cursors[e.cursor]; ok {
					t.Errorf("the events %s and %s have one cursor %s", other, e.line, e.cursor)
				}
				cursors[e.cursor] = e.line
			}
		})

		for _, bad := range []struct {
			name, field, search, message string
		}{
			{"an empty search", "postCreated", "", "search has no letter or digit to search for"},
			{"a search of punctuation alone", "postCreated", `"?!" -- *** ( ) ^ :`, "search has no letter or digit to search for"},
			{"a search of emoji alone", "postUpdated", "🙂 🎉", "search has no letter or digit to search for"},
			{"a search of 258 bytes", "postCreated", strings.Repeat("é", 129), "search is 258 bytes long; a search has at most 256"},
			{"a search of 9 words", "postUpdated", "one two three four five six seven eight nine", "search has 9 words; a search has at most 8"},
		} {
			t.Run(fmt.Sprintf("%s: %s is refused with BAD_USER_INPUT naming search, and the subscription never starts", tr.name, bad.name), func(t *testing.T) {
				query := fmt.Sprintf(`subscription($q: String) { %s(search: $q) { id title } }`, bad.field)
				errs := tr.refused(t, c, query, map[string]any{"q": bad.search}, "")
				if len(errs) != 1 {
					t.Fatalf("%d errors; want 1: %+v", len(errs), errs)
				}
				e := errs[0]
				if e.Extensions["code"] != "BAD_USER_INPUT" || e.Extensions["field"] != "search" || !strings.Contains(e.Message, bad.message) {
					t.Errorf("error %q %v; want BAD_USER_INPUT, field search, and a message with %q", e.Message, e.Extensions, bad.message)
				}
			})
		}

		t.Run(tr.name+": a search of 8 words and 256 bytes, the most, is let in", func(t *testing.T) {
			var words []string
			for i := range 8 {
				words = append(words, strings.Repeat(string(rune('a'+i)), 30)+"1")
			}
			words[0] += "2" // 7 words of 31 bytes, one of 32 and 7 spaces; the last, a prefix, of 31 characters (words.MaxPrefix)
			search := strings.Join(words, " ")
			if len(search) != 256 {
				t.Fatalf("the search is %d bytes", len(search))
			}
			sub := tr.subscribe(t, `subscription($q: String) { postCreated(search: $q) { id title } }`, map[string]any{"q": search}, "")
			writePost(t, c, asAlice, "all but the last word", strings.Join(words[:7], " "))
			p := writePost(t, c, asAlice, "every word", search+"3") // the last a prefix of a word
			expectEvents(t, "the most", sub, "postCreated", []string{createdLine(p)})
		})

		t.Run(tr.name+": a bad search resuming from a cursor is refused the same, with nothing replayed", func(t *testing.T) {
			sub := tr.subscribe(t, `subscription { postCreated(search: "edge") { id title } }`, nil, "")
			seen := expectEvents(t, "the first", sub, "postCreated", []string{createdLine(writePost(t, c, asAlice, "edge before the cursor", ""))})
			if t.Failed() {
				t.FailNow()
			}
			sub.close()
			writePost(t, c, asAlice, "edge after the cursor", "") // what a replay would send
			errs := tr.refused(t, c, `subscription($q: String) { postCreated(search: $q) { id title } }`, map[string]any{"q": "--"}, seen[0].cursor)
			if len(errs) != 1 || errs[0].Extensions["code"] != "BAD_USER_INPUT" || errs[0].Extensions["field"] != "search" {
				t.Errorf("errors %+v; want one BAD_USER_INPUT naming search", errs)
			}
		})
	}
}

// liveTransport subscribes over one transport as its client does.
type liveTransport struct {
	name string
	// subscribe starts query with vars (nil for none), resuming after the cursor resume ("" for
	// none), and returns once every write made from then on reaches the subscription. The
	// subscription ends with the test.
	subscribe func(t *testing.T, query string, vars map[string]any, resume string) liveSub
	// refused sends query with vars, resuming after the cursor resume ("" for none), which the
	// server must refuse as it starts, and returns the errors of the refusal, once it has seen
	// that nothing of the operation runs.
	refused func(t *testing.T, c *client, query string, vars map[string]any, resume string) []gqlError
}

// liveSub is one subscription as its client reads it.
type liveSub interface {
	// next returns the payload of the next event, or false if none came in liveWait; it fails t
	// on anything else.
	next(t *testing.T) (json.RawMessage, bool)
	close()
}

// liveEvent is an event read from a subscription: its post as a line, and its cursor.
type liveEvent struct{ line, cursor string }

// liveWait is how long a test waits for an event: far longer than one takes.
const liveWait = 5 * time.Second

// expectEvents reads the events of the subscription field of sub, as many as want has lines, or
// fewer if none comes in liveWait, and fails t unless they are want: what says which they are.
func expectEvents(t *testing.T, what string, sub liveSub, field string, want []string) []liveEvent {
	t.Helper()
	var got []liveEvent
	var lines []string
	for len(got) < len(want) {
		payload, ok := sub.next(t)
		if !ok {
			break
		}
		data, cursor := eventstest.SplitEvent(t, payload)
		var d map[string]struct {
			ID      string `json:"id"`
			Title   string `json:"title"`
			Version int64  `json:"version"`
		}
		if err := json.Unmarshal([]byte(data), &d); err != nil {
			t.Fatalf("the data %s: %v", data, err)
		}
		p, ok := d[field]
		if !ok || len(d) != 1 {
			t.Fatalf("the data %s; want %s alone", data, field)
		}
		line := fmt.Sprintf("%s %q", p.ID, p.Title)
		if p.Version != 0 {
			line += fmt.Sprintf(" v%d", p.Version)
		}
		got = append(got, liveEvent{line, cursor})
		lines = append(lines, line)
	}
	if !slices.Equal(lines, want) {
		quiet := ""
		if len(lines) < len(want) {
			quiet = fmt.Sprintf(", then none for %v", liveWait)
		}
		t.Errorf("%s: got the events%s\n\t%s\nwant\n\t%s", what, quiet, strings.Join(lines, "\n\t"), strings.Join(want, "\n\t"))
	}
	return got
}

// createdLine is the line of expectEvents of a post whose event selects its id and title.
func createdLine(p postOut) string { return fmt.Sprintf("%s %q", p.ID, p.Title) }

// updatedLine is the line of expectEvents of a post whose event selects its id, title and version.
func updatedLine(p postOut) string { return fmt.Sprintf("%s %q v%d", p.ID, p.Title, p.Version) }

// writePost creates a post through REST as the user of key, with no body when body is "".
func writePost(t *testing.T, c *client, key, title, body string) postOut {
	t.Helper()
	in := map[string]any{"title": title}
	if body != "" {
		in["body"] = body
	}
	res := c.do("POST", site+"/posts", asJSON(t, in), key, jsonBody)
	if res.status != http.StatusCreated {
		t.Fatalf("creating %q: status %d, body %s", title, res.status, res.body)
	}
	var p postOut
	res.decode(t, &p)
	return p
}

// patchPost applies the merge patch to the post id through REST as the user of key.
func patchPost(t *testing.T, c *client, key, id, patch string) postOut {
	t.Helper()
	res := c.do("PATCH", site+"/posts/"+id, patch, key, "Content-Type: application/merge-patch+json")
	if res.status != http.StatusOK {
		t.Fatalf("patching %s with %s: status %d, body %s", id, patch, res.status, res.body)
	}
	var p postOut
	res.decode(t, &p)
	return p
}

// liveTransports are a WebSocket of graphql-transport-ws and GraphQL over SSE (graphql-sse's
// distinct connections mode), to the main site.
func liveTransports(t *testing.T) []liveTransport {
	// Streams are read to their end, or left open: never through the tests' checked transport,
	// which reads each response whole.
	streams := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(streams.CloseIdleConnections)
	return []liveTransport{
		{name: "WebSocket", subscribe: wsSubscribe, refused: wsRefused},
		{
			name: "SSE",
			subscribe: func(t *testing.T, query string, vars map[string]any, resume string) liveSub {
				return sseOpen(t, streams, query, vars, resume)
			},
			refused: func(t *testing.T, _ *client, query string, vars map[string]any, resume string) []gqlError {
				return sseRefused(t, streams, query, vars, resume)
			},
		},
	}
}

// wsSub is a subscription of its own graphql-transport-ws connection, whose messages one
// goroutine reads (a read that ends on a deadline closes the connection).
type wsSub struct {
	ws       *websocket.Conn
	id       string
	messages <-chan wsMessage
	early    []wsMessage // read before the subscription was known to be subscribed
}

// wsConnect opens a graphql-transport-ws connection, acknowledged, and starts reading it.
func wsConnect(t *testing.T) (*websocket.Conn, <-chan wsMessage) {
	t.Helper()
	ws := wsDial(t, "graphql-transport-ws")
	wsSend(t, ws, `{"type": "connection_init"}`)
	if m := wsRecv(t, ws); m.Type != "connection_ack" {
		t.Fatalf("got %+v; want connection_ack", m)
	}
	messages := make(chan wsMessage, 100)
	go func() {
		defer close(messages)
		for {
			_, data, err := ws.Read(context.Background()) // until wsDial's cleanup closes it
			if err != nil {
				return
			}
			var m wsMessage
			if json.Unmarshal(data, &m) != nil {
				m = wsMessage{Type: "(not JSON) " + string(data)}
			}
			select {
			case messages <- m:
			case <-t.Context().Done():
				return
			}
		}
	}()
	return ws, messages
}

// wsStart sends the subscribe message of query as the operation id.
func wsStart(t *testing.T, ws *websocket.Conn, id, query string, vars map[string]any, resume string) {
	t.Helper()
	payload := map[string]any{"query": query}
	if vars != nil {
		payload["variables"] = vars
	}
	if resume != "" {
		payload["extensions"] = map[string]any{"resumeFrom": resume}
	}
	wsSend(t, ws, asJSON(t, map[string]any{"id": id, "type": "subscribe", "payload": payload}))
}

// wsSubscribed waits for the pong of a ping sent after a subscribe: the server reads the ping
// once the subscription is subscribed to the events (ws.wsConn.subscribe). It returns what
// came before the pong.
func wsSubscribed(t *testing.T, ws *websocket.Conn, messages <-chan wsMessage) []wsMessage {
	t.Helper()
	wsSend(t, ws, `{"type": "ping"}`)
	var early []wsMessage
	for {
		m := wsMust(t, messages)
		if m.Type == "pong" {
			return early
		}
		early = append(early, m)
	}
}

// wsNext is the next message, or false if none came in liveWait.
func wsNext(t *testing.T, messages <-chan wsMessage) (wsMessage, bool) {
	t.Helper()
	select {
	case m, ok := <-messages:
		if !ok {
			t.Fatal("the connection ended")
		}
		return m, true
	case <-time.After(liveWait):
		return wsMessage{}, false
	}
}

// wsMust is wsNext of a message that must come.
func wsMust(t *testing.T, messages <-chan wsMessage) wsMessage {
	t.Helper()
	m, ok := wsNext(t, messages)
	if !ok {
		t.Fatalf("no message in %v", liveWait)
	}
	return m
}

func wsSubscribe(t *testing.T, query string, vars map[string]any, resume string) liveSub {
	t.Helper()
	ws, messages := wsConnect(t)
	wsStart(t, ws, "s", query, vars, resume)
	return &wsSub{ws: ws, id: "s", messages: messages, early: wsSubscribed(t, ws, messages)}
}

func (s *wsSub) next(t *testing.T) (json.RawMessage, bool) {
	t.Helper()
	var m wsMessage
	if len(s.early) > 0 {
		m, s.early = s.early[0], s.early[1:]
	} else {
		var ok bool
		if m, ok = wsNext(t, s.messages); !ok {
			return nil, false
		}
	}
	if m.Type != "next" || m.ID != s.id {
		t.Fatalf("got %s %s %s; want the next event of %s", m.ID, m.Type, m.Payload, s.id)
	}
	return m.Payload, true
}

func (s *wsSub) close() { _ = s.ws.CloseNow() }

// wsRefused subscribes as the operation "bad", which must get an error message; then, on the
// same connection, a subscription under the same id is let in (graphql-transport-ws closes
// the connection with 4409 for an id still running) and gets the next write as its first
// message, with none of "bad" before it.
func wsRefused(t *testing.T, c *client, query string, vars map[string]any, resume string) []gqlError {
	t.Helper()
	ws, messages := wsConnect(t)
	wsStart(t, ws, "bad", query, vars, resume)
	m := wsMust(t, messages)
	if m.Type != "error" || m.ID != "bad" {
		t.Fatalf("got %s %s %s; want the error of bad", m.ID, m.Type, m.Payload)
	}
	var errs []gqlError
	if err := json.Unmarshal(m.Payload, &errs); err != nil {
		t.Fatalf("the error payload %s: %v", m.Payload, err)
	}
	wsStart(t, ws, "bad", `subscription { postCreated { title } }`, nil, "")
	if early := wsSubscribed(t, ws, messages); len(early) > 0 {
		t.Fatalf("got %+v before any write", early)
	}
	writePost(t, c, asAlice, "after a refused search", "")
	if m := wsMust(t, messages); m.Type != "next" || m.ID != "bad" {
		t.Fatalf("got %s %s %s; want the event of the second subscription", m.ID, m.Type, m.Payload)
	}
	return errs
}

// sseSub is a GraphQL over SSE stream, whose events one goroutine reads.
type sseSub struct {
	body   io.Closer
	events <-chan sseBlock
}

// sseBlock is an SSE event's fields, or the error that ended the stream.
type sseBlock struct {
	id, event, data string
	err             error
}

// sseOpen GETs query with vars as a stream, with Last-Event-ID: resume unless it is "", and
// returns once its opening comment is read: the server writes it once the subscription is
// subscribed to the events (stream.Handler.Serve).
func sseOpen(t *testing.T, streams *http.Client, query string, vars map[string]any, resume string) *sseSub {
	t.Helper()
	params := url.Values{"query": {query}}
	if vars != nil {
		params.Set("variables", asJSON(t, vars))
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", site+"/graphql?"+params.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if resume != "" {
		req.Header.Set("Last-Event-ID", resume)
	}
	res, err := streams.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || ct != "text/event-stream; charset=utf-8" {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Fatalf("got %d %s %s; want a stream", res.StatusCode, ct, b)
	}
	events := make(chan sseBlock, 100)
	go readSSE(t.Context(), res.Body, events)
	s := &sseSub{body: res.Body, events: events}
	t.Cleanup(s.close)
	if b := s.must(t); b.err != nil || b.event != ":" {
		t.Fatalf("the stream began with %+v; want a comment", b)
	}
	return s
}

// readSSE sends each event of r to events, a comment alone as the event ":", then the error
// that ended r, until ctx ends.
func readSSE(ctx context.Context, r io.Reader, events chan<- sseBlock) {
	defer close(events)
	send := func(b sseBlock) bool {
		select {
		case events <- b:
			return true
		case <-ctx.Done():
			return false
		}
	}
	br := bufio.NewReader(r)
	var b sseBlock
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if line != "" {
				err = fmt.Errorf("a stream cut within the line %q (%w)", line, err)
			}
			send(sseBlock{err: err})
			return
		}
		field, value, _ := strings.Cut(strings.TrimSuffix(line, "\n"), ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "": // the end of an event, or a comment
			if line == "\n" {
				if !send(b) {
					return
				}
				b = sseBlock{}
			} else if b.event == "" {
				b.event = ":"
			}
		case "id":
			b.id = value
		case "event":
			b.event = value
		case "data":
			b.data += value
		default:
			b.err = fmt.Errorf("a field %q", field)
		}
	}
}

// block is the next event, or false if none came in liveWait.
func (s *sseSub) block() (sseBlock, bool) {
	select {
	case b, ok := <-s.events:
		if !ok {
			b.err = errors.New("read past the stream's end")
		}
		return b, true
	case <-time.After(liveWait):
		return sseBlock{}, false
	}
}

// must is block of an event that must come.
func (s *sseSub) must(t *testing.T) sseBlock {
	t.Helper()
	b, ok := s.block()
	if !ok {
		t.Fatalf("no event in %v", liveWait)
	}
	return b
}

// next skips keep-alives; an event's id is its cursor.
func (s *sseSub) next(t *testing.T) (json.RawMessage, bool) {
	t.Helper()
	b, ok := s.block()
	for ok && b.event == ":" {
		b, ok = s.block()
	}
	if !ok {
		return nil, false
	}
	if b.err != nil || b.event != "next" {
		t.Fatalf("got %+v; want a next event", b)
	}
	if _, cursor := eventstest.SplitEvent(t, json.RawMessage(b.data)); b.id != cursor {
		t.Errorf("the event's id is %q, its cursor %q", b.id, cursor)
	}
	return json.RawMessage(b.data), true
}

func (s *sseSub) close() { s.body.Close() }

// sseRefused opens query's stream, which must be one next event of errors alone, then complete,
// then the response's end.
func sseRefused(t *testing.T, streams *http.Client, query string, vars map[string]any, resume string) []gqlError {
	t.Helper()
	s := sseOpen(t, streams, query, vars, resume)
	b := s.must(t)
	if b.err != nil || b.event != "next" || b.id != "" {
		t.Fatalf("got %+v; want a next event with no id", b)
	}
	var res gqlResponse
	if err := json.Unmarshal([]byte(b.data), &res); err != nil || res.Data != nil {
		t.Fatalf("the result %s (%v); want errors alone", b.data, err)
	}
	if b := s.must(t); b.event != "complete" || b.err != nil {
		t.Fatalf("got %+v after the refusal; want complete", b)
	}
	if b := s.must(t); !errors.Is(b.err, io.EOF) {
		t.Fatalf("got %+v after complete; want the response's end", b)
	}
	return res.Errors
}
