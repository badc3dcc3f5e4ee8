//go:build integration

// REST, GraphQL and both streaming transports of subscriptions (GraphQL over SSE, Apollo's
// multipart) on an HTTPS site served by Caddy's internal CA, over HTTP/1.1, HTTP/2 and HTTP/3
// (issue 26), with the protocol of every response asserted: many streams share one HTTP/2 or
// HTTP/3 connection, and an SSE stream resumes over HTTP/2 with Last-Event-ID.
package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/postsedge/caddy-posts/events"
)

// postCreatedDocument is the one subscription of these tests: every stream of it, whatever its
// transport or protocol, joins the witness's feed (feeds are shared by document).
const postCreatedDocument = "subscription { postCreated { id title userId } }"

// multipartAccept is what Apollo Client's HttpLink sends for a subscription.
const multipartAccept = `multipart/mixed;subscriptionSpec="1.0",application/json`

// TestRESTGraphQLAndStreamsOverHTTP1HTTP2AndHTTP3 runs one HTTPS site with h1, h2 and h3 and
// a client of each protocol alone: REST, a GraphQL query and mutation, an SSE and a multipart
// subscription that each get the event of a post written once their first bytes came; then 50
// SSE streams on one HTTP/2 and on one HTTP/3 connection, and an SSE stream resumed over HTTP/2.
func TestRESTGraphQLAndStreamsOverHTTP1HTTP2AndHTTP3(t *testing.T) {
	port := freePort(t)
	p, roots := startHTTPSProcess(t, fmt.Sprintf(`{
	admin off
	persist_config off
	grace_period 5s
	skip_install_trust
	auto_https disable_redirects
	servers {
		protocols h1 h2 h3
	}
}
https://localhost:%d {
	tls internal
	posts {
		api_key process-key alice
		# The checks of many streams follow one another: the streams of one still closing
		# do not count against the next (the default is 100 a user).
		max_connections_per_user 1000
	}
}
`, port), port)

	// The witness subscribes first, over HTTP/1.1, and sees every write of the test, in order.
	// Every stream opened later joins its feed, which is subscribed to the events by then, and
	// a stream's first bytes come once it has joined: a write made after them reaches it.
	witness := openWitness(t, p.url, newProtocolClient(t, "HTTP/1.1", roots))

	for _, name := range []string{"HTTP/1.1", "HTTP/2", "HTTP/3"} {
		t.Run("REST, GraphQL, SSE and multipart subscriptions, and REST's change stream, are served over "+name, func(t *testing.T) {
			c := newProtocolClient(t, name, roots)
			created := c.createPost(t, p.url, "REST over "+name)
			witness.await(t, created.ID)
			var got postView
			c.getJSON(t, p.url+"/posts/"+created.ID, &got)
			if got != created {
				t.Errorf("GET /posts/%s: %+v, want %+v", created.ID, got, created)
			}
			var page []postView
			c.getJSON(t, p.url+"/posts?limit=2", &page)
			if len(page) == 0 || page[0] != created {
				t.Errorf("GET /posts?limit=2: %+v, want the post just created first", page)
			}

			var query struct{ Post postView }
			c.graphQL(t, p.url, `query Post($id: ID!) { post(id: $id) { id title userId } }`, map[string]any{"id": created.ID}, &query)
			if query.Post != created {
				t.Errorf("the query post: %+v, want %+v", query.Post, created)
			}
			var mutation struct{ CreatePost postView }
			title := "GraphQL over " + name
			c.graphQL(t, p.url, `mutation Create($title: String!) { createPost(input: {title: $title}) { id title userId } }`, map[string]any{"title": title}, &mutation)
			if mutation.CreatePost.Title != title || mutation.CreatePost.UserID != "alice" {
				t.Errorf("createPost: %+v, want the title %q by alice", mutation.CreatePost, title)
			}
			witness.await(t, mutation.CreatePost.ID)
			c.getJSON(t, p.url+"/posts/"+mutation.CreatePost.ID, &got)
			if got != mutation.CreatePost {
				t.Errorf("GET /posts/%s after createPost: %+v, want %+v", got.ID, got, mutation.CreatePost)
			}

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			s := c.openSSE(ctx, t, p.url, "")
			post := c.createPost(t, p.url, "SSE over "+name)
			s.expect(t, post)
			witness.await(t, post.ID)
			s.close()

			changes := c.openChanges(ctx, t, p.url)
			post = c.createPost(t, p.url, "REST's change stream over "+name)
			changes.expectCreated(t, post)
			witness.await(t, post.ID)
			changes.close()

			m := c.openMultipart(ctx, t, p.url)
			post = c.createPost(t, p.url, "multipart over "+name)
			m.expect(t, post)
			witness.await(t, post.ID)
			m.close()

			if c.major > 1 { // a stream and the writes beside it are streams of one connection
				if n := c.dials.Load(); n != 1 {
					t.Errorf("%d connections over %s, want 1", n, name)
				}
			}
		})
	}

	for _, name := range []string{"HTTP/2", "HTTP/3"} {
		t.Run("50 SSE streams share one "+name+" connection and each gets the event", func(t *testing.T) {
			const streams = 50
			c := newProtocolClient(t, name, roots)
			var page []postView
			c.getJSON(t, p.url+"/posts?limit=1", &page) // the connection, before the streams race for one
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			var (
				mu    sync.Mutex
				conns = map[net.Conn]bool{} // HTTP/2: those the streams were sent on
			)
			trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
				mu.Lock()
				conns[info.Conn] = true
				mu.Unlock()
			}}
			opened := make([]*sseStream, streams)
			var wg sync.WaitGroup
			for i := range opened {
				wg.Go(func() {
					s, err := c.startSSE(httptrace.WithClientTrace(ctx, trace), p.url, "")
					if err != nil {
						t.Error(err)
						return
					}
					opened[i] = s
					t.Cleanup(s.close)
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			post := c.createPost(t, p.url, fmt.Sprintf("one event to %d streams over %s", streams, name))
			for _, s := range opened {
				wg.Go(func() {
					if _, err := s.receive(post); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			witness.await(t, post.ID)
			for _, s := range opened {
				s.close()
			}
			if n := c.dials.Load(); n != 1 {
				t.Errorf("%d %s connections for %d streams, want 1", n, name, streams)
			}
			if c.major == 2 && len(conns) != 1 {
				t.Errorf("the streams went over %d connections, want 1", len(conns))
			}
		})
	}

	t.Run("an SSE stream resumes over HTTP/2 with Last-Event-ID, from the event after it", func(t *testing.T) {
		c := newProtocolClient(t, "HTTP/2", roots)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		first := c.openSSE(ctx, t, p.url, "")
		one := c.createPost(t, p.url, "resume 1")
		cursor := first.expect(t, one)
		witness.await(t, one.ID)
		first.close()
		var later []postView
		for i := 2; i <= 5; i++ {
			later = append(later, c.createPost(t, p.url, fmt.Sprint("resume ", i)))
			witness.await(t, later[len(later)-1].ID)
		}
		// As EventSource reconnects: a GET with the id of the last event it got.
		resumed := c.openSSE(ctx, t, p.url, cursor)
		for _, post := range later {
			resumed.expect(t, post)
		}
		live := c.createPost(t, p.url, "resume 6, after the replay")
		resumed.expect(t, live)
		witness.await(t, live.ID)
		resumed.close()
	})
}

// startHTTPSProcess runs `caddy run` with caddyfile, whose site is https://localhost:port with
// a certificate of Caddy's internal CA, and waits until the site answers. It returns the
// process and a pool of that CA's root, which Caddy writes under its data dir.
func startHTTPSProcess(t *testing.T, caddyfile string, port int) (*caddyProcess, *x509.CertPool) {
	t.Helper()
	p := &caddyProcess{t: t, out: &lockedBuffer{}, done: make(chan error, 1), url: fmt.Sprintf("https://localhost:%d", port)}
	p.cmd = caddyCommand(t, p.out, "run", "--config", writeConfig(t, caddyfile), "--adapter", "caddyfile")
	var dataHome string
	for _, kv := range p.cmd.Env { // the last is the one the process sees
		if v, ok := strings.CutPrefix(kv, "XDG_DATA_HOME="); ok {
			dataHome = v
		}
	}
	root := filepath.Join(dataHome, "caddy", "pki", "authorities", "local", "root.crt")
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			out := p.out.String()
			t.Logf("the output of caddy on %s, its last 16 KiB:\n%s", p.url, out[max(0, len(out)-16<<10):])
		}
	})
	var lastErr error
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-p.done:
			t.Fatalf("caddy run exited (%v) before serving:\n%s", err, p.out)
		default:
		}
		if pem, err := os.ReadFile(root); err != nil {
			lastErr = err
		} else if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(pem) {
			lastErr = fmt.Errorf("no certificate in %s yet", root)
		} else {
			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
			res, err := client.Get(p.url + "/posts?limit=1")
			client.CloseIdleConnections()
			if err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					return p, pool
				}
				err = fmt.Errorf("status %d", res.StatusCode)
			}
			lastErr = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("caddy run did not serve HTTPS in 20s (%v):\n%s", lastErr, p.out)
		}
	}
}

