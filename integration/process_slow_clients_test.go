//go:build integration

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	dto "github.com/prometheus/client_model/go"

	"github.com/postsedge/caddy-posts/events/eventstest"
	"github.com/postsedge/caddy-posts/internal/race"
)

// The server timeouts of the test below: the production values of docs/operations.md, shortened. As there,
// write outlasts read_body, so that the 400 for a body cut off can still be written.
const (
	slowReadHeader = 1 * time.Second
	slowReadBody   = 2 * time.Second
	slowWrite      = 3 * time.Second
	slowIdle       = 2 * time.Second
)

// slowClientsConfig is a Caddyfile with two posts sites on one data_dir: the one on guarded has
// the server timeouts of the production example (docs/operations.md), shortened; the one on open has
// Caddy's defaults.
func slowClientsConfig(guarded, open int, dir string) string {
	return fmt.Sprintf(`{
	admin off
	persist_config off
	grace_period 1s
	servers :%d {
		timeouts {
			read_header %s
			read_body %s
			write %s
			idle %s
		}
	}
}
http://:%d {
	posts {
		data_dir %s
		api_key process-key alice
		ws_keepalive 500ms
	}
}
http://:%d {
	posts {
		data_dir %s
		api_key process-key alice
	}
}
`, guarded, slowReadHeader, slowReadBody, slowWrite, slowIdle, guarded, dir, open, dir)
}

// trickled is what became of a request sent a byte a second.
type trickled struct {
	closedAfter time.Duration // from the dial to the server's close; 0 if it had not closed
	status      string        // the status line the server answered, if any
	err         error         // of the dial or the first write
}

// trickle dials addr, sends head at once and then tail a byte a second, the first at once, and
// reads what the server answers, until the server closes the connection or limit has passed
// since the dial.
func trickle(addr, head, tail string, limit time.Duration) trickled {
	start := time.Now()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return trickled{err: err}
	}
	defer conn.Close()
	conn.SetReadDeadline(start.Add(limit))
	closed := make(chan trickled, 1)
	go func() {
		answer, err := io.ReadAll(conn) // until the server closes, or the deadline
		if errors.Is(err, os.ErrDeadlineExceeded) {
			closed <- trickled{}
			return
		}
		status, _, _ := strings.Cut(string(answer), "\r\n")
		closed <- trickled{closedAfter: time.Since(start), status: status}
	}()
	if _, err := io.WriteString(conn, head+tail[:1]); err != nil {
		return trickled{err: err}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 1; ; i++ {
		select {
		case result := <-closed:
			return result
		case <-tick.C:
			if i < len(tail) {
				conn.Write([]byte{tail[i]}) // fails once the server has closed: the reader says so
			}
		}
	}
}

// slowBody is a POST /posts to addr whose headers come at once and whose body comes a byte a
// second.
func slowBody(addr string) (head, body string) {
	body = `{"title": "sent one byte a second"}`
	return fmt.Sprintf("POST /posts HTTP/1.1\r\nHost: %s\r\nAuthorization: ApiKey process-key\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		addr, len(body)), body
}

// steadyClient creates and lists posts through p, as a client with a good connection does,
// until over is closed, and returns how many requests it made and what failed.
func steadyClient(p *caddyProcess, over <-chan struct{}) (requests int, slowest time.Duration, failures []string) {
	client := keyed()
	for i := 0; ; i++ {
		select {
		case <-over:
			return
		case <-time.After(50 * time.Millisecond):
		}
		start := time.Now()
		requests += 2
		if id, err := p.create(client, fmt.Sprint("a normal post ", i)); err != nil || id == "" {
			failures = append(failures, fmt.Sprintf("create: %q, %v", id, err))
		}
		res, err := client.Get(p.url + "/posts?limit=5")
		if err != nil {
			failures = append(failures, err.Error())
			continue
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			failures = append(failures, "GET /posts: "+res.Status)
		}
		slowest = max(slowest, time.Since(start))
	}
}

// idleCloseAfter makes one request on a connection of its own and returns how long after the answer
// the server closed the connection, or an error if it had not within limit.
func idleCloseAfter(addr string, limit time.Duration) (time.Duration, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /posts?limit=1 HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	reader := bufio.NewReader(conn)
	res, err := http.ReadResponse(reader, nil)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	answered := time.Now()
	conn.SetReadDeadline(answered.Add(limit))
	if _, err := reader.ReadByte(); !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("after %v idle: %v; want the server to close the connection", time.Since(answered).Round(time.Millisecond), err)
	}
	return time.Since(answered), nil
}

