// Tests of the subscriptions streamed over plain HTTP (stream.go): which Accept headers get a
// stream, the bytes of GraphQL over SSE and of Apollo's multipart subscriptions, the refusals
// before a stream, the pool of connections shared with the WebSockets, and each way a stream ends.

package handlers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	mimemultipart "mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/auth/authtest"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/events/eventstest"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/handlerstest"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/internal/race"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// The Accept headers of the two streaming clients: graphql-sse's (and EventSource's), and Apollo
// Client's HttpLink for a subscription.
const (
	acceptSSE       = "text/event-stream"
	acceptMultipart = `multipart/mixed;boundary="graphql";subscriptionSpec="1.0",application/json`
)

// The bytes every stream begins with: a comment for SSE; for multipart the first boundary and a
// heartbeat, so that the client sees the stream established before any event.
const (
	sseOpen        = ":\n\n"
	multipartPart  = "\r\ncontent-type: application/json; charset=utf-8\r\n\r\n"
	multipartOpen  = "\r\n--graphql" + multipartPart + "{}\r\n--graphql"
	multipartEnd   = "--\r\n"
	sseComplete    = "event: complete\ndata:\n\n"
	createdTitles  = `{"query": "subscription { postCreated { title } }"}`
	createdBodies  = `{"query": "subscription { postCreated { title body } }"}`
	multipartType  = `multipart/mixed;boundary="graphql";subscriptionSpec=1.0`
	eventStreamCT  = "text/event-stream; charset=utf-8"
	streamDeadline = 20 * time.Second // a request of these tests that has not ended by then has hung
)

// newStreamServer is newWSServerWith's server (the embedded store, alice's and bob's API keys,
// the client address of clientIPHeader) for the streams' tests, with change applied to the
// API's Config before New (Exiting, another Authenticator). It returns the httptest server too,
// whose shutdown a test may begin.
func newStreamServer(t *testing.T, subs live.Subscriptions, limits schema.Limits, change func(*Config)) (*wsServer, *httptest.Server) {
	t.Helper()
	svc, broker := handlerstest.Posts(t, posts.Config{})
	sch, err := schema.New(svc, zap.NewNop(), limits)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Posts: svc, GraphQL: sch, Subscriptions: subs, MaxBodySize: 1 << 20, MaxResponseSize: limits.MaxResponseSize, Logger: zap.NewNop(),
		ClientIP: func(r *http.Request) string { return r.Header.Get(clientIPHeader) },
		Auth:     &auth.Authenticator{APIKeyHeader: "X-API-Key", APIKeys: []auth.APIKey{mustKey(t, wsKey, "alice"), mustKey(t, wsBobKey, "bob")}},
	}
	if change != nil {
		change(&cfg)
	}
	a := New(cfg)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := a.Route(r); h != nil {
			h.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(func() { a.Close(); srv.Close() })
	return &wsServer{api: a, url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/graphql", http: srv.URL, broker: broker}, srv
}

// streamResponse is a response to a GraphQL request over HTTP, its body read as it comes.
type streamResponse struct {
	*http.Response
	body   *bufio.Reader
	cancel context.CancelFunc
}

// post sends a POST /graphql with the JSON body doc, accepting accept, with the headers of
// header, and returns the response once its headers are in. The response ends with the test.
func (s *wsServer) post(t *testing.T, accept, doc string, header http.Header) *streamResponse {
	t.Helper()
	return s.graphQL(t, http.MethodPost, accept, doc, header)
}

// get sends a GET /graphql with the query string of query.
func (s *wsServer) get(t *testing.T, accept, query string, header http.Header) *streamResponse {
	t.Helper()
	return s.graphQL(t, http.MethodGet, accept, query, header)
}

func (s *wsServer) graphQL(t *testing.T, method, accept, doc string, header http.Header) *streamResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), streamDeadline)
	target, body := s.http+graphqlPath, io.Reader(nil)
	if method == http.MethodGet {
		target += "?" + url.Values{"query": {doc}}.Encode()
	} else {
		body = strings.NewReader(doc)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	for name, values := range header {
		req.Header[name] = values
	}
	req.Header.Set("Accept", accept)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("%s %s: %v", method, doc, err)
	}
	r := &streamResponse{Response: res, body: bufio.NewReader(res.Body), cancel: cancel}
	t.Cleanup(r.close)
	return r
}

// close leaves the response as a client that goes away does.
func (r *streamResponse) close() {
	r.cancel()
	_ = r.Body.Close()
}

// until reads the body up to and including the first delim: an SSE event ("\n\n"), or a
// multipart part ("\r\n--graphql"). It fails t if the body ends first.
func (r *streamResponse) until(t *testing.T, delim string) string {
	t.Helper()
	var b []byte
	for !bytes.HasSuffix(b, []byte(delim)) {
		c, err := r.body.ReadByte()
		if err != nil {
			t.Fatalf("after %q: %v; want the rest of a %q", b, err, delim)
		}
		b = append(b, c)
	}
	return string(b)
}

// event reads the next SSE event (or comment).
func (r *streamResponse) event(t *testing.T) string {
	t.Helper()
	return r.until(t, "\n\n")
}

// part reads the next multipart part, with the boundary after it.
func (r *streamResponse) part(t *testing.T) string {
	t.Helper()
	return r.until(t, "\r\n--graphql")
}

// rest reads the body to its end: the response must end, not break off.
func (r *streamResponse) rest(t *testing.T) string {
	t.Helper()
	b, err := io.ReadAll(r.body)
	if err != nil {
		t.Fatalf("after %q: %v; want the response to end", b, err)
	}
	return string(b)
}

// wantStreamHeaders checks the headers every stream response has.
func wantStreamHeaders(t *testing.T, r *streamResponse, contentType string) {
	t.Helper()
	h := r.Header
	if r.StatusCode != http.StatusOK || h.Get("Content-Type") != contentType || h.Get("Cache-Control") != "no-store" ||
		h.Get("Incremental") != "?1" || h.Get("X-Accel-Buffering") != "no" || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("%d, headers %v; want 200, Content-Type %q, Cache-Control no-store, Incremental ?1, X-Accel-Buffering no, nosniff", r.StatusCode, h, contentType)
	}
}

