// The relay through the store in the config: the rules of events, and one relay per store,
// shared across reloads.

package caddymodule

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store"
)

// The values of Events.
const (
	EventsLocal = "local"
	EventsRelay = "relay"
)

// fillEvents relays through MongoDB, which several instances share; the embedded store has one
// process per file, so nothing to relay.
func fillEvents(h *Handler) {
	if h.Events == "" {
		h.Events = EventsLocal
		if h.MongoDBURI != "" {
			h.Events = EventsRelay
		}
	}
}

func checkEvents(h *Handler) error {
	switch {
	case h.Events != EventsLocal && h.Events != EventsRelay:
		return fmt.Errorf("events must be %s or %s, not %q", EventsLocal, EventsRelay, h.Events)
	case h.Events == EventsRelay && h.MongoDBURI == "":
		return fmt.Errorf("events %s needs mongodb_uri: the embedded store serves one process, so there is nothing to relay (use events %s, or omit it)",
			EventsRelay, EventsLocal)
	}
	return nil
}

// loadRelay returns the relay of st, the pooled store, handing over to broker, and starts it
// unless one runs on st already. One per store: two would hand each other's events over twice.
// The settings are those of the config that started it; a reload that changes them applies
// them once no config uses the running relay (it is keyed by the store alone).
func (h *Handler) loadRelay(st store.Store, broker *events.Broker[posts.Event]) (*events.Relay, error) {
	log, ok := st.(store.EventLog)
	if !ok {
		return nil, fmt.Errorf("events %s: this store keeps no events", EventsRelay)
	}
	key := "relay " + h.storeKey
	val, _, err := relays.LoadOrNew(key, func() (caddy.Destructor, error) {
		if ttl, ok := st.(interface{ SetEventTTL(time.Duration) }); ok {
			ttl.SetEventTTL(time.Duration(h.EventsTTL))
		}
		interval := time.Duration(h.EventsPollInterval)
		relay := events.NewRelay(events.RelayConfig{
			Log:      log,
			Hand:     func(e store.Event) { broker.Publish(posts.EventOf(e)) },
			Interval: interval,
			TTL:      time.Duration(h.EventsTTL),
			Logger:   h.logger.Named("relay"),
			Source: &events.Poll{Log: log, Interval: interval, Lookback: time.Duration(h.EventsLookback),
				Timeout: min(max(10*interval, time.Second), time.Duration(h.Timeout))},
		})
		return pooledRelay{relay, goBackground(relay.Run)}, nil
	})
	if err != nil {
		return nil, err
	}
	h.relayKey = key
	return val.(pooledRelay).Relay, nil
}