// wsMessage is a message of graphql-transport-ws.
type wsMessage struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// patientSubscriber subscribes to postCreated on addr over graphql-transport-ws, sends nothing
// for quiet (the server pings it meanwhile), then has create make a post and waits for its
// event, and checks that the server still reads what it sends. It returns how long the
// connection was open and served.
func patientSubscriber(addr string, quiet time.Duration, create func(title string) error) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), quiet+30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		return 0, err
	}
	defer c.CloseNow()
	upgraded := time.Now()
	since := func() time.Duration { return time.Since(upgraded).Round(time.Millisecond) }
	messages := make(chan wsMessage, 16)
	ended := make(chan error, 1)
	go func() { // reads all along, which also answers the server's pings
		for {
			_, data, err := c.Read(ctx)
			var m wsMessage
			if err == nil {
				err = json.Unmarshal(data, &m)
			}
			if err != nil {
				ended <- err
				return
			}
			messages <- m
		}
	}()
	next := func() (wsMessage, error) {
		select {
		case m := <-messages:
			return m, nil
		case err := <-ended:
			return wsMessage{}, fmt.Errorf("the connection ended %v after the upgrade: %w", since(), err)
		case <-time.After(5 * time.Second):
			return wsMessage{}, fmt.Errorf("no message in 5s, %v after the upgrade", since())
		}
	}
	send := func(m string) error {
		if err := c.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
			return fmt.Errorf("writing %v after the upgrade: %w", since(), err)
		}
		return nil
	}

	if err := send(`{"type": "connection_init", "payload": {"Authorization": "ApiKey process-key"}}`); err != nil {
		return 0, err
	}
	if m, err := next(); err != nil || m.Type != "connection_ack" {
		return 0, fmt.Errorf("got %+v, %v; want connection_ack", m, err)
	}
	if err := send(`{"id": "1", "type": "subscribe", "payload": {"query": "subscription { postCreated { title } }"}}`); err != nil {
		return 0, err
	}
	for wait := time.After(quiet); ; { // the events of other clients' posts may come meanwhile
		select {
		case <-messages:
			continue
		case err := <-ended:
			return 0, fmt.Errorf("the connection ended %v after the upgrade: %w", since(), err)
		case <-wait:
		}
		break
	}
	const title = "an event for a patient subscriber"
	if err := create(title); err != nil {
		return 0, err
	}
	want := `{"postCreated":{"title":"` + title + `"}}`
	for {
		m, err := next()
		if err != nil {
			return 0, err
		}
		if m.Type != "next" {
			return 0, fmt.Errorf("got %+v; want next with the data %s", m, want)
		}
		data, _, err := eventstest.ParseEvent(m.Payload)
		if err != nil {
			return 0, err
		}
		if data == want {
			break
		}
	}
	if err := send(`{"type": "ping"}`); err != nil {
		return 0, err
	}
	if m, err := next(); err != nil || m.Type != "pong" {
		return 0, fmt.Errorf("got %+v, %v; want pong", m, err)
	}
	served := time.Since(upgraded)
	return served, c.Close(websocket.StatusNormalClosure, "")
}

