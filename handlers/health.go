package handlers

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/store"
)

// health is the answer at Config.HealthPath: ok when the store answers a ping within the
// timeout, every key set (if any) has been fetched once and the relay (if any) is not stalled;
// unavailable, with the parts that failed, otherwise.
type health struct {
	Status  string       `json:"status"`
	Store   healthCheck  `json:"store"`
	KeySets *keySetCheck `json:"key_sets,omitempty"`
	Relay   *relayCheck  `json:"relay,omitempty"`
	// EventLog is what the store's event log holds, once it has been read: subscribers resume
	// from a cursor after oldest_position. It does not change the status.
	EventLog *eventLogCheck `json:"event_log,omitempty"`
}

type eventLogCheck struct {
	// Events is how many events the log held at the start or the last expiry (every minute).
	Events int64 `json:"events"`
	// OldestPosition is the oldest position it kept then, LastPosition the last it had given.
	OldestPosition int64 `json:"oldest_position"`
	LastPosition   int64 `json:"last_position"`
	// HandedPosition is the last position this instance's subscribers have been handed.
	HandedPosition int64 `json:"handed_position"`
}

type healthCheck struct {
	Status string `json:"status"`
	// Breaker is "open" while the store's breaker fails every call at once (store.Breaker).
	Breaker string `json:"breaker,omitempty"`
	// LatencyMS is how long the ping took, in milliseconds.
	LatencyMS float64 `json:"latency_ms"`
	Error     string  `json:"error,omitempty"`
}

// RelayHealth is what health probes ask of the relay of events between instances.
type RelayHealth interface {
	// Stalled says whether its reads have not succeeded for too long, and how long ago the last did.
	Stalled() (bool, time.Duration)
}

type relayCheck struct {
	Status string `json:"status"`
	// LastPollMSAgo is how long ago its last successful read was, in milliseconds.
	LastPollMSAgo int64 `json:"last_poll_ms_ago"`
}

// healthStalled is the status of a relay that has not read for too long.
const healthStalled = "stalled"

type keySetCheck struct {
	Status  string `json:"status"`
	Fetched int    `json:"fetched"`
	Total   int    `json:"total"`
}

const (
	healthOK          = "ok"
	healthUnavailable = "unavailable"
	breakerOpen       = "open"
)

// serveHealth answers a health probe. It writes nothing to the store, and probes that arrive
// while one is being checked share its answer, so that however many probes come at once, the
// store gets one ping at a time from them.
func (a *API) serveHealth(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		a.answer.Fail(w, r, errcode.New(errcode.MethodNotAllowed, r.Method+" is not allowed here; allowed: GET, HEAD"))
		return
	}
	v, _, _ := a.probes.Do("", func() (any, error) { return a.checkHealth(), nil })
	h := v.(health)
	status := http.StatusOK
	if h.Status != healthOK {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", answer.RetryAfter)
		if h.Store.Breaker == breakerOpen {
			w.Header().Set("Retry-After", answer.StoreRetryAfter)
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	answer.WriteJSON(w, status, h)
}

// checkHealth pings the store and counts the key sets fetched. Not under the probe's context:
// its answer is shared with the probes that wait for it. The ping is bounded by the timeout, and
// refused at once while the store's breaker is open.
func (a *API) checkHealth() health {
	h := health{Status: healthOK, Store: healthCheck{Status: healthOK}}
	start := time.Now()
	err := a.cfg.Posts.Ping(context.Background())
	h.Store.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		h.Status, h.Store.Status = healthUnavailable, healthUnavailable
		h.Store.Error = errcode.Of(err).Message // the cause is the log's, as for any request
		if errors.Is(err, store.ErrBreakerOpen) {
			h.Store.Breaker = breakerOpen
		}
	}
	if fetched, total := a.cfg.Auth.KeySets(); total > 0 {
		h.KeySets = &keySetCheck{Status: healthOK, Fetched: fetched, Total: total}
		if fetched < total {
			h.Status, h.KeySets.Status = healthUnavailable, healthUnavailable
		}
	}
	if stats, read := a.cfg.Posts.LogStats(); read {
		handed, _ := a.cfg.Posts.Handed()
		h.EventLog = &eventLogCheck{Events: stats.Events, OldestPosition: stats.Oldest, LastPosition: stats.Last, HandedPosition: handed}
	}
	if a.cfg.Relay != nil {
		stalled, ago := a.cfg.Relay.Stalled()
		h.Relay = &relayCheck{Status: healthOK, LastPollMSAgo: ago.Milliseconds()}
		if stalled {
			h.Status, h.Relay.Status = healthUnavailable, healthStalled
		}
	}
	return h
}
