//go:build integration

// Subscriptions streamed over plain HTTP (GraphQL over SSE, Apollo's multipart protocol) against
// a Caddy process: what their clients see of the limits, slow readers, metrics, logs and tokens.
package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/auth/authtest"
	"github.com/postsedge/caddy-posts/internal/race"
)

// The two framings of a subscription streamed over HTTP.
const (
	overSSE       = "sse"
	overMultipart = "multipart"
)

// apolloMultipartAccept is what Apollo Client's HttpLink sends for a subscription.
const apolloMultipartAccept = `multipart/mixed;subscriptionSpec="1.0", application/json`

// errStreamCut is a stream whose response ended with no end of its protocol (SSE's complete,
// multipart's closing boundary): what an SSE client reconnects after.
var errStreamCut = errors.New("the response ended with no end of its protocol")

// streamedSub is a subscription streamed over HTTP, read as its client reads it.
type streamedSub struct {
	kind string
	res  *http.Response
	r    *bufio.Reader
	// keepAlives counts SSE's comments and multipart's {} heartbeats read after the opening.
	keepAlives int
}

// streamedEvent is what next reads: a result, a transport error, or the end.
type streamedEvent struct {
	id       string          // SSE: the event's id, its cursor
	result   json.RawMessage // a next event's execution result (SSE's data, multipart's payload)
	errors   json.RawMessage // multipart: the errors of a part whose payload is null
	complete bool            // SSE's complete event; multipart's closing boundary
}

// streamRefused is a subscription answered with another status than 200, before any stream.
type streamRefused struct {
	status     int
	retryAfter string
	body       string
}

func (r *streamRefused) Error() string {
	return fmt.Sprintf("answered %d (Retry-After %q): %s", r.status, r.retryAfter, r.body)
}

// openStreamed subscribes with query at base (http://host:port) through client, over SSE (a GET,
// as EventSource sends) or multipart (a POST, as Apollo Client sends), with the header pairs
// given, and returns once the stream is open: SSE's first comment or multipart's first
// heartbeat read. A refusal is a *streamRefused.
func openStreamed(ctx context.Context, client *http.Client, kind, base, query string, header ...string) (*streamedSub, error) {
	var req *http.Request
	var err error
	switch kind {
	case overSSE:
		req, err = http.NewRequestWithContext(ctx, "GET", base+"/graphql?query="+url.QueryEscape(query), nil)
		if err == nil {
			req.Header.Set("Accept", "text/event-stream")
		}
	case overMultipart:
		body, _ := json.Marshal(map[string]string{"query": query})
		req, err = http.NewRequestWithContext(ctx, "POST", base+"/graphql", bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Accept", apolloMultipartAccept)
			req.Header.Set("Content-Type", "application/json")
		}
	default:
		panic("no framing " + kind)
	}
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return nil, &streamRefused{res.StatusCode, res.Header.Get("Retry-After"), string(body)}
	}
	s := &streamedSub{kind: kind, res: res, r: bufio.NewReader(res.Body)}
	wantType := map[string]string{overSSE: "text/event-stream", overMultipart: `multipart/mixed;boundary="graphql";subscriptionSpec=1.0`}[kind]
	if got := res.Header.Get("Content-Type"); !strings.HasPrefix(got, wantType) {
		s.close()
		return nil, fmt.Errorf("a %s stream of Content-Type %q", kind, got)
	}
	if err := s.readOpening(); err != nil {
		s.close()
		return nil, fmt.Errorf("the opening of a %s stream: %w", kind, err)
	}
	return s, nil
}

// readOpening reads what a stream begins with.
func (s *streamedSub) readOpening() error {
	if s.kind == overSSE {
		block, err := s.sseBlock()
		if err != nil {
			return err
		}
		if len(block) != 1 || !strings.HasPrefix(block[0], ":") {
			return fmt.Errorf("the stream began with %q; want a comment", block)
		}
		return nil
	}
	if err := s.expect("\r\n--graphql"); err != nil {
		return err
	}
	part, end, err := s.multipartPart()
	if err != nil {
		return err
	}
	if end || string(part) != "{}" {
		return fmt.Errorf("the first part is %s (the end: %v); want the heartbeat {}", part, end)
	}
	return nil
}