// protocolClient sends the API key of the process sites over one protocol only, and counts the
// connections it opens.
type protocolClient struct {
	name  string
	major int // the ProtoMajor every response must have
	http  *http.Client
	dials *atomic.Int64
}

// newProtocolClient is a client of name (HTTP/1.1, HTTP/2 or HTTP/3) trusting roots.
func newProtocolClient(t *testing.T, name string, roots *x509.CertPool) *protocolClient {
	t.Helper()
	c := &protocolClient{name: name, dials: new(atomic.Int64)}
	tlsConfig := &tls.Config{RootCAs: roots}
	var transport http.RoundTripper
	switch name {
	case "HTTP/1.1", "HTTP/2":
		var protocols http.Protocols
		if name == "HTTP/2" {
			c.major = 2
			protocols.SetHTTP2(true) // and not HTTP/1.1: a server without h2 fails the request
		} else {
			c.major = 1
			protocols.SetHTTP1(true)
		}
		dialer := &net.Dialer{Timeout: 5 * time.Second}
		tr := &http.Transport{
			TLSClientConfig: tlsConfig,
			Protocols:       &protocols,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c.dials.Add(1)
				return dialer.DialContext(ctx, network, addr)
			},
		}
		t.Cleanup(tr.CloseIdleConnections)
		transport = tr
	case "HTTP/3":
		c.major = 3
		tr := &http3.Transport{
			TLSClientConfig: tlsConfig,
			Dial: func(ctx context.Context, addr string, tlsConfig *tls.Config, quicConfig *quic.Config) (*quic.Conn, error) {
				c.dials.Add(1)
				return quic.DialAddrEarly(ctx, addr, tlsConfig, quicConfig)
			},
		}
		t.Cleanup(func() { tr.Close() })
		transport = tr
	default:
		t.Fatalf("no client for %s", name)
	}
	c.http = &http.Client{Transport: keyTransport{transport}}
	return c
}