// TestServerTimeoutsCutSlowClientsOff runs Caddy with the server timeouts of the documentation's
// production example, shortened, attacks it with clients that send a byte a second, and has a
// normal client, an idle connection and a subscriber use it meanwhile.
func TestServerTimeoutsCutSlowClientsOff(t *testing.T) {
	ownProcesses(t)
	guarded, open := freePort(t), freePort(t)
	p := startProcess(t, slowClientsConfig(guarded, open, t.TempDir()), guarded)
	addr, openAddr := fmt.Sprintf("127.0.0.1:%d", guarded), fmt.Sprintf("127.0.0.1:%d", open)

	// All at once, on goroutines rather than parallel subtests, which -parallel (GOMAXPROCS)
	// would run a few at a time.
	const attackers = 8 // of each kind
	var all, attack sync.WaitGroup
	bodies, headers := make([]trickled, attackers), make([]trickled, attackers)
	for i := range attackers {
		attack.Go(func() {
			head, body := slowBody(addr)
			bodies[i] = trickle(addr, head, body, 3*slowReadBody)
		})
		attack.Go(func() {
			headers[i] = trickle(addr, "", fmt.Sprintf("GET /posts HTTP/1.1\r\nHost: %s\r\nX-Slow: one byte a second\r\n\r\n", addr), 3*slowReadHeader)
		})
	}
	over := make(chan struct{})
	all.Go(func() { attack.Wait(); close(over) })
	var requests int
	var slowest time.Duration
	var failures []string
	all.Go(func() { requests, slowest, failures = steadyClient(p, over) })
	var unguarded trickled
	all.Go(func() {
		head, body := slowBody(openAddr)
		unguarded = trickle(openAddr, head, body, 2*slowReadBody)
	})
	var idleAfter time.Duration
	var idleErr error
	all.Go(func() { idleAfter, idleErr = idleCloseAfter(addr, 3*slowIdle) })
	var served time.Duration
	var subscriberErr error
	// The subscriber's create goes on a connection of its own: a kept-alive one, idle past the
	// server's idle (slowIdle), may close as the POST is sent on it, which net/http does not send
	// again (a POST without an Idempotency-Key): EOF, in one run beside other tests.
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: keyTransport{&http.Transport{DisableKeepAlives: true}}}
	all.Go(func() {
		served, subscriberErr = patientSubscriber(addr, max(slowReadBody, slowWrite, slowIdle)+time.Second, func(title string) error {
			if id, err := p.create(fresh, title); err != nil || id == "" {
				return fmt.Errorf("create: %q, %v", id, err)
			}
			return nil
		})
	})
	all.Wait()

	cutOff := func(t *testing.T, results []trickled, timeout time.Duration) {
		for _, r := range results {
			switch {
			case r.err != nil:
				t.Error(r.err)
			case r.closedAfter == 0:
				t.Errorf("the connection was still open %v after the dial", 3*timeout)
			case r.status != "" && !strings.Contains(r.status, " 400 ") && !strings.Contains(r.status, " 408 "):
				t.Errorf("answered %q after %v; want 400, 408 or a closed connection", r.status, r.closedAfter)
			default:
				t.Logf("cut off after %v (%q)", r.closedAfter.Round(time.Millisecond), r.status)
			}
		}
	}
	t.Run("a POST whose body comes a byte a second is cut off before 3×read_body", func(t *testing.T) {
		cutOff(t, bodies, slowReadBody)
	})
	t.Run("headers that come a byte a second are cut off before 3×read_header", func(t *testing.T) {
		cutOff(t, headers, slowReadHeader)
	})
	t.Run("nothing of the slow POSTs is stored", func(t *testing.T) {
		res, err := http.Get(p.url + "/posts?limit=100")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "a normal post") || res.Header.Get("Link") != "" {
			t.Fatalf("GET /posts: %d (Link %q) %s; want every post on one page", res.StatusCode, res.Header.Get("Link"), body)
		}
		if strings.Contains(string(body), "one byte a second") {
			t.Errorf("a slow POST was stored: %s", body)
		}
	})
	t.Run("a normal client's requests during the attack all succeed", func(t *testing.T) {
		t.Logf("%d requests during the attack, the slowest create and list in %v", requests, slowest.Round(time.Millisecond))
		if requests == 0 {
			t.Error("no request was made during the attack")
		}
		for _, f := range failures {
			t.Error(f)
		}
	})
	t.Run("without the timeouts, the same POST is still held after 2×read_body", func(t *testing.T) {
		if unguarded.err != nil || unguarded.closedAfter != 0 {
			t.Errorf("Caddy's defaults cut it off after %v (%q, %v): the attack proves nothing", unguarded.closedAfter, unguarded.status, unguarded.err)
		}
	})
	t.Run("a keep-alive connection left idle is closed before 3×idle", func(t *testing.T) {
		if idleErr != nil {
			t.Error(idleErr)
		}
		t.Logf("closed %v after its answer", idleAfter.Round(time.Millisecond))
	})
	t.Run("a subscription outlives read_body, write and idle and gets its event", func(t *testing.T) {
		if subscriberErr != nil {
			t.Error(subscriberErr)
		}
		t.Logf("open and served %v after the upgrade", served.Round(time.Millisecond))
	})
	p.stop()
}

