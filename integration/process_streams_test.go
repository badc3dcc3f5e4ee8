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
	"testing"
	"time"

	"github.com/coder/websocket"
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
			return nil, fmt.Errorf("an event cut off (%q, %q): %w", block, line, err)
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
	key := []string{"X-API-Key", "process-key"}

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