// do sends req and checks the protocol and the status of its response.
func (c *protocolClient) do(t *testing.T, req *http.Request, status int) *http.Response {
	t.Helper()
	res, err := c.send(req, status)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// send is do, for a goroutine of a test: it returns what is wrong.
func (c *protocolClient) send(req *http.Request, status int) (*http.Response, error) {
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s over %s: %v", req.Method, req.URL.Path, c.name, err)
	}
	if res.ProtoMajor != c.major || res.StatusCode != status {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return nil, fmt.Errorf("%s %s over %s: %d %s over %s, want %d", req.Method, req.URL.Path, c.name, res.StatusCode, body, res.Proto, status)
	}
	return res, nil
}

// requestTimeout bounds a request that is not a stream.
const requestTimeout = 10 * time.Second

// postView is a post as the tests compare it.
type postView struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	UserID string `json:"userId"`
}

// readJSON decodes the body of res, a JSON response with contentType, into v.
func readJSON(t *testing.T, res *http.Response, contentType string, v any) {
	t.Helper()
	defer res.Body.Close()
	if got := res.Header.Get("Content-Type"); got != contentType {
		t.Errorf("%s: Content-Type %q, want %q", res.Request.URL.Path, got, contentType)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", res.Request.URL.Path, err)
	}
}

// createPost POSTs a post with title through REST.
func (c *protocolClient) createPost(t *testing.T, base, title string) postView {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/posts", strings.NewReader(fmt.Sprintf(`{"title": %q}`, title)))
	req.Header.Set("Content-Type", "application/json")
	var post postView
	readJSON(t, c.do(t, req, http.StatusCreated), "application/json", &post)
	if len(post.ID) != 24 || post.Title != title || post.UserID != "alice" {
		t.Fatalf("POST /posts over %s: %+v, want an id and the title %q by alice", c.name, post, title)
	}
	return post
}