// stalledClient is a subscriber that stopped reading: what drains it afterwards.
type stalledClient struct {
	// drain reads what is left for the client until its end, for at most 10 s: how many bytes,
	// and whether the server had ended it.
	drain func() (n int64, ended bool)
	close func()
}

// smallBuffers dials with a receive buffer of 4 KiB, so that what the server sends a client
// that reads nothing piles up on the server's side.
var smallBuffers = net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	var err error
	c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	return err
}}

// stallRequest sends request on a socket of smallBuffers to addr, and reads nothing.
func stallRequest(ctx context.Context, addr, request string) (stalledClient, error) {
	conn, err := smallBuffers.DialContext(ctx, "tcp", addr)
	if err != nil {
		return stalledClient{}, err
	}
	if _, err := io.WriteString(conn, request); err != nil {
		conn.Close()
		return stalledClient{}, err
	}
	return stalledClient{
		drain: func() (int64, bool) {
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := io.Copy(io.Discard, conn)
			return n, !errors.Is(err, os.ErrDeadlineExceeded)
		},
		close: func() { conn.Close() },
	}, nil
}

// stallStream opens a stream of kind through client (over HTTP/2: the stream's flow-control
// window, 4 MiB for Go's client, then the server waits), and reads nothing after its opening.
func stallStream(ctx context.Context, client *http.Client, kind, base, query string) (stalledClient, error) {
	s, err := openStreamed(ctx, client, kind, base, query)
	if err != nil {
		return stalledClient{}, err
	}
	return stalledClient{
		drain: func() (int64, bool) {
			read := make(chan int64, 1)
			go func() { n, _ := io.Copy(io.Discard, s.r); read <- n }()
			select {
			case n := <-read:
				return n, true
			case <-time.After(10 * time.Second):
				s.close()
				return <-read, false
			}
		},
		close: s.close,
	}, nil
}

// stallWebSocket subscribes with query over graphql-transport-ws on a socket of smallBuffers,
// and reads nothing after connection_ack (coder/websocket reads only when asked).
func stallWebSocket(ctx context.Context, base, query string) (stalledClient, error) {
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"},
		HTTPClient:   &http.Client{Transport: &http.Transport{DialContext: smallBuffers.DialContext}},
	})
	if err != nil {
		return stalledClient{}, err
	}
	c.SetReadLimit(1 << 20)
	subscribe, _ := json.Marshal(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]string{"query": query}})
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type": "connection_init"}`)); err != nil {
		c.CloseNow()
		return stalledClient{}, err
	}
	if _, ack, err := c.Read(ctx); err != nil || !strings.Contains(string(ack), "connection_ack") {
		c.CloseNow()
		return stalledClient{}, fmt.Errorf("connection_init: %s %v", ack, err)
	}
	if err := c.Write(ctx, websocket.MessageText, subscribe); err != nil {
		c.CloseNow()
		return stalledClient{}, err
	}
	return stalledClient{
		drain: func() (n int64, ended bool) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for {
				_, data, err := c.Read(ctx)
				if err != nil {
					return n, ctx.Err() == nil
				}
				n += int64(len(data))
			}
		},
		close: func() { c.CloseNow() },
	}, nil
}