// next reads until the next event the client would act on, past keep-alives. At the end of the
// response with no end of the protocol, it returns errStreamCut.
func (s *streamedSub) next() (streamedEvent, error) {
	if s.kind == overSSE {
		for {
			block, err := s.sseBlock()
			if err != nil {
				return streamedEvent{}, err
			}
			var ev streamedEvent
			var event string
			var data []string
			for _, line := range block {
				field, value, _ := strings.Cut(line, ":")
				value = strings.TrimPrefix(value, " ")
				switch field {
				case "": // a comment
				case "id":
					ev.id = value
				case "event":
					event = value
				case "data":
					data = append(data, value)
				default:
					return streamedEvent{}, fmt.Errorf("an event with the field %q: %q", field, block)
				}
			}
			switch {
			case event == "" && data == nil:
				s.keepAlives++
				continue
			case event == "complete":
				ev.complete = true
			case event == "next":
				ev.result = json.RawMessage(strings.Join(data, "\n"))
			default:
				return streamedEvent{}, fmt.Errorf("an event %q", block)
			}
			return ev, nil
		}
	}
	for {
		part, end, err := s.multipartPart()
		switch {
		case err != nil:
			return streamedEvent{}, err
		case end:
			return streamedEvent{complete: true}, nil
		case string(part) == "{}":
			s.keepAlives++
			continue
		}
		var p struct {
			Payload *json.RawMessage
			Errors  json.RawMessage
		}
		if err := json.Unmarshal(part, &p); err != nil {
			return streamedEvent{}, fmt.Errorf("a part that is not JSON: %q", part)
		}
		switch {
		case p.Payload == nil || string(*p.Payload) == "null":
			if p.Errors == nil {
				return streamedEvent{}, fmt.Errorf("a part with neither a payload nor errors: %s", part)
			}
			return streamedEvent{errors: p.Errors}, nil
		case p.Errors != nil:
			return streamedEvent{}, fmt.Errorf("a part with both a payload and errors: %s", part)
		}
		return streamedEvent{result: *p.Payload}, nil
	}
}

// sseBlock reads the lines of one event, up to the blank line that dispatches it.
func (s *streamedSub) sseBlock() ([]string, error) {
	var block []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && line == "" && block == nil {
				return nil, errStreamCut
			}
			// Its start only: the line of a post of 40,000 characters filled the tests' logs.
			return nil, fmt.Errorf("an event cut off (%q, %d bytes of a line starting %.80q): %w", block, len(line), line, err)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if block == nil {
				continue
			}
			return block, nil
		}
		block = append(block, line)
	}
}

// multipartPart reads what follows a boundary: a part's body and the next boundary, or the
// closing "--" (end). The response's end right after a boundary is errStreamCut.
func (s *streamedSub) multipartPart() (body []byte, end bool, err error) {
	after := make([]byte, 2)
	if _, err := io.ReadFull(s.r, after); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, false, errStreamCut
		}
		return nil, false, err
	}
	switch string(after) {
	case "--":
		return nil, true, s.expect("\r\n")
	case "\r\n":
	default:
		return nil, false, fmt.Errorf("a boundary followed by %q", after)
	}
	for { // the part's headers
		line, err := s.r.ReadString('\n')
		if err != nil {
			return nil, false, fmt.Errorf("a part's headers cut off: %w", err)
		}
		if line == "\r\n" {
			break
		}
		if !strings.EqualFold(line, "content-type: application/json; charset=utf-8\r\n") {
			return nil, false, fmt.Errorf("a part's header %q", line)
		}
	}
	const delimiter = "\r\n--graphql"
	for !bytes.HasSuffix(body, []byte(delimiter)) {
		c, err := s.r.ReadByte()
		if err != nil {
			return nil, false, fmt.Errorf("a part cut off after %q: %w", body, err)
		}
		body = append(body, c)
	}
	return body[:len(body)-len(delimiter)], false, nil
}