// getJSON GETs url, which answers 200 with JSON, into v.
func (c *protocolClient) getJSON(t *testing.T, url string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	readJSON(t, c.do(t, req, http.StatusOK), "application/json", v)
}

// graphQL POSTs an operation with no errors to /graphql, and decodes its data into data.
func (c *protocolClient) graphQL(t *testing.T, base, query string, variables map[string]any, data any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": variables})
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/graphql-response+json, application/json")
	var res struct {
		Data   json.RawMessage
		Errors []json.RawMessage
	}
	readJSON(t, c.do(t, req, http.StatusOK), "application/graphql-response+json; charset=utf-8", &res)
	if len(res.Errors) > 0 {
		t.Fatalf("%s over %s: errors %s", query, c.name, res.Errors)
	}
	if err := json.Unmarshal(res.Data, data); err != nil {
		t.Fatalf("%s over %s: data %s: %v", query, c.name, res.Data, err)
	}
}

// streamHeaders says what is wrong with the headers every stream response carries.
func (c *protocolClient) streamHeaders(res *http.Response, contentType string) error {
	for _, h := range [][2]string{{"Content-Type", contentType}, {"Cache-Control", "no-store"}, {"Incremental", "?1"}} {
		if got := res.Header.Get(h[0]); got != h[1] {
			return fmt.Errorf("a stream over %s: %s %q, want %q", c.name, h[0], got, h[1])
		}
	}
	return nil
}

// sseStream is a GraphQL over SSE subscription to postCreatedDocument, read with a reader of
// text/event-stream's lines.
type sseStream struct {
	c    *protocolClient
	res  *http.Response
	read *bufio.Reader
}

// sseEvent is one event of a stream, or a comment.
type sseEvent struct {
	id, event, data string
	comment         bool
}