// jsonAnswer reads a plain GraphQL response: its media type and its errors' codes and messages.
func jsonAnswer(t *testing.T, r *streamResponse) (media string, res graphQLResult) {
	t.Helper()
	media, _, _ = mime.ParseMediaType(r.Header.Get("Content-Type"))
	if media == "text/event-stream" || media == "multipart/mixed" {
		t.Fatalf("%d %s; want a GraphQL response in JSON", r.StatusCode, r.Header.Get("Content-Type"))
	}
	if err := json.Unmarshal([]byte(r.rest(t)), &res); err != nil {
		t.Fatalf("%d %s: not a GraphQL response: %v", r.StatusCode, r.Header.Get("Content-Type"), err)
	}
	for _, e := range res.Errors {
		if code, _ := e.Extensions["code"].(string); code == "" {
			t.Errorf("%d: the error %q has no extensions.code; every GraphQL error has one", r.StatusCode, e.Message)
		}
	}
	return media, res
}

// graphQLResult is a GraphQL response as a client reads it.
type graphQLResult struct {
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

// only is the one error of res as "CODE: message", or a description of what else res holds.
func (res graphQLResult) only() string {
	if len(res.Errors) != 1 || res.Data != nil {
		b, _ := json.Marshal(res)
		return "not one error: " + string(b)
	}
	code, _ := res.Errors[0].Extensions["code"].(string)
	return code + ": " + res.Errors[0].Message
}

// sseErrors reads an SSE next event that holds errors alone, with no id, and returns its one
// error as "CODE: message".
func sseErrors(t *testing.T, event string) string {
	t.Helper()
	data, ok := strings.CutPrefix(event, "event: next\ndata: ")
	if !ok || !strings.HasSuffix(data, "\n\n") || strings.Count(data, "\n") != 2 {
		t.Fatalf("%q; want a next event with one data line and no id", event)
	}
	var res graphQLResult
	if err := json.Unmarshal([]byte(data), &res); err != nil {
		t.Fatalf("%q: %v", event, err)
	}
	return res.only()
}

// waitForSubscribers waits until the broker has n subscribers: a stream's feed is live.
func (s *wsServer) waitForSubscribers(t *testing.T, n int) {
	t.Helper()
	waitFor(t, "the feed to subscribe", func() bool { return s.broker.Subscribers() == n })
}

func TestTheAcceptHeaderChoosesTheTransport(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	const (
		sseStream       = "an SSE stream"
		multipartStream = "a multipart stream"
		asJSON          = "application/json"
		asGraphQLJSON   = "application/graphql-response+json"
		notAcceptable   = "406"
	)
	tests := []struct {
		name, accept, want string
	}{
		{"text/event-stream gets an SSE stream", "text/event-stream", sseStream},
		{"text/event-stream in any case gets an SSE stream", "Text/Event-Stream", sseStream},
		{"text/event-stream with a charset gets an SSE stream", "text/event-stream; charset=utf-8", sseStream},
		{"text/event-stream beside JSON gets an SSE stream for a subscription", "text/event-stream, application/json", sseStream},
		{"text/event-stream after JSON gets an SSE stream for a subscription", "application/json, text/event-stream;q=0.5", sseStream},
		{"text/event-stream at a small q gets an SSE stream", "text/event-stream;q=0.001", sseStream},
		{"Apollo's multipart Accept gets a multipart stream", acceptMultipart, multipartStream},
		{"multipart with subscriptionSpec in any case gets a multipart stream", `MULTIPART/Mixed;subscriptionSpec=1.0, application/json`, multipartStream},
		{"multipart with subscriptionSpec alone gets a multipart stream", `multipart/mixed;subscriptionSpec="1.0"`, multipartStream},
		{"multipart without subscriptionSpec is no stream: JSON", "multipart/mixed, application/json", asJSON},
		{"multipart without subscriptionSpec alone is 406", "multipart/mixed", notAcceptable},
		{"multipart at q=0 is no stream: JSON", `multipart/mixed;subscriptionSpec=1.0;q=0, application/json`, asJSON},
		{"multipart with subscriptionSpec=99 alone is 406", `multipart/mixed;subscriptionSpec=99`, notAcceptable},
		{"multipart with an empty subscriptionSpec alone is 406", `multipart/mixed;subscriptionSpec=""`, notAcceptable},
		{"multipart whose boundary is the word subscriptionSpec alone is 406", `multipart/mixed;boundary=subscriptionSpec`, notAcceptable},
		{"multipart with subscriptionSpec=1.0 in a parameter's value alone is 406", `multipart/mixed;boundary="subscriptionSpec=1.0"`, notAcceptable},
		{"multipart with subscriptionSpec=99 beside JSON is no stream: JSON", `multipart/mixed;subscriptionSpec=99, application/json`, asJSON},
		{"multipart with two subscriptionSpecs alone is 406", `multipart/mixed;subscriptionSpec=1.0;subscriptionSpec=99`, notAcceptable},
		{"multipart weighted above text/event-stream gets a multipart stream", `text/event-stream;q=0.5, multipart/mixed;subscriptionSpec=1.0`, multipartStream},
		{"text/event-stream weighted above multipart gets an SSE stream", `multipart/mixed;subscriptionSpec=1.0;q=0.4, text/event-stream;q=0.6`, sseStream},
		{"text/event-stream and multipart weighted alike get the first listed", `multipart/mixed;subscriptionSpec=1.0;q=0.5, text/event-stream;q=0.5`, multipartStream},
		{"text/event-stream at q=0 alone is 406", "text/event-stream;q=0", notAcceptable},
		{"text/event-stream at q=0.000 alone is 406", "text/event-stream;q=0.000", notAcceptable},
		{"text/event-stream at q=0 beside JSON is JSON", "text/event-stream;q=0, application/json", asJSON},
		{"*/* is GraphQL's own JSON, not a stream", "*/*", asGraphQLJSON},
		{"text/* is no stream and no JSON: 406", "text/*", notAcceptable},
		{"application/json alone is JSON", "application/json", asJSON},
		{"text/xml alone is 406", "text/xml", notAcceptable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.post(t, tt.accept, createdTitles, nil)
			defer r.close()
			switch tt.want {
			case sseStream:
				wantStreamHeaders(t, r, eventStreamCT)
				if got := r.event(t); got != sseOpen {
					t.Errorf("the stream begins %q; want %q", got, sseOpen)
				}
			case multipartStream:
				wantStreamHeaders(t, r, multipartType)
				if got := r.part(t) + r.part(t); got != multipartOpen {
					t.Errorf("the stream begins %q; want %q", got, multipartOpen)
				}
			case notAcceptable:
				media, res := jsonAnswer(t, r)
				if r.StatusCode != http.StatusNotAcceptable || media != asJSON || !strings.Contains(res.only(), "text/event-stream") || !strings.Contains(res.only(), "multipart/mixed;subscriptionSpec=1.0") {
					t.Errorf("%d %s %s; want 406 in application/json naming the media types, multipart with its one subscriptionSpec", r.StatusCode, media, res.only())
				}
			default:
				// A subscription refused over plain JSON names the transports that carry one.
				media, res := jsonAnswer(t, r)
				msg := res.only()
				if r.StatusCode != http.StatusBadRequest || media != tt.want ||
					!strings.Contains(msg, "text/event-stream") || !strings.Contains(msg, "multipart/mixed;subscriptionSpec=1.0") || !strings.Contains(msg, "WebSocket") {
					t.Errorf("%d %s %q; want 400 in %s naming WebSocket, text/event-stream and multipart/mixed;subscriptionSpec=1.0", r.StatusCode, media, msg, tt.want)
				}
			}
		})
	}
}

