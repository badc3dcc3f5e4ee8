package events

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/store"
)

// The defaults of RelayConfig.
const (
	DefaultTTL         = time.Hour
	DefaultExpireEvery = time.Minute
	// MinStall is the least time without a successful poll that makes a relay stalled.
	MinStall = 5 * time.Second
	// maxPending bounds the local events waiting for the next poll: past it, they are handed
	// over at once, in their order (a poll that hangs must not hold them, or memory, forever).
	maxPending = 4096
)

// RelayConfig is what a Relay needs.
type RelayConfig struct {
	// Log records the events of this instance's writes, and is expired every ExpireEvery.
	Log store.EventLog
	// Source reads the events of every instance; default: a Poll of Log with its defaults.
	Source Source
	// Hand gives an event to the local subscribers (the broker's Publish). It must not block.
	Hand func(store.Event)
	// Interval is the source's poll interval, for Stalled's bound. Default: DefaultPollInterval.
	Interval time.Duration
	// TTL is how long events are kept: every ExpireEvery, the older ones are deleted. Default:
	// DefaultTTL.
	TTL time.Duration
	// ExpireEvery is the time between two deletes of expired events. Default: DefaultExpireEvery.
	ExpireEvery time.Duration
	// Logger receives the failures: a poll that fails (once, until one succeeds), an expiry.
	Logger *zap.Logger
}

// Relay hands the local subscribers of one store, in one order, the events of this instance's
// writes and those that other instances recorded in the store. At each batch of the source it
// merges the local events published since the previous one with the relayed events of other
// origins (its own are skipped, and an event read again in the look-back window is dropped by its
// id), sorts them by At then ID, and hands them over, dropping an event of a post whose later
// version (or deletion) was handed over already: a post's events reach subscribers in version
// order. Local writes thus wait for the next batch (at most one interval, or a query's timeout
// while the store hangs): that is what gives sequential writes through different instances one
// order everywhere. When a read fails, the local events are handed over anyway, but one that
// follows a version of its post not read yet.
//
// What it remembers (the ids, and each post's last version) covers the events from the source's
// floor on: the look-back window, or what was written during an outage while it is read.
type Relay struct {
	cfg    RelayConfig
	origin string

	mu      sync.Mutex
	pending []recorded
	seen    map[string]time.Time  // relayed ids, with their At
	posts   map[string]handedPost // by post id
	failing bool                  // the last read failed (logged once)
	floor   time.Time             // of the last successful read: posts created since are known here
	last    atomic.Int64          // unix nanoseconds of the last successful read, or of the start
}

// recorded is a local event, and when its record ended.
type recorded struct {
	store.Event
	done time.Time
}

// handedPost is the last event of a post handed over.
type handedPost struct {
	version int64
	deleted bool
	at      time.Time
}

// NewRelay returns a relay with a random origin; Run starts it.
func NewRelay(cfg RelayConfig) *Relay {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultPollInterval)
	cfg.TTL = cmp.Or(cfg.TTL, DefaultTTL)
	cfg.ExpireEvery = cmp.Or(cfg.ExpireEvery, DefaultExpireEvery)
	if cfg.Source == nil {
		cfg.Source = &Poll{Log: cfg.Log, Interval: cfg.Interval}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	r := &Relay{cfg: cfg, origin: hex.EncodeToString(b[:]), seen: map[string]time.Time{}, posts: map[string]handedPost{}, floor: time.Now().UTC()}
	r.last.Store(time.Now().UnixNano())
	return r
}

// Run reads the source and expires the log until ctx ends.
func (r *Relay) Run(ctx context.Context) {
	r.last.Store(time.Now().UnixNano())
	var wg sync.WaitGroup
	wg.Go(func() { r.expire(ctx) })
	r.cfg.Source.Run(ctx, r.deliver)
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hand(r.take(all)) // what was written last is not held back
}

// Record stores the event of a local write of kind to post, and queues it for the next batch
// even if it could not be stored: then the local subscribers get it, and other instances miss it.
func (r *Relay) Record(ctx context.Context, kind string, post store.Post) error {
	at := time.Now().UTC().Truncate(time.Millisecond)
	e := store.Event{ID: store.NewID(at), At: at, Origin: r.origin, Kind: kind, Post: post}
	err := r.cfg.Log.RecordEvent(ctx, e)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, recorded{e, time.Now()})
	if len(r.pending) >= maxPending {
		r.hand(r.take(all))
	}
	return err
}

// Stalled says whether no read has succeeded for max(10 intervals, MinStall), and how long ago
// the last one did.
func (r *Relay) Stalled() (bool, time.Duration) {
	ago := time.Since(time.Unix(0, r.last.Load()))
	return ago > max(10*r.cfg.Interval, MinStall), ago
}