// openSSE subscribes to postCreatedDocument over SSE: with POST, or as EventSource does, with
// GET and the last event's id when lastEventID is not empty. It returns once the stream's
// first bytes came: the comment the server writes once the subscription has joined its feed.
func (c *protocolClient) openSSE(ctx context.Context, t *testing.T, base, lastEventID string) *sseStream {
	t.Helper()
	s, err := c.startSSE(ctx, base, lastEventID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

// startSSE is openSSE, for a goroutine of a test: it returns what is wrong.
func (c *protocolClient) startSSE(ctx context.Context, base, lastEventID string) (*sseStream, error) {
	var req *http.Request
	if lastEventID == "" {
		body, _ := json.Marshal(map[string]string{"query": postCreatedDocument})
		req, _ = http.NewRequestWithContext(ctx, "POST", base+"/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	} else {
		req, _ = http.NewRequestWithContext(ctx, "GET", base+"/graphql?query="+url.QueryEscape(postCreatedDocument), nil)
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	return c.stream(req)
}

// openChanges opens REST's change stream of the posts (GET /posts as text/event-stream) and
// returns once its first bytes came.
func (c *protocolClient) openChanges(ctx context.Context, t *testing.T, base string) *sseStream {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/posts", nil)
	s, err := c.stream(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

// stream sends req, asking for text/event-stream, and returns the stream once its headers and
// its first bytes (a comment) came.
func (c *protocolClient) stream(req *http.Request) (*sseStream, error) {
	req.Header.Set("Accept", "text/event-stream")
	res, err := c.send(req, http.StatusOK)
	if err != nil {
		return nil, err
	}
	s := &sseStream{c: c, res: res, read: bufio.NewReader(res.Body)}
	if err := c.streamHeaders(res, "text/event-stream; charset=utf-8"); err != nil {
		s.close()
		return nil, err
	}
	if e, err := s.next(); err != nil || !e.comment || e.event != "" || e.data != "" {
		s.close()
		return nil, fmt.Errorf("the first bytes of an SSE stream over %s: %+v, %v; want a comment", c.name, e, err)
	}
	return s, nil
}

// next reads the next event or comment.
func (s *sseStream) next() (sseEvent, error) {
	var (
		e    sseEvent
		data []string
		any  bool
	)
	for {
		line, err := s.read.ReadString('\n')
		if err != nil {
			return e, err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" { // the end of an event
			if any {
				e.data = strings.Join(data, "\n")
				return e, nil
			}
			continue
		}
		any = true
		if strings.HasPrefix(line, ":") {
			e.comment = true
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			e.id = value
		case "event":
			e.event = value
		case "data":
			data = append(data, value)
		}
	}
}

// expect reads the next event but keep-alives, which must be the postCreated of post with its
// cursor as the event's id, and returns the cursor.
func (s *sseStream) expect(t *testing.T, post postView) string {
	t.Helper()
	cursor, err := s.receive(post)
	if err != nil {
		t.Fatal(err)
	}
	return cursor
}

// receive is expect, for a goroutine of a test: it returns what is wrong.
func (s *sseStream) receive(post postView) (string, error) {
	e, err := s.next()
	for err == nil && e.comment {
		e, err = s.next()
	}
	if err != nil {
		return "", fmt.Errorf("reading the SSE stream over %s for %q: %v", s.c.name, post.Title, err)
	}
	var result struct {
		Data       struct{ PostCreated postView }
		Errors     []json.RawMessage
		Extensions struct{ Cursor string }
	}
	if err := json.Unmarshal([]byte(e.data), &result); err != nil {
		return "", fmt.Errorf("an SSE event over %s: %q: %v", s.c.name, e.data, err)
	}
	if e.event != "next" || result.Data.PostCreated != post || len(result.Errors) > 0 {
		return "", fmt.Errorf("an SSE event over %s: %+v, want next with the post %+v", s.c.name, e, post)
	}
	if e.id == "" || e.id != result.Extensions.Cursor {
		return "", fmt.Errorf("an SSE event over %s: id %q, extensions.cursor %q; want the same cursor", s.c.name, e.id, result.Extensions.Cursor)
	}
	return e.id, nil
}

func (s *sseStream) close() { s.res.Body.Close() }

// expectCreated reads the next event of a change stream but keep-alives, which must be the
// created event of post, with a cursor as its id.
func (s *sseStream) expectCreated(t *testing.T, post postView) {
	t.Helper()
	e, err := s.next()
	for err == nil && e.comment {
		e, err = s.next()
	}
	var got postView
	if err != nil || json.Unmarshal([]byte(e.data), &got) != nil || e.event != "created" || got != post || len(e.id) != events.CursorLength {
		t.Fatalf("the change stream over %s: %+v, %v; want created, the post %+v, a cursor as its id", s.c.name, e, err, post)
	}
}

// multipartStream is an Apollo multipart subscription to postCreatedDocument, read part by part
// as each comes: mime/multipart holds a part back until the boundary after it is complete,
// which the next part completes, seconds later.
type multipartStream struct {
	c    *protocolClient
	res  *http.Response
	read *bufio.Reader
}

// multipartDelimiter precedes every part and the end.
const multipartDelimiter = "\r\n--graphql"

// openMultipart subscribes to postCreatedDocument as Apollo Client's HttpLink does, and returns
// once the first part, the heartbeat {}, came.
func (c *protocolClient) openMultipart(ctx context.Context, t *testing.T, base string) *multipartStream {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"query": postCreatedDocument})
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", multipartAccept)
	res := c.do(t, req, http.StatusOK)
	m := &multipartStream{c: c, res: res, read: bufio.NewReader(res.Body)}
	t.Cleanup(m.close)
	if err := c.streamHeaders(res, `multipart/mixed;boundary="graphql";subscriptionSpec=1.0`); err != nil {
		t.Fatal(err)
	}
	if preamble, err := m.until(multipartDelimiter); err != nil || len(preamble) > 0 {
		t.Fatalf("the start of a multipart stream over %s: %q, %v; want the delimiter", c.name, preamble, err)
	}
	if part, err := m.next(); err != nil || part != "{}" {
		t.Fatalf("the first part of a multipart stream over %s: %q, %v; want {}", c.name, part, err)
	}
	return m
}

// until reads up to delimiter, and returns what came before it.
func (m *multipartStream) until(delimiter string) ([]byte, error) {
	var b []byte
	for !bytes.HasSuffix(b, []byte(delimiter)) {
		c, err := m.read.ReadByte()
		if err != nil {
			return b, err
		}
		b = append(b, c)
	}
	return b[:len(b)-len(delimiter)], nil
}

// next reads the next part, and checks its header; the end of the stream is io.EOF.
func (m *multipartStream) next() (string, error) {
	if end, err := m.read.Peek(2); err != nil {
		return "", err
	} else if string(end) == "--" {
		return "", io.EOF
	}
	part, err := m.until(multipartDelimiter)
	if err != nil {
		return "", err
	}
	header, body, ok := bytes.Cut(part, []byte("\r\n\r\n"))
	if !ok || !strings.EqualFold(string(header), "\r\ncontent-type: application/json; charset=utf-8") {
		return "", fmt.Errorf("a part of %q", part)
	}
	return string(body), nil
}

// expect reads the next part but heartbeats, which must be the payload of post's postCreated.
func (m *multipartStream) expect(t *testing.T, post postView) {
	t.Helper()
	part, err := m.next()
	for err == nil && part == "{}" {
		part, err = m.next()
	}
	if err != nil {
		t.Fatalf("reading the multipart stream over %s for %s: %v", m.c.name, post.Title, err)
	}
	var got struct {
		Payload *struct {
			Data       struct{ PostCreated postView }
			Errors     []json.RawMessage
			Extensions struct{ Cursor string }
		}
		Errors []json.RawMessage
	}
	if err := json.Unmarshal([]byte(part), &got); err != nil {
		t.Fatalf("a part over %s: %q: %v", m.c.name, part, err)
	}
	if got.Payload == nil || got.Payload.Data.PostCreated != post || len(got.Payload.Errors)+len(got.Errors) > 0 || got.Payload.Extensions.Cursor == "" {
		t.Fatalf("a part over %s: %s, want the payload of the post %+v with its cursor", m.c.name, part, post)
	}
}

func (m *multipartStream) close() { m.res.Body.Close() }

// witness is an SSE subscriber that stays for the whole test and must see every post created,
// in order.
type witness struct {
	events chan sseEvent // closed when the stream ends
	ended  error
}

// openWitness opens the witness's stream with c and writes probes until one reaches it: the
// first subscriber of a document starts a feed whose goroutine subscribes to the events, which
// it may do after the stream's first bytes went out (a write made at once after them missed
// 11 of 200 such streams, measured), so a probe may be missed; a second a probe.
func openWitness(t *testing.T, base string, c *protocolClient) *witness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := c.openSSE(ctx, t, base, "")
	w := &witness{events: make(chan sseEvent, 1000)}
	reading := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-reading
	})
	go func() {
		defer close(reading)
		defer close(w.events)
		for {
			e, err := s.next()
			if err != nil {
				w.ended = err
				return
			}
			if !e.comment {
				w.events <- e
			}
		}
	}()
	var probes []string
	for range 20 {
		probes = append(probes, c.createPost(t, base, "probe").ID)
		select {
		case e, ok := <-w.events:
			if !ok {
				t.Fatalf("the witness's stream ended: %v", w.ended)
			}
			i := slices.Index(probes, postOf(t, e).ID)
			if i < 0 {
				t.Fatalf("the witness got %+v, want a probe's event", e)
			}
			w.await(t, probes[i+1:]...)
			if i > 0 {
				t.Logf("the witness's feed missed %d probe(s) before it was subscribed to the events", i)
			}
			return w
		case <-time.After(time.Second): // another probe
		}
	}
	t.Fatal("the witness got no event of 20 probes a second apart")
	return nil
}

// await checks that the next events of the witness are the postCreated of ids, in this order.
func (w *witness) await(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		select {
		case e, ok := <-w.events:
			if !ok {
				t.Fatalf("the witness's stream ended: %v", w.ended)
			}
			if got := postOf(t, e).ID; got != id {
				t.Fatalf("the witness got the event of %s, want %s's", got, id)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the witness got no event of %s in 10s", id)
		}
	}
}

// postOf is the post of e, a postCreated event.
func postOf(t *testing.T, e sseEvent) postView {
	t.Helper()
	var result struct {
		Data struct{ PostCreated postView }
	}
	if err := json.Unmarshal([]byte(e.data), &result); err != nil || e.event != "next" || result.Data.PostCreated.ID == "" {
		t.Fatalf("the witness's event %+v, want a postCreated (%v)", e, err)
	}
	return result.Data.PostCreated
}