// expect reads want, or fails.
func (s *streamedSub) expect(want string) error {
	got := make([]byte, len(want))
	if _, err := io.ReadFull(s.r, got); err != nil {
		if errors.Is(err, io.EOF) {
			return errStreamCut
		}
		return err
	}
	if string(got) != want {
		return fmt.Errorf("read %q; want %q", got, want)
	}
	return nil
}

// close leaves the stream, as a client that goes away does.
func (s *streamedSub) close() { s.res.Body.Close() }

// titleOf is the title of a postCreated result.
func titleOf(result json.RawMessage) (string, error) {
	var r struct {
		Data struct{ PostCreated struct{ Title string } }
	}
	if err := json.Unmarshal(result, &r); err != nil || r.Data.PostCreated.Title == "" {
		return "", fmt.Errorf("a result with no postCreated title: %s", result)
	}
	return r.Data.PostCreated.Title, nil
}

// errorCodes are the codes of a GraphQL errors list.
func errorCodes(errs json.RawMessage) []string {
	var list []struct {
		Message    string
		Extensions struct{ Code string }
	}
	_ = json.Unmarshal(errs, &list)
	var codes []string
	for _, e := range list {
		codes = append(codes, e.Extensions.Code)
	}
	return codes
}

// postCreatedTitles is the subscription the tests stream.
const postCreatedTitles = "subscription { postCreated { title } }"

// streamClient is a client whose requests last as long as their context: no timeout.
func streamClient() *http.Client { return &http.Client{Transport: &http.Transport{}} }

// h2cClient is streamClient over HTTP/2 with prior knowledge, on a site of protocols h1 h2c.
func h2cClient() *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

// waitForEvent reads s until a result whose title is want, within d; keep-alives and other
// posts' events are passed.
func waitForEvent(s *streamedSub, want string, d time.Duration) error {
	got := make(chan error, 1)
	go func() {
		for {
			ev, err := s.next()
			if err != nil {
				got <- err
				return
			}
			if ev.result == nil {
				got <- fmt.Errorf("%+v before the event %q", ev, want)
				return
			}
			if title, err := titleOf(ev.result); err != nil || title == want {
				got <- err
				return
			}
		}
	}()
	select {
	case err := <-got:
		return err
	case <-time.After(d):
		s.close()
		return fmt.Errorf("no event %q in %v", want, d)
	}
}

// dialWS opens a graphql-transport-ws connection to base (http://host:port) with the header
// pairs given, as the shares test counts them: at the upgrade.
func dialWS(ctx context.Context, base string, header ...string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: h})
}

