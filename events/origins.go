package events

import (
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// Origin is where an event the follower handed came from: what the span of its delivery to a
// subscriber says of it (its link to the write's span, the delay since the log took it, and
// whether another instance wrote it).
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
// writes. 4,096 Origins take about 220 KB.
const originsKept = 4096

// noteOrigin remembers the origin of e, being handed; f.mu is held.
func (f *Follower) noteOrigin(e store.Event, relayed bool) {
	if f.origins == nil {
		f.origins = make([]Origin, originsKept)
	}
	f.origins[e.Position%originsKept] = Origin{Position: e.Position, At: e.At, Trace: e.Trace, Relayed: relayed}
}

// OriginOf is the Origin of the event at position, if it is among the last originsKept handed.
func (f *Follower) OriginOf(position int64) (Origin, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.origins == nil || position <= 0 {
		return Origin{}, false
	}
	o := f.origins[position%originsKept]
	return o, o.Position == position
}
