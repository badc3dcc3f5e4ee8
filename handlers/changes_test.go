// Tests of REST's change stream (handlers/stream/changes.go): GET /posts asked for as
// text/event-stream, its events, filters, resumes and refusals.

package handlers

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// changes opens GET /posts?query as a change stream, with the headers of header, and returns it
// once its headers are in.
func (s *wsServer) changes(t *testing.T, query string, header http.Header) *streamResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), streamDeadline)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.http+"/posts?"+query, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	for name, values := range header {
		req.Header[name] = values
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", acceptSSE)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET /posts?%s: %v", query, err)
	}
	r := &streamResponse{Response: res, body: bufio.NewReader(res.Body), cancel: cancel}
	t.Cleanup(r.close)
	return r
}

// change is one event of a change stream.
type change struct {
	kind, id string
	data     map[string]any
}

// next reads the next event of a change stream, past its comments.
func (r *streamResponse) next(t *testing.T) change {
	t.Helper()
	for {
		event := r.event(t)
		if strings.HasPrefix(event, ":") {
			continue
		}
		var c change
		for line := range strings.SplitSeq(strings.TrimSuffix(event, "\n\n"), "\n") {
			field, value, _ := strings.Cut(line, ": ")
			switch field {
			case "id":
				c.id = value
			case "event":
				c.kind = value
			case "data":
				if err := json.Unmarshal([]byte(value), &c.data); err != nil {
					t.Fatalf("%q: the data is no JSON object: %v", event, err)
				}
			default:
				t.Fatalf("%q: a line %q; want id, event and data alone", event, line)
			}
		}
		return c
	}
}

// restJSON is the JSON of the answer to GET path.
func (s *wsServer) restJSON(t *testing.T, path string) (any, http.Header) {
	t.Helper()
	res, err := http.Get(s.http + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var v any
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || json.Unmarshal(b, &v) != nil {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, b)
	}
	return v, res.Header
}

// restWrite sends method path with body by the user of key and wants status.
func (s *wsServer) restWrite(t *testing.T, method, path, key, body string, status int) {
	t.Helper()
	res := askREST(t, s.http, method, path, key, body, "")
	defer res.Body.Close()
	if res.StatusCode != status {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("%s %s: %d %s; want %d", method, path, res.StatusCode, b, status)
	}
}

func TestTheChangeStreamSendsEachWriteAsGETShowsIt(t *testing.T) {
	s := newWSServerWith(t, testSubscriptions, with(testLimits, func(l *schema.Limits) { l.MaxResume = 1000 }), posts.Config{})
	r := s.changes(t, "", nil)
	wantStreamHeaders(t, r, eventStreamCT)
	if got := r.event(t); got != sseOpen {
		t.Fatalf("the stream begins %q; want %q", got, sseOpen)
	}
	if vary := r.Header.Get("Vary"); !strings.HasPrefix(vary, "Accept, ") {
		t.Errorf("Vary %q; want Accept first: GET /posts answers JSON or a stream by it", vary)
	}
	s.waitForSubscribers(t, 3)

	// A title that holds the bytes of a body's null member, and characters JSON escapes.
	id := s.createPostOf(t, `{"title": "<first>,\\\",\"body\":null,\"createdAt\": \u00e9 &amp; \ud83d\ude00"}`)
	path := "/posts/" + id
	created := r.next(t)
	if shown, _ := s.restJSON(t, path); created.kind != "created" || !reflect.DeepEqual(created.data, shown) {
		t.Errorf("after a create: %s %v; want created, %v", created.kind, created.data, shown)
	}
	s.restWrite(t, http.MethodPatch, path, wsKey, `{"title": "changed", "body": "now with a body"}`, http.StatusOK)
	updated := r.next(t)
	if shown, _ := s.restJSON(t, path); updated.kind != "updated" || !reflect.DeepEqual(updated.data, shown) {
		t.Errorf("after a change: %s %v; want updated, %v", updated.kind, updated.data, shown)
	}
	s.restWrite(t, http.MethodDelete, path, wsKey, "", http.StatusNoContent)
	deleted := r.next(t)
	if want := map[string]any{"id": id}; deleted.kind != "deleted" || !reflect.DeepEqual(deleted.data, want) {
		t.Errorf("after a delete: %s %v; want deleted, %v", deleted.kind, deleted.data, want)
	}
	ids := []string{created.id, updated.id, deleted.id}
	for _, c := range ids {
		if len(c) != events.CursorLength {
			t.Errorf("ids %q; want each a cursor of %d characters", ids, events.CursorLength)
		}
	}

	// Resuming from the create's id (EventSource's Last-Event-ID) gives what came after it.
	again := s.changes(t, "", http.Header{"Last-Event-Id": {created.id}})
	for i, want := range []string{"updated", "deleted"} {
		if c := again.next(t); c.kind != want || c.id != ids[i+1] {
			t.Errorf("resumed after the create: %s %s; want %s %s", c.kind, c.id, want, ids[i+1])
		}
	}
}

