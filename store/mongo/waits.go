package mongo

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	monitor "go.mongodb.org/mongo-driver/v2/event"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The waits of the event protocol (events.go, posts.go) are timed on this process's monotonic
// clock, from when this store first saw what it waits on: a gap in the log (sightings), or a
// post's pending event (Store.untilFree). A time another instance wrote (an event's at, a
// pending event's ev.at) is never compared with this one's clock: instances' clocks differ,
// and a few seconds of skew would fill a hole at once, or a minute would let expiry cut past a
// hole that a writer may still fill. The times the store writes come from Store.now, which
// tests set apart per instance. RecoverEvents alone still selects pending events by ev.at
// against this instance's clock: a skew makes it log an event early, which is harmless (an
// event is logged once; its writer finds it logged), or late by the skew, while the post's next
// write logs it first anyway.

// maxSightings bounds the positions a store remembers seeing empty: past it, it forgets them
// all and times them again from the next sight, which only delays their decision.
const maxSightings = 16 * maxHoles

// sightings records when this store first saw each position of a gap empty, on its own
// monotonic clock.
type sightings struct {
	mu   sync.Mutex
	seen map[int64]time.Time
}

// seenFor notes the positions from first to last as seen empty now, unless seen before, and
// returns the last position p, first-1 at least, such that every position from first to p was
// first seen wait ago or longer, and whether first was seen just now.
func (s *sightings) seenFor(first, last int64, wait time.Duration) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil || len(s.seen)+int(last-first+1) > maxSightings {
		s.seen = map[int64]time.Time{}
	}
	now := time.Now()
	ready := first - 1
	_, seen := s.seen[first]
	for p := first; p <= last; p++ {
		at, ok := s.seen[p]
		if !ok {
			s.seen[p] = now
			at = now
		}
		if ready == p-1 && now.Sub(at) >= wait {
			ready = p
		}
	}
	return ready, !seen
}

// forget drops the positions up to upto, decided.
func (s *sightings) forget(upto int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.seen {
		if p <= upto {
			delete(s.seen, p)
		}
	}
}

// latencies is how many of the latest commands' round trips health keeps.
const latencies = 64

// health is what the driver tells a store of its server, through its monitors: whether it has
// seen the server gone since its last answer, and how long the latest commands took.
type health struct {
	down   atomic.Bool
	mu     sync.Mutex
	recent [latencies]time.Duration
	next   int
}

// options are the client's monitors that tell h.
func (h *health) options() *options.ClientOptions {
	took := func(d time.Duration) {
		h.mu.Lock()
		h.recent[h.next] = d
		h.next = (h.next + 1) % latencies
		h.mu.Unlock()
	}
	answered := func(d time.Duration) {
		h.down.Store(false)
		took(d)
	}
	return options.Client().
		SetMonitor(&monitor.CommandMonitor{
			Succeeded: func(_ context.Context, e *monitor.CommandSucceededEvent) { answered(e.Duration) },
			Failed: func(_ context.Context, e *monitor.CommandFailedEvent) {
				switch {
				case errors.Is(e.Failure, context.Canceled):
					// Its caller gave up (a client gone, a replay stopped): nothing is
					// said of the server, though the driver labels a read it cut short a
					// network error.
				case driver.IsTimeout(e.Failure):
					// A deadline (its caller's, or a socket's) ended before the answer: the
					// server is slow, not gone, as the driver judges too (it keeps its pool on
					// such an error), though it labels a read past the deadline a network
					// error as well. The round trip took this long at least: kept, so that
					// the waits grow with it.
					took(e.Duration)
				case driver.IsNetworkError(e.Failure):
					h.down.Store(true)
				default:
					answered(e.Duration)
				}
			},
		}).
		SetPoolMonitor(&monitor.PoolMonitor{Event: func(e *monitor.PoolEvent) {
			if e.Type == monitor.ConnectionPoolCleared {
				h.down.Store(true)
			}
		}}).
		SetServerMonitor(&monitor.ServerMonitor{
			ServerHeartbeatSucceeded: func(*monitor.ServerHeartbeatSucceededEvent) { h.down.Store(false) },
			ServerHeartbeatFailed:    func(*monitor.ServerHeartbeatFailedEvent) { h.down.Store(true) },
		})
}

// slowest is the longest round trip of the latest commands.
func (h *health) slowest() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Max(h.recent[:])
}

// latencyFactor is how many of the slowest recent round trips a wait of the event log lasts
// at least: a writer's position and its event's insert are two commands, its pending event
// lives four (write, position, insert, clear); the waits must outlast them on a server that is
// merely slow. A constant of the protocol, not of a deployment: it counts its commands, and the
// round trips it multiplies are measured. A variable for the tests that set the waits
// (SetWaits).
var latencyFactor time.Duration = 4

// Waits are the times of the event log that a deployment sets (caddymodule's mongodb_hole_wait
// and timeout); a zero field takes the package's default.
type Waits struct {
	// Hole is the least a reader waits for a hole (holeWait, 2 s by default); a write waits
	// half of it at least for the writer of a pending event (helpAfter, 1 s by default), as the
	// write's own client waits meanwhile.
	Hole time.Duration
	// Timeout is the longest a write runs, the service's timeout: expiry cuts past a gap only
	// once it has seen it empty for twice as long, a minute at least (settleWait), as a server
	// may still hold a command its client gave up on.
	Timeout time.Duration
}

// SetWaits sets the store's waits; before its first use.
func (s *Store) SetWaits(w Waits) { s.waits = w }

// holeWait is how long this store waits for a hole: Waits.Hole (the package's holeWait unset),
// or latencyFactor of its slowest recent round trips, whichever is longer.
func (s *Store) holeWait() time.Duration {
	return max(cmp.Or(s.waits.Hole, holeWait), latencyFactor*s.health.slowest())
}

// helpAfter is how long a write waits for the writer of a pending event: half of Waits.Hole
// (the package's helpAfter unset), or latencyFactor of the slowest recent round trips,
// whichever is longer.
func (s *Store) helpAfter() time.Duration {
	return max(cmp.Or(s.waits.Hole/2, helpAfter), latencyFactor*s.health.slowest())
}

// settleWait is how long expiry waits for a gap: twice Waits.Timeout, or the package's
// settleWait, whichever is longer.
func (s *Store) settleWait() time.Duration { return max(settleWait, 2*s.waits.Timeout) }

// Down says whether the driver has seen the server gone (a connection dropped or refused, a
// heartbeat failed) since its last answer: a server that is merely slow is not down. The
// store's breaker opens on calls that wait only then (store.BreakerConfig.Down).
func (s *Store) Down() bool { return s.health.down.Load() }