func TestQueriesAreStreamedOnlyToClientsThatTakeNoJSON(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	s.createPost(t, "first")
	const query = `{"query": "{ posts { title } }"}`
	// The query's cursor is that of the log's one event, its post's creation, which it reflects.
	cursor := s.api.cfg.Posts.Cursor(1)
	data := `{"data":{"posts":[{"title":"first"}]},"extensions":{"cursor":"` + cursor + `"}}`
	t.Run("a query to an SSE-only client is one next event and complete", func(t *testing.T) {
		r := s.post(t, "text/event-stream", query, nil)
		wantStreamHeaders(t, r, eventStreamCT)
		if got, want := r.rest(t), sseOpen+"event: next\ndata: "+data+"\n\n"+sseComplete; got != want {
			t.Errorf("the stream %q; want %q", got, want)
		}
	})
	t.Run("a query over GET to an SSE-only client is one next event and complete", func(t *testing.T) {
		r := s.get(t, "text/event-stream", "{ posts { title } }", nil)
		if got, want := r.rest(t), sseOpen+"event: next\ndata: "+data+"\n\n"+sseComplete; got != want {
			t.Errorf("the stream %q; want %q", got, want)
		}
	})
	t.Run("a query to a client that takes SSE and JSON is JSON", func(t *testing.T) {
		r := s.post(t, "text/event-stream, application/json", query, nil)
		if media, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.StatusCode != http.StatusOK || media != answer.ApplicationJSON {
			t.Errorf("%d %s; want 200 application/json", r.StatusCode, media)
		}
		if got := r.rest(t); got != data+"\n" {
			t.Errorf("body %q; want %q", got, data+"\n")
		}
	})
	t.Run("a query with Apollo's multipart Accept is JSON", func(t *testing.T) {
		r := s.post(t, acceptMultipart, query, nil)
		if media, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.StatusCode != http.StatusOK || media != answer.ApplicationJSON {
			t.Errorf("%d %s; want 200 application/json", r.StatusCode, media)
		}
		if got := r.rest(t); got != data+"\n" {
			t.Errorf("body %q; want %q", got, data+"\n")
		}
	})
	t.Run("a query to a multipart-only client is one part and the end", func(t *testing.T) {
		r := s.post(t, `multipart/mixed;subscriptionSpec=1.0`, query, nil)
		wantStreamHeaders(t, r, multipartType)
		if got, want := r.rest(t), multipartOpen+multipartPart+`{"payload":`+data+"}\r\n--graphql"+multipartEnd; got != want {
			t.Errorf("the stream %q; want %q", got, want)
		}
	})
}

// sseEventPattern is a next event with an id, its cursor.
var sseEventPattern = regexp.MustCompile(`^id: ([^\r\n]*)\nevent: next\ndata: ([^\r\n]*)\n\n$`)

// sseEvent splits a subscription's next event into its id and its payload's data and cursor.
func sseEvent(t *testing.T, event string) (id, data, cursor string) {
	t.Helper()
	m := sseEventPattern.FindStringSubmatch(event)
	if m == nil {
		t.Fatalf("%q; want id:, event: next and one data: line", event)
	}
	data, cursor = eventstest.SplitEvent(t, []byte(m[2]))
	return m[1], data, cursor
}