// deliver takes a batch of the source.
func (r *Relay) deliver(b Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b.Err != nil {
		metrics.RelayError(metrics.RelayTail)
		if !r.failing {
			r.cfg.Logger.Error("reading the events of other instances failed; retrying every poll interval", zap.Error(b.Err))
		}
		r.failing = true
	} else {
		r.last.Store(time.Now().UnixNano())
		if r.failing {
			r.cfg.Logger.Info("reading the events of other instances again")
		}
		r.failing = false
	}
	// A local event goes with the first read that began after its record ended: the events of
	// other instances that came before it (a create there, then this update here) committed
	// before that read, so it holds them. A partial read (a full page) holds every event up to
	// its last one's At: the local events from before that go with it, in their place, lest a
	// later version of their post that it holds overtake them. When the read failed, they go
	// at once, but those that follow a version not handed over yet (see noGap).
	var batch []store.Event
	switch {
	case b.Err != nil:
		batch = r.take(r.noGap())
	case b.Upto.IsZero():
		var last time.Time
		if len(b.Events) > 0 {
			last = b.Events[len(b.Events)-1].At
		}
		batch = r.take(func(p recorded) bool { return p.At.Before(last) })
	default:
		batch = r.take(func(p recorded) bool { return p.done.Before(b.Upto) })
	}
	for _, e := range b.Events {
		if e.Origin == r.origin {
			continue
		}
		if _, dup := r.seen[e.ID]; dup {
			metrics.RelayEvent(metrics.RelayDuplicate)
			continue
		}
		r.seen[e.ID] = e.At
		batch = append(batch, e)
	}
	r.hand(batch)
	if b.Err == nil {
		r.forget(b.Floor)
		r.floor = b.Floor
	}
}

// take removes and returns the local events that are ready; r.mu is held.
func (r *Relay) take(ready func(recorded) bool) []store.Event {
	var out []store.Event
	kept := r.pending[:0]
	for _, p := range r.pending {
		if ready(p) {
			out = append(out, p.Event)
		} else {
			kept = append(kept, p)
		}
	}
	clear(r.pending[len(kept):])
	r.pending = kept
	return out
}

// noGap returns take's test while reads fail: a local event goes unless its post's last
// version handed over is more than one before its own (or none was, of a post created since
// the last read's floor), and a deletion: the one between, written through another
// instance just before the store went down, is still to be read, and would be stale (lost) once
// this one went. The post's later events wait with it, for the first read that succeeds.
func (r *Relay) noGap() func(recorded) bool {
	last := map[string]int64{} // by post, the version taken in this pass; -1: one waits
	return func(p recorded) bool {
		id, v := p.Post.ID, p.Post.Version
		prev, known := last[id]
		if h, ok := r.posts[id]; !known && ok && !h.deleted {
			prev, known = h.version, true
		}
		// Unknown here, created since the last read's floor: its create is still to be read.
		unread := !known && v > 1 && !p.Post.CreatedAt.Before(r.floor)
		// A deletion carries no version, so a version written elsewhere before it may be
		// unread: it waits, lest it make that version stale.
		deletion := p.Kind == store.EventDeleted
		if prev < 0 || (known && v > prev+1) || unread || deletion {
			last[id] = -1
			return false
		}
		if v > 0 {
			last[id] = v
		}
		return true
	}
}

// all takes every local event.
func all(recorded) bool { return true }

// hand sorts batch and hands it over, dropping stale events; r.mu is held.
func (r *Relay) hand(batch []store.Event) {
	slices.SortFunc(batch, func(a, b store.Event) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID)) })
	inVersionOrder(batch)
	now := time.Now()
	for _, e := range batch {
		relayed := e.Origin != r.origin
		if h, ok := r.posts[e.Post.ID]; ok && (h.deleted || (e.Kind != store.EventDeleted && e.Post.Version <= h.version)) {
			if relayed {
				metrics.RelayEvent(metrics.RelayStale)
			}
			continue
		}
		r.posts[e.Post.ID] = handedPost{version: e.Post.Version, deleted: e.Kind == store.EventDeleted, at: e.At}
		r.cfg.Hand(e)
		if relayed {
			metrics.RelayEvent(metrics.RelayRelayed)
			metrics.RelayLag(now.Sub(e.At))
		}
	}
}

// inVersionOrder reorders the events of each post that batch holds more than one of by version
// (a deletion last), in the places they take: writers' clocks may disagree by a few
// milliseconds, a post's versions may not.
func inVersionOrder(batch []store.Event) {
	places := map[string][]int{}
	for i, e := range batch {
		places[e.Post.ID] = append(places[e.Post.ID], i)
	}
	for _, at := range places {
		if len(at) < 2 {
			continue
		}
		events := make([]store.Event, len(at))
		for k, i := range at {
			events[k] = batch[i]
		}
		slices.SortStableFunc(events, func(a, b store.Event) int { return cmp.Compare(rank(a), rank(b)) })
		for k, i := range at {
			batch[i] = events[k]
		}
	}
}

// rank is an event's place among its post's: its version, a deletion after any.
func rank(e store.Event) int64 {
	if e.Kind == store.EventDeleted {
		return math.MaxInt64
	}
	return e.Post.Version
}

// forget drops what is older than floor: no later batch can hold it.
func (r *Relay) forget(floor time.Time) {
	for id, at := range r.seen {
		if at.Before(floor) {
			delete(r.seen, id)
		}
	}
	for id, h := range r.posts {
		if h.at.Before(floor) {
			delete(r.posts, id)
		}
	}
}

// expire deletes the events older than the TTL, every ExpireEvery, until ctx ends.
func (r *Relay) expire(ctx context.Context) {
	ticker := time.NewTicker(r.cfg.ExpireEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		query, cancel := context.WithTimeout(ctx, max(r.cfg.ExpireEvery/2, time.Second))
		_, err := r.cfg.Log.ExpireEvents(query, time.Now().Add(-r.cfg.TTL))
		cancel()
		if err != nil && ctx.Err() == nil {
			metrics.RelayError(metrics.RelayExpire)
			r.cfg.Logger.Warn("deleting the expired events failed; trying again in a while", zap.Error(err))
		}
	}
}