// createWithBody POSTs a post of title and body through client, and fails t unless it is
// created.
func (p *caddyProcess) createWithBody(t *testing.T, client *http.Client, title, body string) {
	t.Helper()
	res, err := client.Post(p.url+"/posts", "application/json", strings.NewReader(fmt.Sprintf(`{"title": %q, "body": %q}`, title, body)))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("POST /posts: %d", res.StatusCode)
	}
}

// readTitles reads the titles of the postCreated events of a reader until it ends: next reads
// one, "" at the end.
func readTitles(next func() (string, error)) <-chan string {
	titles := make(chan string, 1024)
	go func() {
		defer close(titles)
		for {
			title, err := next()
			if err != nil || title == "" {
				return
			}
			titles <- title
		}
	}()
	return titles
}

// sseTitles reads the title of s's next postCreated event, for readTitles: "" at the end.
func sseTitles(s *streamedSub) func() (string, error) {
	return func() (string, error) {
		ev, err := s.next()
		if err != nil || ev.result == nil {
			return "", err
		}
		return titleOf(ev.result)
	}
}

// wsTitles reads the title of ws's next postCreated event (a next message of
// graphql-transport-ws), for readTitles.
func wsTitles(ctx context.Context, ws *websocket.Conn) func() (string, error) {
	return func() (string, error) {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return "", err
		}
		var m wsMessage
		if err := json.Unmarshal(data, &m); err != nil || m.Type != "next" {
			return "", fmt.Errorf("%s: %v", data, err)
		}
		result, _, err := eventstest.ParseEvent(m.Payload)
		if err != nil {
			return "", err
		}
		return titleOf(json.RawMessage(`{"data":` + result + `}`))
	}
}

