// Tests of a WebSocket connection's send queue: a client that reads too slowly is closed, and
// completing an operation drops what waits for it.

package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/internal/race"
)

// titleReader reads a connection's messages in a goroutine of its own and hands on, in order,
// the title of each postCreated event, and "pong" for a pong.
type titleReader struct {
	titles chan string // closed when the connection ends, after err is set
	err    error
}

func readTitles(c *websocket.Conn) *titleReader {
	r := &titleReader{titles: make(chan string, 256)} // more than a test publishes: it never waits for the test
	go func() {
		defer close(r.titles)
		for {
			_, data, err := c.Read(context.Background())
			if err != nil {
				r.err = err
				return
			}
			var m struct {
				Type    string
				Payload struct {
					Data struct{ PostCreated struct{ Title string } }
				}
			}
			switch {
			case json.Unmarshal(data, &m) != nil:
				r.err = fmt.Errorf("not JSON: %.200s", data)
				return
			case m.Type == "pong":
				r.titles <- "pong"
			case m.Type == "next":
				r.titles <- m.Payload.Data.PostCreated.Title
			default:
				r.err = fmt.Errorf("unexpected: %.200s", data)
				return
			}
		}
	}()
	return r
}

// expect fails t unless the next title is want, within 5s.
func (r *titleReader) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case got, ok := <-r.titles:
		if !ok {
			t.Fatalf("the connection ended before %q: %v", want, r.err)
		}
		if got != want {
			t.Fatalf("got %q; want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no %q in 5s", want)
	}
}

// end waits for the connection to end and says why.
func (r *titleReader) end() error {
	for range r.titles {
	}
	return r.err
}

// TestASubscriberThatStopsReadingIsCutOff has one of two subscribers of a feed stop reading
// while big events keep coming: once the loopback's buffers and its send queue are full, its
// connection is cut off at once (logged as closed with 1013, TOO_SLOW; no close frame reaches
// a client that reads none), while the other goes on getting every event, and nothing of it
// is left once both leave.
func TestASubscriberThatStopsReadingIsCutOff(t *testing.T) {
	// No keep-alive ping while the test runs: the slow client could not answer it in time. And
	// so a write's timeout is a minute: slow's connection ends only if the write is cut.
	s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.SendQueue, s.MaxSubscriptions, s.KeepAlive = 4, 1, time.Minute }))
	s.createPost(t, "warm-up") // the store, the HTTP server and client start their goroutines
	warm := s.dial(t, transportWS, nil)
	initialise(t, warm, `{}`)
	_ = warm.CloseNow()
	waitFor(t, "the warm-up connection to end", func() bool { return s.open() == 0 })
	baseline := goleak.IgnoreCurrent()

	const subscribe = `{"id": "1", "type": "subscribe", "payload": {"query": "subscription { postCreated { title body } }"}}`
	slow, fast := s.dial(t, transportWS, nil), s.dial(t, transportWS, nil)
	for _, c := range []*websocket.Conn{slow, fast} {
		c.SetReadLimit(1 << 20) // an event is some 300 KB
		initialise(t, c, `{}`)
		send(t, c, subscribe)
	}
	waitFor(t, "both subscriptions", func() bool {
		conns := s.serverConns()
		return len(conns) == 2 && conns[0].Running() == 1 && conns[1].Running() == 1
	})
	conns := s.serverConns()
	ending := func() int { // how many connections the server is closing, or has closed
		n := 0
		for _, c := range conns {
			if c.Ending() {
				n++
			}
		}
		return n
	}

	r := readTitles(fast)
	n := 0
	for ; ending() == 0; n++ {
		if n == 100 { // some 30 MB: far more than the loopback's buffers and the queue hold
			t.Fatalf("slow is still open after %d events it did not read", n)
		}
		title := fmt.Sprint("event ", n)
		s.createBigPost(t, title)
		r.expect(t, title) // and so the feed has handed it to slow too
	}
	decided := time.Now()
	var cut serverConn
	for _, c := range conns {
		if c.Ending() {
			cut = c
		}
	}
	t.Logf("slow was found too slow after %d events", n)
	waitFor(t, "slow's connection to end", func() bool { return s.open() == 1 })
	took := time.Since(decided)
	t.Logf("its connection ended %v after", took.Round(time.Millisecond))
	if !race.Enabled && took > time.Second {
		t.Errorf("slow's connection ended %v after it was found too slow; want within 1s", took)
	}
	if cut == nil || cut.CloseCode() != websocket.StatusTryAgainLater {
		t.Errorf("the connection that ended is %v; want slow's, closed with 1013", cut)
	}
	s.createPost(t, "after slow was closed")
	r.expect(t, "after slow was closed")
	if ending() != 1 {
		t.Errorf("%d connections were closed; want only slow's", ending())
	}

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var err error
	for err == nil { // what the loopback held for it, then the end
		_, _, err = slow.Read(ctx)
	}
	if ctx.Err() != nil || websocket.CloseStatus(err) != -1 {
		t.Errorf("slow's reads ended with %v; want the connection cut off, with no close frame", err)
	}
	_ = fast.Close(websocket.StatusNormalClosure, "")
	if err := r.end(); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("fast ended with %v; want 1000", err)
	}
	waitFor(t, "every connection to end", func() bool { return s.open() == 0 && s.broker.Subscribers() == 0 })
	http.DefaultClient.CloseIdleConnections()
	goleak.VerifyNone(t, baseline)
}

