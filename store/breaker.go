package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postsedge/caddy-posts/spans"
)

// ErrBreakerOpen is in the chain of a call that a Breaker refused without trying it: the store
// failed BreakerConfig.Threshold times in a row and has not answered since. The error also wraps
// ErrUnavailable, so callers that know nothing of breakers answer it as any unavailable store.
var ErrBreakerOpen = errors.New("the store failed repeatedly and is not tried until it answers again")

// BreakerRetryAfter is how long a client refused by an open breaker should wait: the probe pings
// four times a second and the first answer closes the breaker, so by then it has seen a store
// that answers again. The Retry-After of such a 503.
const BreakerRetryAfter = time.Second

// The defaults of BreakerConfig. DefaultStallAfter stays a constant, not a setting: it acts only
// on a server its client says is gone (BreakerConfig.Down), never on one that is slow, so what it
// trades is how long the calls already waiting on a dead server wait (a second, under the
// default timeout of 5 s), and no latency of a live one.
const (
	DefaultBreakerThreshold = 5
	DefaultStallAfter       = time.Second
	DefaultProbeEvery       = 250 * time.Millisecond
	DefaultProbeTimeout     = time.Second
)

// refused is what an open breaker answers: made once, so a refusal allocates nothing.
var refused = fmt.Errorf("%w: %w", ErrUnavailable, ErrBreakerOpen)

// BreakerConfig tunes a Breaker; its zero value takes the defaults.
type BreakerConfig struct {
	// Threshold is how many calls in a row must fail with ErrUnavailable to open the breaker,
	// and how many calls waiting at once, with no answer for StallAfter, open it too.
	Threshold int
	// StallAfter is how long Threshold calls may wait on a store that answers none of them, and
	// that Down says is down, before the breaker opens, without waiting for their time-outs.
	StallAfter time.Duration
	// Down says whether the store's client has seen its server gone (a connection dropped or
	// refused, a heartbeat failed) since the server last answered. Calls waiting on a server
	// that is merely slow are no stall: they end with their own time-outs, which count as
	// failures. Unset (a store with no server to lose), waiting calls never open the breaker.
	Down func() bool
	// ProbeEvery is how often, at most, the probe pings the store while the breaker is open.
	ProbeEvery time.Duration
	// ProbeTimeout bounds one ping: the operations' timeout, as a rule (caddymodule's timeout),
	// since a store that answers within it, however slowly, is up, and a ping bounded by less
	// keeps the breaker open on a database slower than that (each command 0.3–3 s late: one
	// instance's breaker stayed open 20 s after a restart with 1 s). Longer than ProbeEvery: a
	// driver that waits for a server to come back (MongoDB's server selection) answers the
	// waiting ping as soon as it does.
	ProbeTimeout time.Duration
	// Changed, if set, is told each time the breaker opens (true) or closes (false), in order.
	Changed func(open bool)
}

// Breaker fails the calls of a store at once while the store is down. It opens after Threshold
// calls in a row failed with ErrUnavailable, or as soon as Threshold calls have been waiting at
// once while the store answered nothing for StallAfter and its client says its server is gone
// (BreakerConfig.Down): a server that is gone, where the driver waits for one to come back,
// opens it within StallAfter, rather than after Threshold time-outs, so that no more than the
// calls already waiting wait the whole timeout. Slow is not down: calls that wait on a server
// that is alive (its connections up, its heartbeats answered) open it only by failing, when
// their own time-outs end them; a server that answers within the service's timeout, however
// slowly, never opens it. While open, every call through it fails at once with ErrBreakerOpen (and
// ErrUnavailable), and one probe pings the store every ProbeEvery. The first answer, of the
// probe or of a call that was under way, closes it.
//
// What counts: ErrUnavailable is a failure, unless the caller's own context was cancelled (a
// client that went away says nothing of the store; a deadline, the service's timeout, does).
// Every other outcome, ErrNotFound and other errors included, is an answer of the store, and
// starts the count again.
type Breaker struct {
	ping     func(context.Context) error
	cfg      BreakerConfig
	failures atomic.Int64 // in a row
	open     atomic.Bool
	waiting  atomic.Int64 // calls under way
	answers  atomic.Int64 // calls the store answered, ever: the watch sees whether it moves

	mu      sync.Mutex    // serialises opening, closing and starting the probe
	opened  chan struct{} // closed when the breaker opens; a new one once it closes
	probing bool
	stopped bool
	ctx     context.Context // of the probe, cancelled by Stop
	cancel  context.CancelFunc
	running sync.WaitGroup // the watch, and the probe while one runs
}

