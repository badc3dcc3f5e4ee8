// The events.Follower of the store's event log in the config: the rules of events, and one
// follower per store (followers), shared across reloads.

package caddymodule

import (
	"context"
	"fmt"
	"sync"
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

// loadFollower returns the events.Follower of st's event log, handing over to broker, and starts it
// unless one runs on st already. One per store: two would hand every event twice. The settings are
// those of the config that started it; a reload that changes them applies them once no config uses
// the running follower (it is keyed by the store alone).
func (h *Handler) loadFollower(app *App, st store.Store, broker *events.Broker[*posts.Event]) (*events.Follower, error) {
	log, ok := st.(store.EventLog)
	if !ok {
		return nil, fmt.Errorf("this store keeps no event log")
	}
	key := "follower " + h.storeKey
	val, _, err := followers.LoadOrNew(key, func() (caddy.Destructor, error) {
		interval := time.Duration(h.EventsPollInterval)
		f := events.NewFollower(events.FollowerConfig{
			Log:          log,
			Hand:         func(e store.Event) { posts.Publish(broker, e) },
			Relay:        h.Events == EventsRelay,
			Interval:     interval,
			Timeout:      min(max(10*interval, time.Second), time.Duration(h.Timeout)),
			TTL:          time.Duration(h.EventsTTL),
			Keep:         int64(h.EventsMax),
			RecoverAfter: time.Duration(h.Timeout),
			Logger:       h.logger.Named("events"),
		})
		// It reads the log once the config starts (App.onStart), not when it is provisioned.
		gate := make(chan struct{})
		run := func(ctx context.Context) {
			select {
			case <-gate:
				f.Run(ctx)
			case <-ctx.Done():
			}
		}
		return pooledFollower{f, goBackground(run), sync.OnceFunc(func() { close(gate) })}, nil
	})
	if err != nil {
		return nil, err
	}
	h.followerKey = key
	pf := val.(pooledFollower)
	app.onStart(pf.start)
	return pf.Follower, nil
}