// TestCompleteDropsWhatIsQueuedForTheOperation completes a subscription whose events wait in
// the server's queue for a client that does not read, and reuses its id at once: none of the
// waiting events is sent, under the old operation's id or the new one's.
func TestCompleteDropsWhatIsQueuedForTheOperation(t *testing.T) {
	s := newWSServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.KeepAlive = time.Minute }))
	const subscribe = `{"id": "1", "type": "subscribe", "payload": {"query": "subscription { postCreated { title body } }"}}`
	stalled := s.dial(t, transportWS, nil)
	stalled.SetReadLimit(1 << 20) // an event is some 300 KB
	initialise(t, stalled, `{}`)
	send(t, stalled, subscribe)
	waitFor(t, "the subscription", func() bool { return s.broker.Subscribers() == 1 })
	server := s.serverConns()[0]
	witness := s.dial(t, transportWS, nil) // reads, so that the test knows when an event was delivered
	witness.SetReadLimit(1 << 20)
	initialise(t, witness, `{}`)
	send(t, witness, subscribe)
	waitFor(t, "the witness's subscription", func() bool {
		return s.open() == 2 && s.serverConns()[0].Running() == 1 && s.serverConns()[1].Running() == 1
	})
	r := readTitles(witness)

	// Events the client does not read fill the loopback's buffers, then wait in the queue. Its
	// next message may open its TCP window by a few events (some 1.5 MB seen): 16 waiting
	// (4.8 MB) leave some behind.
	n := 0
	for ; server.Queued() < 16; n++ {
		if n == 100 {
			t.Fatalf("%d events wait in the queue after %d; want 16", server.Queued(), n)
		}
		title := fmt.Sprint("event ", n)
		s.createBigPost(t, title)
		r.expect(t, title)
	}
	// The witness leaves the feed once the feed has handed every event to every listener.
	send(t, witness, `{"id": "1", "type": "complete"}`)
	send(t, witness, `{"type": "ping"}`)
	r.expect(t, "pong")

	q := server.Queued()
	send(t, stalled, `{"id": "1", "type": "complete"}`)
	send(t, stalled, `{"id": "1", "type": "subscribe", "payload": {"query": "subscription { postDeleted }"}}`)
	send(t, stalled, `{"type": "ping"}`)
	events := 0
	for m := recv(t, stalled); m.Type != "pong"; m = recv(t, stalled) {
		if m.ID != "1" || m.Type != "next" || !strings.Contains(string(m.Payload), "postCreated") {
			t.Fatalf("before pong: %+v %.200s", m, m.Payload)
		}
		events++
	}
	if events >= n {
		t.Errorf("the client got all %d events; want none of those queued when it completed the subscription", n)
	}
	t.Logf("%d events, %d of them written before complete, %d queued then", n, events, q)
}

func TestTheSendQueueHoldsOneEventForEverySubscription(t *testing.T) {
	// A client with as many subscriptions as it may, all matching one event, is not too slow.
	if got := with(testSubscriptions, func(s *live.Subscriptions) { s.SendQueue, s.MaxSubscriptions = 4, 10 }).WithSendQueueFloor().SendQueue; got != 10 {
		t.Errorf("SendQueue = %d; want 10, MaxSubscriptions", got)
	}
	if got := testSubscriptions.WithSendQueueFloor().SendQueue; got != testSubscriptions.MaxSubscriptions {
		t.Errorf("SendQueue unset = %d; want %d, MaxSubscriptions", got, testSubscriptions.MaxSubscriptions)
	}
}