func TestSSEFraming(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	r := s.post(t, acceptSSE, createdBodies, nil)
	wantStreamHeaders(t, r, eventStreamCT)
	if got := r.event(t); got != sseOpen {
		t.Fatalf("the stream begins %q; want the comment %q", got, sseOpen)
	}
	s.waitForSubscribers(t, 1)

	t.Run("an event's id is the cursor in its payload's extensions", func(t *testing.T) {
		s.createPostOf(t, `{"title": "first", "body": "plain"}`)
		event := r.event(t)
		id, data, cursor := sseEvent(t, event)
		if id != cursor || data != `{"postCreated":{"title":"first","body":"plain"}}` {
			t.Errorf("id %q, data %s, cursor %q; want the id equal to the cursor", id, data, cursor)
		}
		if want := "id: " + cursor + "\nevent: next\ndata: {\"data\":" + data + ",\"extensions\":{\"cursor\":\"" + cursor + "\"}}\n\n"; event != want {
			t.Errorf("the event %q; want %q", event, want)
		}
	})
	t.Run("line breaks in a post are escaped in the one data line", func(t *testing.T) {
		// A title is one line (posts refuses a break in it); a body may hold every break.
		s.createPostOf(t, `{"title": "second", "body": "a\nb\rc\r\nd\u2028e\u2029f"}`)
		event := r.event(t)
		if strings.Count(event, "\n") != 4 || strings.ContainsAny(event, "\r\u2028\u2029") {
			t.Errorf("the event %q has a line break of its own in a line", event)
		}
		_, data, _ := sseEvent(t, event)
		if want := `{"postCreated":{"title":"second","body":"a\nb\rc\r\nd\u2028e\u2029f"}}`; data != want {
			t.Errorf("data %s; want %s", data, want)
		}
	})
}

// transportFailure is a multipart part that ends a stream for the transport's reason: a null
// payload and errors, whose one error it returns as "CODE: message".
func transportFailure(t *testing.T, part string) string {
	t.Helper()
	body, ok := strings.CutPrefix(part, multipartPart)
	if !ok {
		t.Fatalf("%q; want a part that begins %q", part, multipartPart)
	}
	body, ok = strings.CutSuffix(body, "\r\n--graphql")
	if !ok {
		t.Fatalf("%q; want a part with the boundary after it", part)
	}
	var p struct {
		Payload json.RawMessage `json:"payload"` // null: "null"; absent: nil
		graphQLResult
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil || string(p.Payload) != "null" {
		t.Fatalf("%q: %v; want a payload of null", body, err)
	}
	return p.only()
}

func TestMultipartFraming(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	r := s.post(t, acceptMultipart, createdTitles, nil)
	wantStreamHeaders(t, r, multipartType)
	var body strings.Builder // what the client read, for a MIME parser at the end
	read := func(got string) string { body.WriteString(got); return got }
	if got := read(r.part(t)); got != "\r\n--graphql" {
		t.Fatalf("the stream begins %q; want the first boundary", got)
	}
	if got := read(r.part(t)); got != multipartPart+"{}\r\n--graphql" {
		t.Fatalf("the first part %q; want the heartbeat {}", got)
	}
	s.waitForSubscribers(t, 1)

	s.createPost(t, "first")
	part := read(r.part(t))
	payload, ok := strings.CutPrefix(part, multipartPart+`{"payload":`)
	if !ok {
		t.Fatalf("the event's part %q; want {\"payload\":…}", part)
	}
	payload, ok = strings.CutSuffix(payload, "}\r\n--graphql")
	if !ok {
		t.Fatalf("the event's part %q; want the boundary after it", part)
	}
	if data, _ := eventstest.SplitEvent(t, []byte(payload)); data != `{"postCreated":{"title":"first"}}` {
		t.Errorf("the event's data %s", data)
	}

	s.api.hub.Close(errcode.New(errcode.ServiceRestart, "the site is gone"), 0)
	rest := read(r.rest(t))
	last, ok := strings.CutSuffix(rest, multipartEnd)
	if !ok {
		t.Fatalf("the stream ends %q; want the end boundary %q", rest, "--graphql--\r\n")
	}
	if got := transportFailure(t, last); got != "SERVICE_RESTART: the site is gone" {
		t.Errorf("the last part says %q; want SERVICE_RESTART", got)
	}

	t.Run("a MIME parser reads every part of the stream as JSON", func(t *testing.T) {
		mr := mimemultipart.NewReader(strings.NewReader(body.String()), "graphql")
		var parts []string
		for {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("after %d parts: %v", len(parts), err)
			}
			b, _ := io.ReadAll(p)
			var members map[string]json.RawMessage
			if err := json.Unmarshal(b, &members); err != nil || p.Header.Get("Content-Type") != "application/json; charset=utf-8" {
				t.Errorf("part %d: %v %q; want a JSON object", len(parts), p.Header, b)
			}
			names := slices.Sorted(maps.Keys(members))
			parts = append(parts, "{"+strings.Join(names, ",")+"}")
		}
		if got := strings.Join(parts, " "); got != "{} {payload} {errors,payload}" {
			t.Errorf("the parts hold %s; want the heartbeat, the event, the failure", got)
		}
	})
}

func TestClosingTheHubEndsTheStreams(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	sseClient := s.post(t, acceptSSE, createdTitles, nil)
	multipartClient := s.post(t, acceptMultipart, createdTitles, nil)
	sseClient.event(t)
	multipartClient.part(t)
	multipartClient.part(t)
	s.waitForSubscribers(t, 1) // one feed for both

	s.api.hub.Close(errcode.New(errcode.ServiceRestart, "the site is gone"), 0)
	t.Run("an SSE stream ends with no complete, for EventSource to reconnect", func(t *testing.T) {
		if got := sseClient.rest(t); got != "" {
			t.Errorf("after the close, %q; want the end and nothing else", got)
		}
	})
	t.Run("a multipart stream ends with a part that says SERVICE_RESTART", func(t *testing.T) {
		rest := multipartClient.rest(t)
		last, ok := strings.CutSuffix(rest, multipartEnd)
		if !ok {
			t.Fatalf("the stream ends %q; want the end boundary", rest)
		}
		if got := transportFailure(t, last); !strings.HasPrefix(got, "SERVICE_RESTART: ") {
			t.Errorf("the last part says %q; want SERVICE_RESTART", got)
		}
	})
	t.Run("Wait sees the streams gone, and their feeds let go", func(t *testing.T) {
		if !s.api.hub.Wait(5 * time.Second) {
			t.Fatal("Wait: the streams did not end in 5s")
		}
		if n := s.api.cfg.GraphQL.FeedClients(); n != 0 {
			t.Errorf("%d clients still take part in feeds; want 0", n)
		}
	})
	t.Run("a closed hub lets no stream in", func(t *testing.T) {
		r := s.post(t, acceptSSE, createdTitles, nil)
		if _, res := jsonAnswer(t, r); r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
			t.Errorf("%d, Retry-After %q, %s; want 503 with Retry-After", r.StatusCode, r.Header.Get("Retry-After"), res.only())
		}
	})
}