// NewBreaker returns a closed breaker whose probe pings s; Guard and GuardIdempotency put
// stores behind it. Stop ends its probe.
func NewBreaker(s Store, cfg BreakerConfig) *Breaker {
	cfg.Threshold = cmp.Or(cfg.Threshold, DefaultBreakerThreshold)
	cfg.StallAfter = cmp.Or(cfg.StallAfter, DefaultStallAfter)
	cfg.ProbeEvery = cmp.Or(cfg.ProbeEvery, DefaultProbeEvery)
	cfg.ProbeTimeout = cmp.Or(cfg.ProbeTimeout, DefaultProbeTimeout)
	ctx, cancel := context.WithCancel(context.Background())
	b := &Breaker{ping: s.Ping, cfg: cfg, ctx: ctx, cancel: cancel, opened: make(chan struct{})}
	b.running.Go(b.watch)
	return b
}

// watch opens the breaker when Threshold calls wait at once, the store has answered none for
// StallAfter and Down says it is down, looking four times per StallAfter, until Stop.
func (b *Breaker) watch() {
	ticker := time.NewTicker(b.cfg.StallAfter / 4)
	defer ticker.Stop()
	answers, since := b.answers.Load(), time.Now()
	for {
		select {
		case <-b.ctx.Done():
			return
		case now := <-ticker.C:
			if n := b.answers.Load(); n != answers || b.waiting.Load() < int64(b.cfg.Threshold) || b.open.Load() {
				answers, since = n, now
			} else if now.Sub(since) >= b.cfg.StallAfter && b.cfg.Down != nil && b.cfg.Down() {
				b.trip()
				since = now
			}
		}
	}
}

// Open says whether the breaker refuses calls now.
func (b *Breaker) Open() bool { return b.open.Load() }

// Stop ends the probe, if one runs, and waits for it, and closes the breaker for good: from
// then on every call goes to the store (which is closed too, as a rule) and nothing changes.
func (b *Breaker) Stop() {
	b.mu.Lock()
	b.stopped = true
	if b.open.Load() {
		b.open.Store(false)
		b.opened = make(chan struct{})
		b.changed(false)
	}
	b.mu.Unlock()
	b.cancel()
	b.running.Wait()
}

// opening returns a channel that is closed when the breaker opens, unless it is open already:
// then nil.
func (b *Breaker) opening() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open.Load() {
		return nil
	}
	return b.opened
}

// allow returns the refusal while the breaker is open, an event of the span of ctx, else nil,
// and counts the call as waiting until done.
func (b *Breaker) allow(ctx context.Context) error {
	if b.open.Load() {
		spans.Current(ctx).Event("store.breaker.refused")
		return refused
	}
	b.waiting.Add(1)
	return nil
}

// done records the outcome err of a call made under ctx, and returns err.
func (b *Breaker) done(ctx context.Context, err error) error {
	b.waiting.Add(-1)
	switch {
	case err == nil || !errors.Is(err, ErrUnavailable):
		b.answered()
	case errors.Is(ctx.Err(), context.Canceled):
		// The caller went away: no word on the store.
	case b.failures.Add(1) >= int64(b.cfg.Threshold):
		b.trip()
	}
	return err
}

// answered starts the count again and closes the breaker. Loads first: a store that answers
// costs its calls no other write to shared memory than the count of answers.
func (b *Breaker) answered() {
	b.answers.Add(1)
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
	if b.open.Load() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.open.Load() {
			b.failures.Store(0)
			b.open.Store(false)
			b.opened = make(chan struct{})
			b.changed(false)
		}
	}
}

// trip opens the breaker and starts the probe unless one runs.
func (b *Breaker) trip() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open.Load() || b.stopped {
		return
	}
	b.open.Store(true)
	close(b.opened)
	b.changed(true)
	if !b.probing {
		b.probing = true
		b.running.Add(1)
		go b.probe()
	}
}

func (b *Breaker) changed(open bool) {
	if b.cfg.Changed != nil {
		b.cfg.Changed(open)
	}
}

// probe pings the store every ProbeEvery while the breaker is open, until it answers (which
// closes the breaker) or Stop. One runs at a time: it ends only under mu, once it has seen the
// breaker closed, so trip starts another only after it.
func (b *Breaker) probe() {
	defer b.running.Done()
	timer := time.NewTimer(b.cfg.ProbeEvery)
	defer timer.Stop()
	for {
		select {
		case <-b.ctx.Done():
			b.mu.Lock()
			b.probing = false
			b.mu.Unlock()
			return
		case <-timer.C:
		}
		next := time.Now().Add(b.cfg.ProbeEvery)
		if b.open.Load() {
			ctx, cancel := context.WithTimeout(b.ctx, b.cfg.ProbeTimeout)
			if b.ping(ctx) == nil {
				b.answered()
			}
			cancel()
		}
		b.mu.Lock()
		if !b.open.Load() || b.stopped {
			b.probing = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		timer.Reset(max(time.Until(next), 0))
	}
}
