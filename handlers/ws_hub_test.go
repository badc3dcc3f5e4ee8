package handlers

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/live"
)

// sharing returns an API like s's, with subs, on s's hub, not registered yet: the next
// config of a server that reloads.
func sharing(s *wsServer, subs live.Subscriptions) *API {
	cfg := s.api.cfg
	cfg.Subscriptions, cfg.Hub = subs, s.api.hub
	return New(cfg)
}

// subscribeTo starts subscription id on c, and says whether it was refused.
func subscribeTo(t *testing.T, c *websocket.Conn, id string) (refused bool) {
	t.Helper()
	send(t, c, `{"id": "`+id+`", "type": "subscribe", "payload": {"query": "subscription { postCreated { title } }"}}`)
	// A query after it is answered (or refused) at once: the subscription's refusal, if any,
	// comes before.
	send(t, c, `{"id": "q`+id+`", "type": "subscribe", "payload": {"query": "{ __typename }"}}`)
	for {
		m := recv(t, c)
		if m.ID == id && m.Type == "error" {
			refused = true
		}
		if m.ID == "q"+id && (m.Type == "complete" || m.Type == "error") {
			return refused
		}
	}
}

func TestTheHubAppliesTheLatestRegisteredAPI(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	c := s.dial(t, transportWS, nil)
	initialise(t, c, `{}`)
	if subscribeTo(t, c, "1") {
		t.Fatal("the first subscription was refused")
	}
	one := testSubscriptions
	one.MaxSubscriptions = 1
	next := sharing(s, one)

	t.Run("a connection applies the limits of an API registered after it opened", func(t *testing.T) {
		s.api.hub.Register(next.LiveConfig())
		if !subscribeTo(t, c, "2") {
			t.Error("a second subscription under max_subscriptions 1 was accepted")
		}
	})
	t.Run("unregistering the latest API hands the connection back to the one before", func(t *testing.T) {
		s.api.hub.Unregister(next.LiveConfig())
		if subscribeTo(t, c, "3") {
			t.Error("a second subscription was refused under the first API's max_subscriptions")
		}
	})
	t.Run("the last API to unregister stays current for the connections still open", func(t *testing.T) {
		s.api.hub.Unregister(s.api.LiveConfig())
		if subscribeTo(t, c, "4") {
			t.Error("a subscription was refused")
		}
	})
}

func TestClosingAHubSpreadsTheCloses(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	var conns []*websocket.Conn
	for range 4 {
		c := s.dial(t, transportWS, nil)
		initialise(t, c, `{}`)
		conns = append(conns, c)
	}
	const spread = 800 * time.Millisecond
	start := time.Now()
	s.api.hub.Close(errcode.New(errcode.ServiceRestart, "reconnect"), spread)
	took := make([]time.Duration, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			code, _ := closedWith(t, c)
			took[i] = time.Since(start)
			if code != websocket.StatusServiceRestart {
				t.Errorf("connection %d closed with %d; want 1012", i, code)
			}
		})
	}
	wg.Wait()
	first, last := slices.Min(took), slices.Max(took)
	// One in each quarter of the spread: the first in the first, the last in the last (with
	// room for a busy machine's scheduling after each).
	if first > spread/4+250*time.Millisecond || last < spread*3/4 || last > spread+time.Second {
		t.Errorf("closed from %v to %v; want them spread over %v", first, last, spread)
	}
	t.Run("a closed hub refuses new connections with 503", func(t *testing.T) {
		_, res, err := websocket.Dial(t.Context(), s.url, &websocket.DialOptions{Subprotocols: []string{transportWS}})
		if err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("dial: %v (%v); want 503", err, res)
		}
	})
}

// countingWriter stands for a middleware's writer that would count the bytes of a hijacked
// connection (as Caddy's do): the connection must be hijacked below it.
type countingWriter struct {
	http.ResponseWriter
	hijacked *atomic.Bool
}

func (w countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w countingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked.Store(true)
	return nil, nil, errors.New("hijacked through the middleware's writer")
}

func TestTheUpgradeHandlerReturnsOnceConnectionInitIsAnswered(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	var serving atomic.Int64
	var throughMiddleware atomic.Bool
	var status atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serving.Add(1)
		defer serving.Add(-1)
		rec := &statusRecorder{ResponseWriter: w, status: &status}
		s.api.Route(r).ServeHTTP(countingWriter{rec, &throughMiddleware}, r)
	}))
	defer srv.Close()
	c, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http")+"/graphql", &websocket.DialOptions{Subprotocols: []string{transportWS}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if serving.Load() != 1 {
		t.Errorf("%d handlers run before connection_init; want the upgrade's", serving.Load())
	}
	initialise(t, c, `{"X-API-Key": "`+wsKey+`"}`)
	waitFor(t, "the upgrade's handler to return", func() bool { return serving.Load() == 0 })
	if subscribeTo(t, c, "1") {
		t.Fatal("the subscription was refused")
	}
	if status.Load() != http.StatusSwitchingProtocols || throughMiddleware.Load() {
		t.Errorf("the middleware saw status %d, and was hijacked through: %v; want 101, and not", status.Load(), throughMiddleware.Load())
	}
}

// statusRecorder records the status written through it.
type statusRecorder struct {
	http.ResponseWriter
	status *atomic.Int64
}

func (w *statusRecorder) WriteHeader(code int) {
	w.status.Store(int64(code))
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
