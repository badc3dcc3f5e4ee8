package mongo

import (
	"sync"
	"time"
)

// The waits of the event protocol (events.go, posts.go) are timed on this process's monotonic
// clock, from when this store first saw what it waits on: a gap in the log (sightings), or a
// post's pending event (Store.untilFree). A time another instance wrote (an event's at, a
// pending event's ev.at) is never compared with this one's clock: instances' clocks differ,
// and a few seconds of skew would fill a hole at once, or a minute would let expiry cut past a
// hole that a writer may still fill. The times the store writes come from Store.now, which
// tests set apart per instance.

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