func TestTheChangeStreamFollowsTheListsFilters(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	mine := s.changes(t, "userId=alice&limit=5&sort=createdAt", nil) // a list's paging and order are taken, and ignored
	found := s.changes(t, "q=edge", nil)                             // the posts that say edge (or edges: a prefix)
	past := s.changes(t, "until="+url.QueryEscape("2020-01-01T00:00:00Z"), nil)
	s.waitForSubscribers(t, 8) // two of the streams share the feed of every delete

	s.restWrite(t, http.MethodPost, "/posts", wsBobKey, `{"title": "bob at the edge"}`, http.StatusCreated)
	alices := s.createPost(t, "alice writes")
	s.restWrite(t, http.MethodPatch, "/posts/"+alices, wsKey, `{"title": "alice at the edges"}`, http.StatusOK)
	s.restWrite(t, http.MethodDelete, "/posts/"+alices, wsKey, "", http.StatusNoContent)
	s.createPost(t, "the end")
	s.createPost(t, "edge of the end")

	for _, tc := range []struct {
		name string
		r    *streamResponse
		want []string
	}{
		{"userId=alice", mine, []string{"created alice writes", "updated alice at the edges", "deleted ", "created the end", "created edge of the end"}},
		// A delete, whose event has the id alone, comes for every post of the stream's user.
		{"q=edge", found, []string{"created bob at the edge", "updated alice at the edges", "deleted ", "created edge of the end"}},
		// No post created now was created before 2020: the delete alone.
		{"until=2020-01-01T00:00:00Z", past, []string{"deleted "}},
	} {
		var got []string
		for range tc.want {
			c := tc.r.next(t)
			title, _ := c.data["title"].(string)
			got = append(got, c.kind+" "+title)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q; want %q", tc.name, got, tc.want)
		}
	}
}

func TestTheChangeStreamResumesFromARead(t *testing.T) {
	s := newWSServerWith(t, testSubscriptions, with(testLimits, func(l *schema.Limits) { l.MaxResume = 1000 }), posts.Config{})
	before := s.createPost(t, "before the read")
	_, header := s.restJSON(t, "/posts")
	cursor := header.Get(answer.CursorHeader)
	after := s.createPost(t, "after the read")

	// EventSource's first request sends the read's cursor in the URL; a reconnect, the last
	// event's id in Last-Event-ID, which wins.
	r := s.changes(t, "lastEventID="+url.QueryEscape(cursor), nil)
	first := r.next(t)
	if first.kind != "created" || first.data["id"] != after {
		t.Fatalf("from the read's cursor: %s %v; want the create of %s alone, not of %s", first.kind, first.data, after, before)
	}
	s.waitForSubscribers(t, 3)
	live := s.createPost(t, "live")
	if c := r.next(t); c.data["id"] != live {
		t.Errorf("then %v; want the live create of %s", c.data, live)
	}
	r.close()
	again := s.changes(t, "lastEventID="+url.QueryEscape(cursor), http.Header{"Last-Event-Id": {first.id}})
	if c := again.next(t); c.data["id"] != live {
		t.Errorf("Last-Event-ID of the first event beside lastEventID of the read: %v; want %s, after the first", c.data, live)
	}
}