func TestRefusalsBeforeAStream(t *testing.T) {
	s := newWSServerWith(t, with(testSubscriptions, func(s *live.Subscriptions) { s.OriginPatterns = []string{"app.example.com"} }),
		with(testLimits, func(l *schema.Limits) { l.MaxFeedsPerClient = 1 }), posts.Config{})
	// plain checks a refusal in JSON: its status, media type, and its one error.
	plain := func(t *testing.T, r *streamResponse, status int, media, code, message string) {
		t.Helper()
		got, res := jsonAnswer(t, r)
		if r.StatusCode != status || got != media || !strings.HasPrefix(res.only(), code+": ") || !strings.Contains(res.only(), message) {
			t.Errorf("%d %s %q; want %d %s %s: …%s…", r.StatusCode, got, res.only(), status, media, code, message)
		}
	}
	t.Run("a mutation over GET to an SSE client is 405", func(t *testing.T) {
		r := s.get(t, acceptSSE, `mutation { createPost(input: {title: "t"}) { id } }`, http.Header{"X-Api-Key": {wsKey}})
		plain(t, r, http.StatusMethodNotAllowed, answer.ApplicationJSON, "BAD_REQUEST", "use POST")
		if r.Header.Get("Allow") != http.MethodPost {
			t.Errorf("Allow %q; want POST", r.Header.Get("Allow"))
		}
	})
	for _, tt := range []struct {
		name, accept, query string
		header              http.Header
	}{
		{"a mutation over GET with Last-Event-ID to an SSE client is 405", acceptSSE, `mutation { createPost(input: {title: "t"}) { id } }`, http.Header{"X-Api-Key": {wsKey}, "Last-Event-Id": {"not-a-cursor"}}},
		{"a mutation over GET with Last-Event-ID to a client of SSE and JSON is 405", acceptSSE + ", " + answer.ApplicationJSON, `mutation { createPost(input: {title: "t"}) { id } }`, http.Header{"X-Api-Key": {wsKey}, "Last-Event-Id": {"not-a-cursor"}}},
		{"a mutation over GET missing its variables is 405", acceptSSE, `mutation M($t: String!) { createPost(input: {title: $t}) { id } }`, http.Header{"X-Api-Key": {wsKey}}},
		{"a mutation over GET without credentials is 405", answer.ApplicationJSON, `mutation { createPost(input: {title: "t"}) { id } }`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := s.get(t, tt.accept, tt.query, tt.header)
			plain(t, r, http.StatusMethodNotAllowed, answer.ApplicationJSON, "BAD_REQUEST", "use POST")
			if r.Header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow %q; want POST", r.Header.Get("Allow"))
			}
		})
	}
	t.Run("a subscription over GET is streamed", func(t *testing.T) {
		r := s.get(t, acceptSSE, "subscription { postCreated { title } }", nil)
		if wantStreamHeaders(t, r, eventStreamCT); r.event(t) != sseOpen {
			t.Error("no stream")
		}
	})
	t.Run("a bad credential is 401 in JSON before any stream", func(t *testing.T) {
		r := s.post(t, acceptSSE, createdTitles, http.Header{"X-Api-Key": {"not-a-key"}})
		plain(t, r, http.StatusUnauthorized, answer.ApplicationJSON, "UNAUTHENTICATED", "")
		if r.Header.Get("WWW-Authenticate") == "" {
			t.Error("no WWW-Authenticate")
		}
	})
	t.Run("a bad credential to a multipart client is 401 in JSON", func(t *testing.T) {
		r := s.post(t, acceptMultipart, createdTitles, http.Header{"X-Api-Key": {"not-a-key"}})
		plain(t, r, http.StatusUnauthorized, answer.ApplicationJSON, "UNAUTHENTICATED", "")
	})
	t.Run("a foreign Origin is 403", func(t *testing.T) {
		r := s.post(t, acceptSSE, createdTitles, http.Header{"Origin": {"https://evil.example"}})
		plain(t, r, http.StatusForbidden, answer.ApplicationJSON, "FORBIDDEN", "allowed_origins")
	})
	for _, origin := range []string{"https://app.example.com", "http://" + strings.TrimPrefix(s.http, "http://")} {
		t.Run("the Origin "+origin+" is let in", func(t *testing.T) {
			r := s.post(t, acceptMultipart, createdTitles, http.Header{"Origin": {origin}})
			if wantStreamHeaders(t, r, multipartType); r.part(t) != "\r\n--graphql" {
				t.Error("no stream")
			}
		})
	}
	t.Run("a Last-Event-ID that is no cursor gets BAD_USER_INPUT and complete, nothing else", func(t *testing.T) {
		r := s.post(t, acceptSSE, createdTitles, http.Header{"Last-Event-Id": {"not-a-cursor"}})
		wantStreamHeaders(t, r, eventStreamCT)
		if got := r.event(t); got != sseOpen {
			t.Errorf("the stream begins %q", got)
		}
		if got := sseErrors(t, r.event(t)); !strings.HasPrefix(got, "BAD_USER_INPUT: ") {
			t.Errorf("the error %q; want BAD_USER_INPUT", got)
		}
		if got := r.rest(t); got != sseComplete {
			t.Errorf("then %q; want complete and the end", got)
		}
	})
	t.Run("a syntax error to an SSE-only client is a 200 stream with GRAPHQL_PARSE_FAILED", func(t *testing.T) {
		r := s.post(t, acceptSSE, `{"query": "subscription {"}`, nil)
		wantStreamHeaders(t, r, eventStreamCT)
		r.event(t)
		if got := sseErrors(t, r.event(t)); !strings.HasPrefix(got, "GRAPHQL_PARSE_FAILED: ") {
			t.Errorf("the error %q; want GRAPHQL_PARSE_FAILED", got)
		}
		if got := r.rest(t); got != sseComplete {
			t.Errorf("then %q; want complete and the end", got)
		}
	})
	t.Run("a syntax error to Apollo's multipart client is JSON, 200 in application/json", func(t *testing.T) {
		r := s.post(t, acceptMultipart, `{"query": "subscription {"}`, nil)
		plain(t, r, http.StatusOK, answer.ApplicationJSON, "GRAPHQL_PARSE_FAILED", "")
	})
	t.Run("a syntax error to a multipart client of GraphQL's own JSON is 400", func(t *testing.T) {
		r := s.post(t, `multipart/mixed;subscriptionSpec=1.0, application/graphql-response+json`, `{"query": "subscription {"}`, nil)
		plain(t, r, http.StatusBadRequest, answer.GraphQLResponseJSON, "GRAPHQL_PARSE_FAILED", "")
	})
	t.Run("a mutation with an Idempotency-Key to an SSE-only client is 400", func(t *testing.T) {
		r := s.post(t, acceptSSE, `{"query": "mutation { createPost(input: {title: \"t\"}) { id } }"}`, http.Header{"X-Api-Key": {wsKey}, "Idempotency-Key": {"k1"}})
		plain(t, r, http.StatusBadRequest, answer.ApplicationJSON, "BAD_REQUEST", "Idempotency-Key")
	})
	t.Run("a subscription past the client's distinct subscriptions is 429 before the stream", func(t *testing.T) {
		first := s.post(t, acceptSSE, createdTitles, http.Header{"X-Api-Key": {wsBobKey}})
		first.event(t)
		r := s.post(t, acceptSSE, `{"query": "subscription { postDeleted }"}`, http.Header{"X-Api-Key": {wsBobKey}})
		plain(t, r, http.StatusTooManyRequests, answer.ApplicationJSON, "TOO_MANY_SUBSCRIPTIONS", "max_distinct_subscriptions_per_client")
		same := s.post(t, acceptMultipart, createdTitles, http.Header{"X-Api-Key": {wsBobKey}})
		if wantStreamHeaders(t, same, multipartType); same.part(t) != "\r\n--graphql" {
			t.Error("the same subscription again, which shares the feed, was not streamed")
		}
	})
}

