package handlers

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/posts"
)

// relayState is a relay's health as a test sets it (the relay itself is events.Relay, tested in
// package events).
type relayState struct{ stalled atomic.Bool }

func (r *relayState) Stalled() (bool, time.Duration) {
	if r.stalled.Load() {
		return true, 12 * time.Second
	}
	return false, 40 * time.Millisecond
}

func TestHealthReportsTheRelay(t *testing.T) {
	relay := &relayState{}
	svc := posts.NewService(posts.Config{Store: openSQLite(t), Timeout: time.Second, MaxLimit: 100, Logger: zap.NewNop()})
	a := New(Config{Posts: svc, Auth: &auth.Authenticator{}, Logger: zap.NewNop(), HealthPath: "/healthz", Relay: relay})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { a.Route(r).ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)

	t.Run("a relay that reads is ok, with the age of its last read", func(t *testing.T) {
		res, h := probe(t, http.MethodGet, srv.URL+"/healthz")
		if res.StatusCode != http.StatusOK || h.Relay == nil || h.Relay.Status != "ok" || h.Relay.LastPollMSAgo != 40 {
			t.Errorf("got %d %+v relay %+v; want 200 with relay ok, 40 ms ago", res.StatusCode, h, h.Relay)
		}
	})
	t.Run("a stalled relay is 503, naming the relay", func(t *testing.T) {
		relay.stalled.Store(true)
		res, h := probe(t, http.MethodGet, srv.URL+"/healthz")
		if res.StatusCode != http.StatusServiceUnavailable || h.Status != "unavailable" || h.Store.Status != "ok" ||
			h.Relay == nil || h.Relay.Status != "stalled" || h.Relay.LastPollMSAgo != 12000 || res.Header.Get("Retry-After") == "" {
			t.Errorf("got %d %+v relay %+v", res.StatusCode, h, h.Relay)
		}
	})
	t.Run("without a relay, no relay in the answer", func(t *testing.T) {
		_, h := probe(t, http.MethodGet, healthServer(t, openSQLite(t), &auth.Authenticator{}))
		if h.Relay != nil {
			t.Errorf("relay %+v; want none", h.Relay)
		}
	})
}