// TestWebSocketsAndStreamsShareOnePoolOfConnections: a client's share of connections
// (max_connections_per_user) and the server's (max_connections) count WebSockets, SSE streams
// and multipart streams together, so that a client cannot take three times its share by using
// each transport.
func TestWebSocketsAndStreamsShareOnePoolOfConnections(t *testing.T) {
	ownProcesses(t)
	shared, full, dir := freePort(t), freePort(t), t.TempDir()
	p := startProcess(t, fmt.Sprintf(`{
	admin off
	persist_config off
	grace_period 1s
	servers {
		trusted_proxies static 127.0.0.1/32
	}
}
http://:%d {
	posts {
		data_dir %s
		api_key process-key alice
		max_connections_per_user 3
	}
}
http://:%d {
	posts {
		data_dir %s
		api_key process-key alice
		max_connections 3
	}
}
`, shared, dir, full, dir), shared)
	fullURL := fmt.Sprintf("http://127.0.0.1:%d", full)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	client := streamClient()

	// hold opens one connection of each kind to base, each with the header pairs of its own.
	hold := func(t *testing.T, base string, headers [3][]string) (closeStream func(kind string)) {
		t.Helper()
		ws, _, err := dialWS(ctx, base, headers[0]...)
		if err != nil {
			t.Fatalf("the WebSocket: %v", err)
		}
		t.Cleanup(func() { ws.CloseNow() })
		streams := map[string]*streamedSub{}
		for i, kind := range []string{overSSE, overMultipart} {
			s, err := openStreamed(ctx, client, kind, base, postCreatedTitles, headers[i+1]...)
			if err != nil {
				t.Fatalf("the %s stream: %v", kind, err)
			}
			t.Cleanup(s.close)
			streams[kind] = s
		}
		return func(kind string) { streams[kind].close() }
	}
	// refusedEach checks that one more connection of each kind, with header, is refused with
	// status, Retry-After and (for 429) the limit's name.
	refusedEach := func(t *testing.T, base string, status int, header ...string) {
		t.Helper()
		ws, res, err := dialWS(ctx, base, header...)
		if err == nil {
			ws.CloseNow()
			t.Errorf("a fourth connection, a WebSocket, was let in; want %d", status)
		} else if res == nil || res.StatusCode != status || res.Header.Get("Retry-After") == "" {
			t.Errorf("a fourth connection, a WebSocket: %v (%v); want %d with Retry-After", err, res, status)
		}
		for _, kind := range []string{overSSE, overMultipart} {
			s, err := openStreamed(ctx, client, kind, base, postCreatedTitles, header...)
			var refused *streamRefused
			switch {
			case err == nil:
				s.close()
				t.Errorf("a fourth connection, a %s stream, was let in; want %d", kind, status)
			case !errors.As(err, &refused) || refused.status != status || refused.retryAfter == "":
				t.Errorf("a fourth connection, a %s stream: %v; want %d with Retry-After", kind, err, status)
			case status == http.StatusTooManyRequests && !strings.Contains(refused.body, "max_connections_per_user"):
				t.Errorf("the refusal of a %s stream does not name the limit: %s", kind, refused.body)
			}
		}
	}
	from := func(ip string, more ...string) []string { return append([]string{"X-Forwarded-For", ip}, more...) }
	key := []string{"Authorization", "ApiKey process-key"}

	t.Run("a user holding a WebSocket, an SSE and a multipart stream from three addresses gets 429 on a fourth of any kind", func(t *testing.T) {
		closeStream := hold(t, p.url, [3][]string{from("192.0.2.1", key...), from("192.0.2.2", key...), from("192.0.2.3", key...)})
		refusedEach(t, p.url, http.StatusTooManyRequests, from("192.0.2.4", key...)...)
		// A stream that ends gives its place back, to a connection of another kind.
		closeStream(overSSE)
		closed := time.Now()
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			var s *streamedSub
			if s, err = openStreamed(ctx, client, overMultipart, p.url, postCreatedTitles, from("192.0.2.4", key...)...); err == nil {
				s.close()
				break
			}
		}
		if err != nil {
			t.Errorf("after the SSE stream ended, a multipart stream: %v; want it let in", err)
		}
		t.Logf("let in %v after the SSE stream ended", time.Since(closed))
	})
	t.Run("an anonymous client holding one of each kind gets 429 on a fourth, and another address is let in", func(t *testing.T) {
		hold(t, p.url, [3][]string{from("203.0.113.7"), from("203.0.113.7"), from("203.0.113.7")})
		refusedEach(t, p.url, http.StatusTooManyRequests, from("203.0.113.7")...)
		s, err := openStreamed(ctx, client, overSSE, p.url, postCreatedTitles, from("203.0.113.8")...)
		if err != nil {
			t.Fatalf("another address: %v", err)
		}
		s.close()
	})
	t.Run("max_connections 3 counts one of each kind from three clients: a fourth client gets 503", func(t *testing.T) {
		hold(t, fullURL, [3][]string{from("198.51.100.1"), from("198.51.100.2"), from("198.51.100.3")})
		refusedEach(t, fullURL, http.StatusServiceUnavailable, from("198.51.100.4")...)
	})
}

// streamGauge waits until caddy_posts_streams{interface=kind} at url reads want.
func streamGauge(t *testing.T, url, kind string, want float64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, families := scrape(t, url)
		if got := sample(families, "caddy_posts_streams", "interface="+kind); got == want {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("caddy_posts_streams{interface=%q} is %v, want %v", kind, got, want)
		}
	}
}