func TestAnSSEEventsIdIsNeverTheData(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	id := s.createPost(t, "not-a-cursor")
	// Aliases can spell the extensions member inside the data: {"data":{"extensions":{"cursor":…}}}.
	const aliased = `{ extensions: post(id: \"%s\") { cursor: title } }`
	t.Run("a query whose aliases spell extensions.cursor gets no id", func(t *testing.T) {
		r := s.post(t, acceptSSE, `{"query": "`+strings.Replace(aliased, "%s", id, 1)+`"}`, nil)
		cursor := s.api.cfg.Posts.Cursor(1)
		want := sseOpen + "event: next\ndata: {\"data\":{\"extensions\":{\"cursor\":\"not-a-cursor\"}},\"extensions\":{\"cursor\":\"" + cursor + "\"}}\n\n" + sseComplete
		if got := r.rest(t); got != want {
			t.Errorf("the stream %q; want %q", got, want)
		}
	})
	t.Run("a subscription whose aliases spell extensions.cursor has its event's cursor as id", func(t *testing.T) {
		r := s.post(t, acceptSSE, `{"query": "subscription { extensions: postCreated { cursor: title } }"}`, nil)
		r.event(t)
		s.waitForSubscribers(t, 1)
		s.createPost(t, "not-a-cursor-either")
		event := r.event(t)
		m := sseEventPattern.FindStringSubmatch(event)
		if m == nil {
			t.Fatalf("%q; want an event with an id", event)
		}
		if data, cursor := eventstest.SplitEvent(t, []byte(m[2])); m[1] != cursor || data != `{"extensions":{"cursor":"not-a-cursor-either"}}` {
			t.Errorf("id %q, data %s, cursor %q; want the event's cursor as id", m[1], data, cursor)
		}
	})
}

func TestStreamsAndWebSocketsShareOnePoolOfConnections(t *testing.T) {
	// A short keep-alive: a stream whose client left is found by its next write at the latest.
	s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) {
		s.MaxConnections, s.MaxConnectionsPerUser, s.KeepAlive = 10, 2, 500*time.Millisecond
	}))
	const ip = "192.0.2.1"
	ws := s.dial(t, transportWS, from(ip))
	ws.CloseRead(t.Context()) // answers the server's pings
	first := s.post(t, acceptSSE, createdTitles, from(ip))
	if wantStreamHeaders(t, first, eventStreamCT); first.event(t) != sseOpen {
		t.Fatal("one WebSocket open: the first stream was refused")
	}
	if n, _ := s.connectionsOf(addressClient(ip)); n != 2 {
		t.Errorf("a WebSocket and a stream count %d; want 2", n)
	}
	for transport, accept := range map[string]string{"SSE": acceptSSE, "multipart": acceptMultipart} {
		t.Run("a third connection over "+transport+" is 429 before the stream", func(t *testing.T) {
			r := s.post(t, accept, createdTitles, from(ip))
			_, res := jsonAnswer(t, r)
			if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" || !strings.HasPrefix(res.only(), "TOO_MANY_CONNECTIONS: ") || !strings.Contains(res.only(), "max_connections_per_user") {
				t.Errorf("%d, Retry-After %q, %q; want 429 with Retry-After, TOO_MANY_CONNECTIONS naming max_connections_per_user", r.StatusCode, r.Header.Get("Retry-After"), res.only())
			}
		})
	}
	t.Run("another address has its own share", func(t *testing.T) {
		r := s.post(t, acceptSSE, createdTitles, from("192.0.2.2"))
		if wantStreamHeaders(t, r, eventStreamCT); r.event(t) != sseOpen {
			t.Error("no stream")
		}
		r.close()
	})
	t.Run("a stream whose client leaves gives its place back", func(t *testing.T) {
		first.close()
		waitFor(t, "the stream's place to be given back", func() bool { n, _ := s.connectionsOf(addressClient(ip)); return n == 1 })
		r := s.post(t, acceptMultipart, createdTitles, from(ip))
		if wantStreamHeaders(t, r, multipartType); r.part(t) != "\r\n--graphql" {
			t.Error("no stream in the place given back")
		}
	})
	t.Run("a user's streams and WebSockets count together from any address", func(t *testing.T) {
		initialise(t, s.dial(t, transportWS, fromWithKey("198.51.100.1")), `{}`)
		r := s.post(t, acceptSSE, createdTitles, fromWithKey("198.51.100.2"))
		r.event(t)
		refused := s.post(t, acceptSSE, createdTitles, fromWithKey("198.51.100.3"))
		if _, res := jsonAnswer(t, refused); refused.StatusCode != http.StatusTooManyRequests {
			t.Errorf("alice's third connection: %d %q; want 429", refused.StatusCode, res.only())
		}
	})
}