// TestAClientThatStopsReadingIsCutOffOnEveryTransport: on each transport, a client that
// subscribes and then reads nothing while 480 posts of 40 KB are written, beside an SSE and a
// WebSocket subscriber that read, is cut off within 5 s of the server's first drop of its
// events (caddy_posts_events_dropped_total{stage="connection"}), with the default ws_keepalive:
// the gauge of its transport drops back, its end is logged as TOO_SLOW (1013), and the readers
// get every event once, in order.
func TestAClientThatStopsReadingIsCutOffOnEveryTransport(t *testing.T) {
	ownProcesses(t)
	admin, port := freePort(t), freePort(t)
	p := startProcess(t, slowReadersConfig(admin, port, t.TempDir(), ""), port)
	adminMetrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", admin)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	const query = "subscription { postCreated { title body } }"
	multipartBody, _ := json.Marshal(map[string]string{"query": query})
	streams := func(kind string) func(map[string]*dto.MetricFamily) float64 {
		return func(f map[string]*dto.MetricFamily) float64 {
			return sample(f, "caddy_posts_streams", "interface="+kind)
		}
	}
	webSockets := func(f map[string]*dto.MetricFamily) float64 { return sample(f, "caddy_posts_websocket_connections") }
	tests := []struct {
		name  string
		stall func(ctx context.Context) (stalledClient, error)
		gauge func(map[string]*dto.MetricFamily) float64 // counts the stalled client, beside the readers
		ended string                                     // what its end's log line says
	}{
		{"an SSE stream over HTTP/1.1", func(ctx context.Context) (stalledClient, error) {
			return stallRequest(ctx, addr, fmt.Sprintf("GET /graphql?query=%s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", url.QueryEscape(query), addr))
		}, streams(overSSE), `"end":"TOO_SLOW"`},
		{"a multipart stream over HTTP/1.1", func(ctx context.Context) (stalledClient, error) {
			return stallRequest(ctx, addr, fmt.Sprintf("POST /graphql HTTP/1.1\r\nHost: %s\r\nAccept: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				addr, apolloMultipartAccept, len(multipartBody), multipartBody))
		}, streams(overMultipart), `"end":"TOO_SLOW"`},
		{"an SSE stream over HTTP/2", func(ctx context.Context) (stalledClient, error) {
			return stallStream(ctx, h2cClient(), overSSE, p.url, query)
		}, streams(overSSE), `"end":"TOO_SLOW"`},
		{"a multipart stream over HTTP/2", func(ctx context.Context) (stalledClient, error) {
			return stallStream(ctx, h2cClient(), overMultipart, p.url, query)
		}, streams(overMultipart), `"end":"TOO_SLOW"`},
		{"a WebSocket", func(ctx context.Context) (stalledClient, error) {
			return stallWebSocket(ctx, p.url, query)
		}, webSockets, `"close_code":1013`},
	}
	for _, tt := range tests {
		t.Run(tt.name+" whose client stops reading is cut off within 5s of the first event dropped", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			sse, err := openStreamed(ctx, streamClient(), overSSE, p.url, postCreatedTitles)
			if err != nil {
				t.Fatal(err)
			}
			defer sse.close()
			ws := p.subscribe(ctx, t, `{}`)
			defer ws.CloseNow()
			readers := map[string]<-chan string{
				"SSE":       readTitles(sseTitles(sse)),
				"WebSocket": readTitles(wsTitles(ctx, ws)),
			}
			_, families := scrape(t, adminMetrics)
			readersOnly := tt.gauge(families)
			stalled, err := tt.stall(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer stalled.close()
			waitUntil(t, "the stalled client to be counted", func() bool {
				_, families := scrape(t, adminMetrics)
				return tt.gauge(families) == readersOnly+1
			})
			dropped := sample(families, "caddy_posts_events_dropped_total", "stage=connection")
			logged := strings.Count(p.out.String(), tt.ended)

			// 480 posts of 40,000 characters: 19 MB to the stalled client, past what the
			// kernel buffers for it and what the server queues for it.
			const posts, size = 480, 40_000
			body := strings.Repeat("x", size)
			client := keyed()
			var order []string
			var firstDrop, cutOff time.Time
			watch := func() {
				_, families := scrape(t, adminMetrics)
				now := time.Now()
				if firstDrop.IsZero() && sample(families, "caddy_posts_events_dropped_total", "stage=connection") > dropped {
					firstDrop = now
				}
				if cutOff.IsZero() && tt.gauge(families) == readersOnly {
					cutOff = now
				}
			}
			for i := range posts {
				title := fmt.Sprint("large ", i)
				p.createWithBody(t, client, title, body)
				order = append(order, title)
				watch()
			}
			// Then until it is cut off: 30 s at most, past the 24 s of a write's deadline.
			for deadline := time.Now().Add(30 * time.Second); cutOff.IsZero() && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				watch()
			}
			if firstDrop.IsZero() {
				t.Fatalf("no event was dropped for the client that stopped reading; %d posts of %d bytes", posts, size)
			}
			if cutOff.IsZero() {
				t.Fatalf("the client that stopped reading was still counted 30s after the writes")
			}
			took := cutOff.Sub(firstDrop)
			t.Logf("cut off %v after the first event dropped", took.Round(time.Millisecond))
			if !race.Enabled && took > 5*time.Second {
				t.Errorf("cut off %v after the first event dropped; want within 5s", took)
			}
			if n, ended := stalled.drain(); !ended {
				t.Errorf("its connection was still open 10s after it was cut off, %d bytes read", n)
			} else if n >= posts*size {
				t.Errorf("it was sent %d bytes: every event, so it was not held back", n)
			}
			waitUntil(t, "its end to be logged", func() bool { return strings.Count(p.out.String(), tt.ended) == logged+1 })
			for name, titles := range readers {
				for i, want := range order {
					select {
					case got, ok := <-titles:
						if !ok {
							t.Fatalf("the %s reader's subscription ended after %d events", name, i)
						}
						if got != want {
							t.Fatalf("the %s reader's event %d is %q; want %q", name, i, got, want)
						}
					case <-time.After(10 * time.Second):
						t.Fatalf("the %s reader had no event %d (%q) in 10s", name, i, want)
					}
				}
				select {
				case got := <-titles:
					t.Errorf("the %s reader got %q after the last event", name, got)
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
	}
}