// TestMetricsAndAccessLogOfStreams: an SSE and a multipart subscription show in the metrics as
// requests of their interface and as open streams while they last, and each has its access log
// line with its request id, its user and its operation type, and a line of its end.
func TestMetricsAndAccessLogOfStreams(t *testing.T) {
	ownProcesses(t)
	admin, port := freePort(t), freePort(t)
	p := startProcess(t, metricsConfig(admin, port), port)
	adminMetrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", admin)
	_, before := scrape(t, adminMetrics)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	streams := map[string]*streamedSub{}
	for _, kind := range []string{overSSE, overMultipart} {
		s, err := openStreamed(ctx, streamClient(), kind, p.url, "subscription Titles { postCreated { title } }", "Authorization", "ApiKey process-key")
		if err != nil {
			t.Fatal(err)
		}
		defer s.close()
		streams[kind] = s
	}
	for kind := range streams {
		streamGauge(t, adminMetrics, kind, 1)
	}
	if _, err := p.create(keyed(), "counted"); err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		if err := waitForEvent(s, "counted", 5*time.Second); err != nil {
			t.Fatalf("the %s subscriber: %v", s.kind, err)
		}
		s.close()
	}
	for kind := range streams {
		streamGauge(t, adminMetrics, kind, 0)
	}
	_, after := scrape(t, adminMetrics)
	for kind := range streams {
		for _, name := range []string{"caddy_posts_requests_total", "caddy_posts_request_duration_seconds"} {
			labels := []string{"interface=" + kind, "operation=subscription", "code=OK"}
			if got := sample(after, name, labels...) - sample(before, name, labels...); got != 1 {
				t.Errorf("%s%v moved by %v, want 1", name, labels, got)
			}
		}
	}

	t.Run("each stream has its access log line, with its request id, user and operation type, and a line of its end", func(t *testing.T) {
		type line struct {
			Msg     string
			UUID    string
			UserID  string `json:"user_id"`
			Type    string `json:"graphql_operation_type"`
			Name    string `json:"graphql_operation_name"`
			Status  int
			Iface   string `json:"interface"`
			Events  int    `json:"events_sent"`
			End     string `json:"end"`
			Request struct {
				URI     string
				Headers map[string][]string
			}
		}
		waitUntil(t, "the end of both streams is logged", func() bool {
			return strings.Count(p.out.String(), `"msg":"graphql stream closed"`) == 2
		})
		var access []line
		ends := map[string]line{}
		for text := range strings.Lines(p.out.String()) {
			var l line
			if json.Unmarshal([]byte(text), &l) != nil {
				continue
			}
			switch {
			case l.Msg == "handled request" && (l.Request.URI == "/graphql" || strings.HasPrefix(l.Request.URI, "/graphql?")):
				access = append(access, l)
			case l.Msg == "graphql stream closed":
				ends[l.UUID] = l
			}
		}
		if len(access) != 2 {
			t.Fatalf("%d access log lines of /graphql, want 2:\n%s", len(access), p.out)
		}
		for _, l := range access {
			if l.Status != http.StatusOK || l.UUID == "" || l.UserID != "alice" || l.Type != "subscription" || l.Name != "Titles" {
				t.Errorf("an access log line of a stream: %+v; want status 200, a uuid, user_id alice, graphql_operation_type subscription and its name", l)
			}
			end, ok := ends[l.UUID]
			if !ok {
				t.Errorf("no line of the end of the stream of uuid %q", l.UUID)
				continue
			}
			kind := overMultipart
			if strings.HasPrefix(l.Request.URI, "/graphql?") {
				kind = overSSE
			}
			if end.UserID != "alice" || end.Iface != kind || end.Events != 1 || end.End != "client_left" {
				t.Errorf("the end of a %s stream: %+v; want alice's, of interface %s, 1 event sent, ended as the client left", kind, end, kind)
			}
		}
	})
}

