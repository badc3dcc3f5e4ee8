//go:build ecosystem

// Subscriptions over plain HTTP as a client reads them through the modules in front: the
// response, and each event as it becomes readable (decompressed, when the response is), with the
// time it did.

package ecosystem

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/postsedge/caddy-posts/internal/race"
)

// subscription is the document every stream of these tests runs.
const subscription = "subscription { postCreated { title } }"

// A transport is how a client asks for a stream: its method, its Accept, as the clients users
// run send them.
type transport struct {
	name   string
	method string
	accept string
}

var (
	// EventSource (and graphql-sse's client, over POST) send exactly this Accept.
	sseGET  = transport{"an SSE subscription over GET", "GET", "text/event-stream"}
	ssePOST = transport{"an SSE subscription over POST", "POST", "text/event-stream"}
	// A GET that takes JSON too (a fetch of one's own, a library): a stream all the same.
	sseGETTakingJSON = transport{"an SSE subscription over GET that also takes JSON", "GET", "text/event-stream, application/json;q=0.9"}
	// Apollo Client 4's HttpLink, for a subscription.
	multipartPOST = transport{"a multipart subscription", "POST", `multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/graphql-response+json,application/json;q=0.9`}
)

// multipart is whether t is Apollo's multipart protocol (else it is SSE).
func (t transport) multipart() bool { return strings.HasPrefix(t.accept, "multipart/") }

// How long after its write an event may become readable through the modules in front,
// checked without the race detector only. eventDelay is the bound, which a stream's
// median event keeps; heldBack is the most any one may take: a stall of this loaded 2-core
// machine (122 ms once in 950 events, measured) is not an event held back, which waits for the
// next keep-alive (5 s for multipart, 12 s for SSE), a buffer to fill, or the end.
const (
	eventDelay = 100 * time.Millisecond
	heldBack   = time.Second
)

// streamClient has no overall timeout (a stream lasts until the test closes it), only one for
// the head (a stream held back entirely never answers), and leaves the content coding to the
// test.
var streamClient = &http.Client{Transport: &http.Transport{DisableCompression: true, ResponseHeaderTimeout: 10 * time.Second}}

// stream is an open subscription: its response, and its frames as they become readable.
type stream struct {
	header http.Header
	frames chan frame // closed when the response ends
	cancel context.CancelFunc
	err    error // why the response ended, once frames is closed
}

// frame is one SSE event or comment, or one multipart part, with the time it became readable.
type frame struct {
	event string // "next", "complete"; "" for a keep-alive (an SSE comment, a {} part)
	data  string // the execution result (SSE's data; a multipart part's payload)
	at    time.Time
}

// openStream subscribes to postCreated at baseURL/graphql over tr, asking for coding ("" for
// none) and sending header ("Name: value" lines), and returns once the stream has opened (its
// first comment or heartbeat has arrived: it has joined its feed, which keepFeedLive keeps
// subscribed to the events). It closes when the test ends.
func openStream(t *testing.T, baseURL string, tr transport, coding string, header ...string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	target, body := baseURL+"/graphql", ""
	if tr.method == "GET" {
		target += "?" + url.Values{"query": {subscription}}.Encode()
	} else {
		body = fmt.Sprintf(`{"query": %q}`, subscription)
	}
	req, err := http.NewRequestWithContext(ctx, tr.method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", tr.accept)
	if coding != "" {
		req.Header.Set("Accept-Encoding", coding)
	}
	for _, h := range header {
		if name, value, ok := strings.Cut(h, ": "); ok {
			req.Header.Add(name, value)
		}
	}
	res, err := streamClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", tr.name, err)
	}
	if res.StatusCode != 200 {
		data, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Fatalf("%s: %d %s", tr.name, res.StatusCode, data)
	}
	s := &stream{header: res.Header, frames: make(chan frame, 64), cancel: cancel}
	go s.read(res, tr.multipart())
	select {
	case f, ok := <-s.frames:
		if !ok {
			t.Fatalf("%s: the stream ended (%v) before it opened", tr.name, s.err)
		}
		if f.event != "" {
			t.Fatalf("%s: the stream opened with %+v; want a keep-alive first", tr.name, f)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the stream did not open in 10s (Content-Encoding %q)", tr.name, res.Header.Get("Content-Encoding"))
	}
	return s
}

// close ends the stream as a client that leaves does.
func (s *stream) close() {
	s.cancel()
	for range s.frames {
	}
}

// read decodes the response as its Content-Encoding says and sends each frame once the bytes
// that end it have been decoded: SSE's blank line; for multipart the boundary after the part,
// since Apollo's client reads a part once it sees it.
func (s *stream) read(res *http.Response, multipart bool) {
	defer close(s.frames)
	defer res.Body.Close()
	var body io.Reader
	switch coding := res.Header.Get("Content-Encoding"); coding {
	case "":
		body = res.Body
	case "gzip":
		gz, err := gzip.NewReader(res.Body)
		if err != nil {
			s.err = err
			return
		}
		body = gz
	case "zstd":
		// Decoded in this goroutine, block by block as they come, with no reading ahead.
		zr, err := zstd.NewReader(res.Body, zstd.WithDecoderConcurrency(1))
		if err != nil {
			s.err = err
			return
		}
		defer zr.Close()
		body = zr
	default:
		s.err = fmt.Errorf("Content-Encoding %q", coding)
		return
	}
	delimiter := []byte("\n\n")
	if multipart {
		delimiter = []byte("\r\n--graphql")
	}
	var pending []byte
	chunk := make([]byte, 32<<10)
	for {
		n, err := body.Read(chunk)
		pending = append(pending, chunk[:n]...)
		for {
			i := bytes.Index(pending, delimiter)
			if i < 0 {
				break
			}
			raw := string(pending[:i])
			pending = pending[i+len(delimiter):]
			f, ok := parseFrame(raw, multipart)
			if !ok {
				continue
			}
			f.at = time.Now()
			s.frames <- f
		}
		if err != nil {
			if err != io.EOF {
				s.err = err
			}
			return
		}
	}
}

// parseFrame reads one SSE event (its lines) or one multipart part (its headers and JSON); ok is
// false for what carries nothing: the bytes before a multipart stream's first boundary.
func parseFrame(raw string, multipart bool) (frame, bool) {
	if multipart {
		_, part, found := strings.Cut(raw, "\r\n\r\n")
		if !found {
			return frame{}, false
		}
		var p struct {
			Payload json.RawMessage `json:"payload"`
		}
		if part == "{}" {
			return frame{}, true
		}
		if json.Unmarshal([]byte(part), &p) != nil || string(p.Payload) == "null" {
			return frame{event: "error", data: part}, true // unreadable, or the transport's errors
		}
		return frame{event: "next", data: string(p.Payload)}, true
	}
	var f frame
	for line := range strings.Lines(raw) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			f.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			f.data += strings.TrimPrefix(line, "data: ")
		}
	}
	return f, true
}