func TestLastEventIDResumesAfterItsEvent(t *testing.T) {
	s := newWSServerWith(t, testSubscriptions, with(testLimits, func(l *schema.Limits) { l.MaxResume = 1000 }), posts.Config{})
	r := s.post(t, acceptSSE, createdTitles, nil)
	r.event(t)
	s.waitForSubscribers(t, 1)
	s.createPost(t, "one")
	s.createPost(t, "two")
	idOne, _, _ := sseEvent(t, r.event(t))
	idTwo, _, _ := sseEvent(t, r.event(t))
	r.close() // as EventSource that loses its connection

	again := s.post(t, acceptSSE, createdTitles, http.Header{"Last-Event-Id": {idOne}})
	if got := again.event(t); got != sseOpen {
		t.Fatalf("the stream begins %q", got)
	}
	if id, data, _ := sseEvent(t, again.event(t)); id != idTwo || data != `{"postCreated":{"title":"two"}}` {
		t.Errorf("after Last-Event-ID of one: id %q, %s; want two's event again, id %q", id, data, idTwo)
	}
	s.waitForSubscribers(t, 1)
	s.createPost(t, "three")
	if _, data, _ := sseEvent(t, again.event(t)); data != `{"postCreated":{"title":"three"}}` {
		t.Errorf("the live event after the replay: %s; want three", data)
	}
}

// streamEnds records the end of each stream the API logs ("graphql stream closed"): complete, or
// the code of the error it ended with.
type streamEnds struct{ logs *observer.ObservedLogs }

// logStreamEnds makes cfg log to a recorder of the streams' ends.
func logStreamEnds(cfg *Config) streamEnds {
	core, logs := observer.New(zap.InfoLevel)
	cfg.Logger = zap.New(core)
	return streamEnds{logs}
}

func (e streamEnds) all() []string {
	var ends []string
	for _, entry := range e.logs.FilterMessage("graphql stream closed").All() {
		ends = append(ends, entry.ContextMap()["end"].(string))
	}
	return ends
}