// TestAnExpiringTokenEndsTheStreams: a stream let in by a bearer token ends when the token
// expires, with UNAUTHENTICATED as the operation's error (as a WebSocket's subscription ends), so
// that the client gets a fresh token rather than reconnect with the same one.
func TestAnExpiringTokenEndsTheStreams(t *testing.T) {
	ownProcesses(t)
	port := freePort(t)
	p := startProcess(t, fmt.Sprintf("{\n\tadmin off\n\tpersist_config off\n}\nhttp://:%d {\n\tposts {\n\t\tdata_dir %s\n\t\tjwks_url %s/jwks.json\n\t\tleeway 0s\n\t\tapi_key process-key alice\n\t}\n}\n",
		port, t.TempDir(), idp().URL), port)
	claims := authtest.Claims("carol")
	expires := time.Now().Add(5 * time.Second).Truncate(time.Second) // exp is in whole seconds
	claims["exp"] = expires.Unix()
	bearer := "Bearer " + idp().Token(claims, "RS256")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	streams := map[string]*streamedSub{}
	for _, kind := range []string{overSSE, overMultipart} {
		s, err := openStreamed(ctx, streamClient(), kind, p.url, postCreatedTitles, "Authorization", bearer)
		if err != nil {
			t.Fatal(err)
		}
		defer s.close()
		streams[kind] = s
	}
	if _, err := p.create(keyed(), "before the expiry"); err != nil {
		t.Fatal(err)
	}
	var ends sync.WaitGroup
	for kind, s := range streams {
		ends.Go(func() {
			if err := waitForEvent(s, "before the expiry", 5*time.Second); err != nil {
				t.Errorf("the %s subscriber before the expiry: %v", kind, err)
				return
			}
			ev, err := s.next()
			ended := time.Now()
			var refused struct {
				Errors []struct {
					Message    string
					Extensions struct{ Code string }
				}
			}
			if err != nil || json.Unmarshal(ev.result, &refused) != nil || len(refused.Errors) != 1 ||
				refused.Errors[0].Extensions.Code != "UNAUTHENTICATED" || !strings.Contains(refused.Errors[0].Message, "expired") {
				t.Errorf("the %s stream at the token's expiry: %+v (%s) %v; want a result with the error UNAUTHENTICATED, the token has expired", kind, ev, ev.result, err)
				return
			}
			if last, err := s.next(); err != nil || !last.complete {
				t.Errorf("the %s stream after its error: %+v %v; want its end (complete)", kind, last, err)
			}
			t.Logf("the %s stream ended %v after the token's expiry", kind, ended.Sub(expires).Round(time.Millisecond))
			if ended.Before(expires) || !race.Enabled && ended.After(expires.Add(2*time.Second)) {
				t.Errorf("the %s stream ended %v after the token's expiry; want within 2s, not before", kind, ended.Sub(expires))
			}
		})
	}
	ends.Wait()
}

