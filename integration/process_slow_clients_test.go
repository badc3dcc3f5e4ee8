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
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/events/eventstest"
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
	return fmt.Sprintf("POST /posts HTTP/1.1\r\nHost: %s\r\nX-API-Key: process-key\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
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

	if err := send(`{"type": "connection_init", "payload": {"X-API-Key": "process-key"}}`); err != nil {
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
	all.Go(func() {
		served, subscriberErr = patientSubscriber(addr, max(slowReadBody, slowWrite, slowIdle)+time.Second, func(title string) error {
			if id, err := p.create(keyed(), title); err != nil || id == "" {
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