// errNoEvent: none came in the time given.
var errNoEvent = errors.New("no event in time: the stream holds it back")

// next is the stream's next event past its keep-alives, waiting at most wait.
func (s *stream) next(wait time.Duration) (frame, error) {
	timeout := time.After(wait)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return frame{}, fmt.Errorf("the stream ended (%v) before the event", s.err)
			}
			if f.event != "" {
				return f, nil
			}
		case <-timeout:
			return frame{}, errNoEvent
		}
	}
}

// keepFeedLive holds a stream of the subscription open straight to s for the rest of the test,
// and returns once its feed has subscribed to the events (a post written for it has reached it).
// The streams the test opens next join that feed, so a write made once their first bytes have
// come reaches them: a stream that starts a feed sends its first bytes before the feed has
// subscribed, as integration's witness notes.
func keepFeedLive(t *testing.T, s *site, key string) {
	t.Helper()
	witness := openStream(t, s.url, sseGET, "")
	for i := range 20 {
		if res := s.call(t, "POST", "/posts", fmt.Sprintf(`{"title": "the feed's probe %d"}`, i), "Authorization: ApiKey "+key); res.status != 201 {
			t.Fatalf("creating a probe: %d %s", res.status, res.body)
		}
		switch _, err := witness.next(time.Second); {
		case err == nil:
			go func() {
				for range witness.frames { // the test's events, read so that it never lags
				}
			}()
			return
		case !errors.Is(err, errNoEvent):
			t.Fatalf("the witness: %v", err)
		}
	}
	t.Fatal("the feed got none of 20 probes")
}

// writes numbers the posts eventsOneByOne creates, so that each title is new: an event replayed
// from a cache would not match.
var writes atomic.Int64

// eventsOneByOne creates n posts through writer's REST API, one after the other, and checks that
// the stream gets each one's event, alone and in order, before the next write. Without the race
// detector the median event must be readable within eventDelay of its write being done, and
// each within heldBack. The write is done by the time its 201 has come (the event often comes
// first): counted from the request, the delay would hold the store's commit too, which on this
// loaded machine takes up to 100 ms itself now and then. It logs the time from each request to
// its event, and from its 201.
func eventsOneByOne(t *testing.T, s *stream, writer *site, key string, n int) {
	t.Helper()
	var fromRequest, fromAnswer []time.Duration
	for i := range n {
		title := fmt.Sprintf("%s, event %d of write %d", t.Name(), i, writes.Add(1))
		sent := time.Now()
		if res := writer.call(t, "POST", "/posts", fmt.Sprintf(`{"title": %q}`, title), "Authorization: ApiKey "+key); res.status != 201 {
			t.Fatalf("creating a post: %d %s", res.status, res.body)
		}
		answered := time.Now()
		f, err := s.next(5 * time.Second)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		var result struct {
			Data struct {
				PostCreated struct{ Title string }
			}
		}
		if err := json.Unmarshal([]byte(f.data), &result); err != nil || f.event != "next" || result.Data.PostCreated.Title != title {
			t.Fatalf("event %d: %s %s; want the next event of %q", i, f.event, f.data, title)
		}
		fromRequest, fromAnswer = append(fromRequest, f.at.Sub(sent)), append(fromAnswer, f.at.Sub(answered))
	}
	t.Logf("from each write's request to its event: %v; from its 201: %v", fromRequest, fromAnswer)
	if race.Enabled {
		return
	}
	if median := slices.Sorted(slices.Values(fromAnswer))[n/2]; median > eventDelay {
		t.Errorf("the median event was readable %v after its write's 201; want within %v", median, eventDelay)
	}
	for i, d := range fromAnswer {
		if d > heldBack {
			t.Errorf("event %d was readable %v after its write's 201: held back; want within %v", i, d, heldBack)
		}
	}
}