// TestAClientThatStopsReadingIsCutOffAsTooSlow has a client stop reading its stream while big
// events keep coming: once the loopback's buffers and its send queue are full, its stream is cut
// off at once, within a second rather than the write's deadline (deadline: 24 s with the
// default ws_keepalive of testSubscriptions), and logged as TOO_SLOW; the client reads what the
// loopback kept for it, then a response broken off, with no end of its protocol.
func TestAClientThatStopsReadingIsCutOffAsTooSlow(t *testing.T) {
	tests := []struct {
		name, accept  string
		open, openEnd string // the stream's first bytes, and how they end
		end           string // the protocol's end, which a stream cut off does not have
		event         string // what each event begins with
	}{
		{"an SSE stream is cut off with no complete, for EventSource to resume", acceptSSE, sseOpen, "\n\n", "event: complete", "event: next"},
		{"a multipart stream is cut off with no last part", acceptMultipart, multipartOpen, "{}\r\n--graphql", multipartEnd, `{"payload":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ends streamEnds
			s, _ := newStreamServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.MaxSubscriptions, s.SendQueue = 1, 1 }), testLimits,
				func(cfg *Config) { ends = logStreamEnds(cfg) })
			r := s.post(t, tt.accept, createdBodies, nil)
			if got := r.until(t, tt.openEnd); got != tt.open {
				t.Fatalf("the stream begins %q", got)
			}
			s.waitForSubscribers(t, 1)
			// The client reads nothing now: events of some 300 KB each fill the connection's
			// buffers, then the stream's queue of one (or two come while one is written). Each
			// is written once the feed has taken the one before, so that it is the client, not
			// the feed (slower under the race detector than the writes), that falls behind.
			written := 0
			for ; s.open() == 1 && !s.streamEnding(); written++ {
				if written == 500 {
					t.Fatalf("%d events of 300 KB written to a client that reads none, and its stream goes on", written)
				}
				s.createBigPost(t, fmt.Sprint(written))
				waitFor(t, "the feed to take the event", func() bool { return s.broker.Backlog() == 0 })
			}
			decided := time.Now()
			waitFor(t, "the stream to end", func() bool { return s.open() == 0 })
			took := time.Since(decided)
			t.Logf("found too slow after %d events, ended %v after", written, took.Round(time.Millisecond))
			if !race.Enabled && took > time.Second {
				t.Errorf("the stream ended %v after it was found too slow; want within 1s", took)
			}
			got, err := io.ReadAll(r.body)
			if err == nil || strings.HasSuffix(string(got), tt.end) {
				t.Errorf("the response ends %.100q, %v; want it broken off", got[max(0, len(got)-100):], err)
			}
			if n := strings.Count(string(got), tt.event); n >= written {
				t.Errorf("the client got %d events of the %d written; want fewer, the stream ended", n, written)
			}
			waitFor(t, "the stream's end to be logged", func() bool { return len(ends.all()) == 1 })
			if got := ends.all(); got[0] != "TOO_SLOW" {
				t.Errorf("the stream ended %q; want TOO_SLOW", got)
			}
		})
	}
}

// streamEnding says whether a stream of the hub is ending, its end set (the stream's Ending).
func (s *wsServer) streamEnding() bool {
	for _, c := range s.api.hub.Open() {
		if st, ok := c.(interface{ Ending() bool }); ok && st.Ending() {
			return true
		}
	}
	return false
}

func TestKeepAlive(t *testing.T) {
	t.Run("an idle SSE stream gets a comment every ws_keepalive", func(t *testing.T) {
		s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.KeepAlive = 20 * time.Millisecond }))
		r := s.post(t, acceptSSE, createdTitles, nil)
		for i := range 3 { // the open, then keep-alives with no event
			if got := r.event(t); got != ":\n\n" {
				t.Fatalf("comment %d: %q; want %q", i, got, ":\n\n")
			}
		}
	})
}

func TestAStreamEndsWhenTheServerExits(t *testing.T) {
	t.Run("an SSE stream ends at its next keep-alive, with no complete", func(t *testing.T) {
		var exiting atomic.Bool
		s, _ := newStreamServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.KeepAlive = 20 * time.Millisecond }), testLimits,
			func(cfg *Config) { cfg.Exiting = exiting.Load })
		r := s.post(t, acceptSSE, createdTitles, nil)
		r.event(t)
		if got := r.event(t); got != ":\n\n" { // a keep-alive: the stream goes on while the server does
			t.Fatalf("%q; want a keep-alive", got)
		}
		exiting.Store(true)
		if got := r.rest(t); strings.ReplaceAll(got, ":\n\n", "") != "" {
			t.Errorf("after exiting, %q; want the end, with no more than keep-alives before", got)
		}
	})
	t.Run("the shutdown of the server ends its streams at once", func(t *testing.T) {
		var exiting atomic.Bool
		s, srv := newStreamServer(t, testSubscriptions, testLimits, func(cfg *Config) { cfg.Exiting = exiting.Load })
		sseClient := s.post(t, acceptSSE, createdTitles, nil)
		multipartClient := s.post(t, acceptMultipart, createdTitles, nil)
		sseClient.event(t)
		multipartClient.until(t, "{}\r\n--graphql")
		exiting.Store(true)
		shutdown := make(chan error, 1)
		go func() { shutdown <- srv.Config.Shutdown(t.Context()) }()
		if got := sseClient.rest(t); got != "" {
			t.Errorf("the SSE stream: %q; want the end and nothing else", got)
		}
		last, ok := strings.CutSuffix(multipartClient.rest(t), multipartEnd)
		if !ok {
			t.Fatalf("the multipart stream ends %q; want the end boundary", last)
		}
		if got := transportFailure(t, last); !strings.HasPrefix(got, "SHUTTING_DOWN: ") {
			t.Errorf("the last part says %q; want SHUTTING_DOWN", got)
		}
		if err := <-shutdown; err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
}

func TestAStreamEndsWhenItsTokenExpires(t *testing.T) {
	idp := authtest.NewProvider()
	t.Cleanup(idp.Close)
	keys := auth.NewJWKS(idp.URL, time.Hour, idp.Client(), zap.NewNop())
	keys.Start()
	t.Cleanup(keys.Close)
	tokens, err := auth.NewTokens(auth.TokenConfig{Keys: []*auth.JWKS{keys}, Issuers: []string{authtest.Issuer}, Audiences: []string{authtest.Audience},
		UserClaim: "sub", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newStreamServer(t, testSubscriptions, testLimits, func(cfg *Config) { cfg.Auth = &auth.Authenticator{Tokens: tokens} })
	// bearer is a token that expires in a second or two (exp is in whole seconds).
	bearer := func() http.Header {
		claims := authtest.Claims("carol")
		claims["exp"] = time.Now().Add(2 * time.Second).Unix()
		return http.Header{"Authorization": {"Bearer " + idp.Token(claims, "RS256")}}
	}
	const expired = "UNAUTHENTICATED: Forbidden: the token has expired"
	t.Run("over SSE a next event with UNAUTHENTICATED, then complete", func(t *testing.T) {
		t.Parallel()
		r := s.post(t, acceptSSE, createdTitles, bearer())
		if got := r.event(t); got != sseOpen {
			t.Fatalf("the stream begins %q", got)
		}
		if got := sseErrors(t, r.event(t)); got != expired {
			t.Errorf("%q; want %q", got, expired)
		}
		if got := r.rest(t); got != sseComplete {
			t.Errorf("then %q; want complete and the end", got)
		}
	})
	t.Run("over multipart a payload with UNAUTHENTICATED, then the end", func(t *testing.T) {
		t.Parallel()
		r := s.post(t, acceptMultipart, createdTitles, bearer())
		r.until(t, "{}\r\n--graphql")
		want := multipartPart + `{"payload":{"errors":[{"message":"Forbidden: the token has expired","extensions":{"code":"UNAUTHENTICATED"}}]}}` + "\r\n--graphql" + multipartEnd
		if got := r.rest(t); got != want {
			t.Errorf("then %q; want %q", got, want)
		}
	})
}

// holdingWriter is a handler's writer in front of the API that keeps the response to itself, as
// cache-handler's does for what it may store: it neither flushes nor says what it wraps.
type holdingWriter struct{ http.ResponseWriter }

func TestAStreamBehindAWriterThatCannotFlushIsRefused(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.api.Route(r).ServeHTTP(holdingWriter{w}, r)
	}))
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/graphql?query="+url.QueryEscape("subscription { postCreated { id } }"), nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), `"code":"INTERNAL_SERVER_ERROR"`) {
		t.Errorf("%d %s; want 500 INTERNAL_SERVER_ERROR rather than a stream that opens and ends", res.StatusCode, body)
	}
	if _, _, got := s.api.hub.Counted(""); got != 0 {
		t.Errorf("%d connections held after the refusal; want 0", got)
	}
}
