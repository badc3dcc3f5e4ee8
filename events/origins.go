package events

import (
	"sync"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// Origin is where an event the follower handed came from: what the span of its delivery to a
// traced subscription says of it (its link to the write's span, the delay since the log took
// it, and whether another instance wrote it).
type Origin struct {
	// Position is the event's place in the log.
	Position int64
	// At is when the log took it (store.Event.At).
	At time.Time
	// Trace is the write's span, as a traceparent, or "" (store.Event.Trace).
	Trace string
	// Relayed says that another instance wrote it, and this one read it from the log.
	Relayed bool
}

// originsKept is how many of the last events handed a Follower remembers the Origin of
// (OriginOf): a subscriber that lags further behind gets its events with no link to their
// writes. 4,096 Origins take about 220 KB, and the traceparents of traced writes 55 bytes each.
const originsKept = 4096

// origins is the ring of the last originsKept events' Origins, by position: none until a traced
// subscription asks for them (KeepOrigins), so that a server that is not traced keeps nothing.
type origins struct {
	mu   sync.Mutex
	ring []Origin
}

// KeepOrigins has f remember the Origins of the events it hands from now on, for as long as it
// runs: called as a traced subscription starts, before the events it will be handed.
func (f *Follower) KeepOrigins() {
	f.origins.mu.Lock()
	defer f.origins.mu.Unlock()
	if f.origins.ring == nil {
		f.origins.ring = make([]Origin, originsKept)
		f.keepOrigins.Store(true)
	}
}

// noteOrigin remembers the origin of e, being handed, when KeepOrigins was called.
func (f *Follower) noteOrigin(e store.Event, relayed bool) {
	if !f.keepOrigins.Load() {
		return
	}
	f.origins.mu.Lock()
	f.origins.ring[e.Position%originsKept] = Origin{Position: e.Position, At: e.At, Trace: e.Trace, Relayed: relayed}
	f.origins.mu.Unlock()
}

// OriginOf is the Origin of the event at position, if it is among the last originsKept handed
// since KeepOrigins.
func (f *Follower) OriginOf(position int64) (Origin, bool) {
	f.origins.mu.Lock()
	defer f.origins.mu.Unlock()
	if f.origins.ring == nil || position <= 0 {
		return Origin{}, false
	}
	o := f.origins.ring[position%originsKept]
	return o, o.Position == position
}