// TestAStreamClientThatStopsReadingIsEnded: a client that opens an SSE stream and then reads
// nothing, while large events flow, is ended by the server (never waited for), over HTTP/1.1 and
// HTTP/2, and another subscriber gets every event meanwhile, promptly.
func TestAStreamClientThatStopsReadingIsEnded(t *testing.T) {
	ownProcesses(t)
	admin, port := freePort(t), freePort(t)
	p := startProcess(t, slowReadersConfig(admin, port, t.TempDir(), "\t\tws_keepalive 2s\n"), port)
	adminMetrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", admin)
	const query = "subscription { postCreated { title body } }"
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// The client that stops reading: its request, then nothing read, on a socket whose receive
	// buffer is small (smallBuffers).
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	stalled, err := smallBuffers.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	fmt.Fprintf(stalled, "GET /graphql?query=%s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", url.QueryEscape(query), addr)
	streamGauge(t, adminMetrics, overSSE, 1)
	// And over HTTP/2, a stream that its client never reads: the client takes what the stream's
	// flow-control window lets the server send (4 MiB for Go's client), then the server waits.
	stalled2, err := openStreamed(ctx, h2cClient(), overSSE, p.url, query)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled2.close()

	reader, err := openStreamed(ctx, streamClient(), overSSE, p.url, query)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.close()
	type arrival struct {
		title string
		at    time.Time
	}
	arrivals := make(chan arrival, 1024)
	go func() {
		defer close(arrivals)
		for {
			ev, err := reader.next()
			if err != nil || ev.result == nil {
				return
			}
			title, err := titleOf(ev.result)
			if err != nil {
				t.Error(err)
				return
			}
			arrivals <- arrival{title, time.Now()}
		}
	}()

	// 200 posts of 40,000 characters: 8 MB to each subscriber, past what the kernel buffers for
	// the one that reads nothing and what the server queues for it.
	const posts, size = 200, 40_000
	body := strings.Repeat("x", size)
	client := keyed()
	written := map[string]time.Time{}
	var order []string
	start := time.Now()
	var stalledEnded time.Duration
	for i := range posts {
		title := fmt.Sprint("large ", i)
		p.createWithBody(t, client, title, body)
		written[title], order = time.Now(), append(order, title)
		if _, families := scrape(t, adminMetrics); stalledEnded == 0 && sample(families, "caddy_posts_streams", "interface="+overSSE) == 1 {
			stalledEnded = time.Since(start)
		}
	}
	streamGauge(t, adminMetrics, overSSE, 1) // the reader's alone
	if stalledEnded == 0 {
		stalledEnded = time.Since(start)
	}
	t.Logf("the two clients that stopped reading were ended within %v of the first write (%d MB written to each subscriber)",
		stalledEnded.Round(time.Millisecond), posts*size/1_000_000)

	t.Run("the HTTP/1.1 client that stopped reading was ended: its connection is closed", func(t *testing.T) {
		stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := io.Copy(io.Discard, stalled) // what the kernel kept for it, then the server's close
		if err != nil {
			t.Fatalf("after %d bytes: %v; want the server to have closed the connection", n, err)
		}
		t.Logf("it had been sent %d KiB before its end", n>>10)
		if n >= posts*size {
			t.Errorf("it was sent %d bytes: every event, so it was not held back", n)
		}
	})
	t.Run("the HTTP/2 client that stopped reading was ended: its response ends", func(t *testing.T) {
		read := make(chan error, 1)
		var n int64
		go func() {
			var err error
			n, err = io.Copy(io.Discard, stalled2.r)
			read <- err
		}()
		select {
		case err := <-read:
			t.Logf("it had been sent %d KiB before its end (%v)", n>>10, err)
			if n >= posts*size {
				t.Errorf("it was sent %d bytes: every event, so it was not held back", n)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("its response had not ended 10s after the writes")
		}
	})
	t.Run("the other subscriber got every event, in order, promptly", func(t *testing.T) {
		var slowest time.Duration
		for i, want := range order {
			select {
			case a, ok := <-arrivals:
				if !ok {
					t.Fatalf("its stream ended after %d events", i)
				}
				if a.title != want {
					t.Fatalf("event %d is %q; want %q", i, a.title, want)
				}
				slowest = max(slowest, a.at.Sub(written[want]))
			case <-time.After(10 * time.Second):
				t.Fatalf("no event %d (%q) in 10s", i, want)
			}
		}
		t.Logf("its slowest event came %v after its write's 201", slowest.Round(time.Millisecond))
		if !race.Enabled && slowest > time.Second {
			t.Errorf("an event came %v after its write; want within 1s", slowest)
		}
	})
}

// slowReadersConfig is the Caddyfile of the tests of clients that stop reading: metrics on the
// admin API at port admin, HTTP/1.1 and h2c on port, an embedded store in dir, and the posts
// block's further lines extra.
func slowReadersConfig(admin, port int, dir, extra string) string {
	return fmt.Sprintf("{\n\tadmin 127.0.0.1:%d\n\tpersist_config off\n\tmetrics\n\tservers {\n\t\tprotocols h1 h2c\n\t}\n}\n"+
		"http://:%d {\n\tposts {\n\t\tdata_dir %s\n\t\tapi_key process-key alice\n%s\t}\n}\n", admin, port, dir, extra)
}