func TestTheChangeStreamsRefusals(t *testing.T) {
	s := newWSServerWith(t, with(testSubscriptions, func(c *live.Subscriptions) { c.OriginPatterns = []string{"app.example"} }),
		with(testLimits, func(l *schema.Limits) { l.MaxResume = 1 }), posts.Config{})
	s.createPost(t, "one")
	_, header := s.restJSON(t, "/posts")
	old := header.Get(answer.CursorHeader)
	s.createPost(t, "two")
	s.createPost(t, "three")
	s.createPost(t, "four")
	for _, tc := range []struct {
		name, query string
		header      http.Header
		status      int
		message     string
	}{
		{"a lastEventID that is no cursor", "lastEventID=nope", nil, 400, "Last-Event-ID (or lastEventID) is not a cursor"},
		{"a Last-Event-ID that is no cursor", "", http.Header{"Last-Event-Id": {"nope"}}, 400, "Last-Event-ID (or lastEventID) is not a cursor"},
		{"a cursor more than max_resume_events behind", "lastEventID=" + url.QueryEscape(old), nil, 410, "more events of the log behind than max_resume_events"},
		{"lastEventID twice", "lastEventID=a&lastEventID=b", nil, 400, `query parameter "lastEventID" is given more than once`},
		{"Last-Event-ID twice", "", http.Header{"Last-Event-Id": {old, "nope"}}, 400, "Last-Event-ID is given more than once"},
		{"an unknown parameter", "page=2", nil, 400, `unknown query parameter "page"; allowed: userId, q, since, until, sort, limit, after, lastEventID`},
		{"a bad search", "q=" + url.QueryEscape("***"), nil, 400, "q"},
		{"since not before until", "since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", nil, 400, "since must be before until"},
		{"an origin not allowed", "", http.Header{"Origin": {"https://evil.example"}}, 403, "Origin"},
		{"an unknown API key", "", http.Header{"X-Api-Key": {"not-a-key"}}, 401, ""},
		{"lastEventID on a list in JSON", "lastEventID=x", http.Header{"Accept": {"application/json"}}, 400, "resumes a change stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.changes(t, tc.query, tc.header)
			body := r.rest(t)
			var e struct{ Error string }
			if r.StatusCode != tc.status || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, tc.message) {
				t.Errorf("%d %s; want %d with an error that says %q", r.StatusCode, body, tc.status, tc.message)
			}
		})
	}
	if n := s.broker.Subscribers(); n != 0 {
		t.Errorf("%d subscribers after the refusals; want none", n)
	}
}

func TestAChangeStreamsSubscriptionsStartTogether(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	reference := s.changes(t, "", nil) // its feed of every delete runs: a new stream joins it at once
	s.waitForSubscribers(t, 3)
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for range 2 { // each post created, changed and deleted, as the streams start
		writers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := s.createPost(t, "meanwhile")
				s.restWrite(t, http.MethodPatch, "/posts/"+id, wsKey, `{"title": "changed"}`, http.StatusOK)
				s.restWrite(t, http.MethodDelete, "/posts/"+id, wsKey, "", http.StatusNoContent)
			}
		})
	}
	// Each with a filter of its own: feeds of its own for creates and changes, which start
	// while the feed of deletes it shares with the others delivers. Each is read as it comes.
	const n = 30
	var (
		mu  sync.Mutex
		got = make([][]string, n) // each stream's ids, in order
		all sync.WaitGroup
	)
	for i := range n {
		r := s.changes(t, "since="+url.QueryEscape(fmt.Sprintf("2000-01-01T00:00:00.%03dZ", i)), http.Header{clientIPHeader: {fmt.Sprint("10.0.0.", i)}})
		all.Go(func() {
			for {
				c := r.next(t)
				mu.Lock()
				got[i] = append(got[i], c.id)
				mu.Unlock()
				if c.data["title"] == "the last" {
					return
				}
			}
		})
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	writers.Wait()
	s.createPost(t, "the last")
	var want []string // the reference's ids, in order
	for c := reference.next(t); ; c = reference.next(t) {
		want = append(want, c.id)
		if c.data["title"] == "the last" {
			break
		}
	}
	all.Wait()
	for i, ids := range got {
		at := slices.Index(want, ids[0])
		if at < 0 || !slices.Equal(ids, want[at:]) {
			t.Errorf("stream %d: %d events from %s; want every one of the reference's from there, %d: a stream's events from its first on are every one", i, len(ids), ids[0], len(want)-at)
		}
	}
}

func TestARefusalARetryMayLiftIsAStreamThatSaysWhenToReconnect(t *testing.T) {
	s := newWSServer(t, with(testSubscriptions, func(c *live.Subscriptions) { c.MaxConnectionsPerUser = 1 }))
	s.changes(t, "", nil)
	s.waitForSubscribers(t, 3)
	r := s.changes(t, "", nil) // the client's second connection: 429, but EventSource stops on a 429
	body := r.rest(t)
	wantStreamHeaders(t, r, eventStreamCT)
	if want := ":\n\nretry: " + answer.RetryAfter + "000\n\nevent: refused\ndata: {\"error\":"; !strings.HasPrefix(body, want) ||
		!strings.Contains(body, "max_connections_per_user") {
		t.Errorf("a stream past max_connections_per_user: %q; want it to begin %q and name the limit", body, want)
	}
}

func TestAChangeStreamTakesTheTimesAListTakes(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	// Years past 9999 once in UTC: a list takes them, so does its stream.
	r := s.changes(t, "since=0001-01-02T00:00:00%2B00:01&until="+url.QueryEscape("9999-12-31T23:59:59-23:59"), nil)
	r.event(t)
	s.waitForSubscribers(t, 3)
	id := s.createPost(t, "within")
	if c := r.next(t); c.kind != "created" || c.data["id"] != id {
		t.Errorf("%s %v; want the create of %s", c.kind, c.data, id)
	}
}
