package events

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/store"
)

// The defaults of FollowerConfig.
const (
	DefaultPollInterval = 100 * time.Millisecond
	DefaultTTL          = time.Hour
	DefaultExpireEvery  = time.Minute
	DefaultRecoverEvery = time.Minute
	DefaultRecoverAfter = 5 * time.Second
	DefaultPage         = 1000
	// DefaultKeep is how many events the log keeps at most, whatever their age.
	DefaultKeep = 1_000_000
	// MinStall is the least time without a successful read that makes a follower stalled.
	MinStall = 5 * time.Second
	// maxOffered bounds the events offered ahead of a position not read yet: past it, offers are
	// dropped, which loses nothing (each is in the log, and the next read hands it) but speed.
	maxOffered = 4096
)

// FollowerConfig is what a Follower needs.
type FollowerConfig struct {
	// Log is the store's event log.
	Log store.EventLog
	// Hand gives an event to the local subscribers (the broker's Publish), in the log's order.
	// It must not block.
	Hand func(store.Event)
	// Relay makes the follower read the log every Interval, so that this instance's subscribers
	// get the writes of every instance that shares the store. Without it the follower reads only
	// when this instance's own writes are ahead of what it has read, and hands only those: its
	// subscribers get this instance's writes alone.
	Relay bool
	// Interval is the time between two reads when Relay is set. Default: DefaultPollInterval.
	Interval time.Duration
	// Timeout bounds each read. Default: ten intervals, at least 1s.
	Timeout time.Duration
	// Page is the most events one read returns. Default: DefaultPage.
	Page int
	// TTL is how long events are kept: every ExpireEvery, the older ones are deleted. Default:
	// DefaultTTL.
	TTL time.Duration
	// Keep is how many events the log keeps at most: the older ones go at the next expiry,
	// whatever their age. Default: DefaultKeep.
	Keep int64
	// ExpireEvery is the time between two deletes of expired events. Default: DefaultExpireEvery.
	ExpireEvery time.Duration
	// RecoverEvery is the time between two calls of the log's RecoverEvents, which logs the
	// events of writes older than RecoverAfter whose writer stopped before it logged them (a
	// process that crashed: the others find its writes); one more comes RecoverAfter after the
	// start, after each Recover and after a read that passed over a position, and one every
	// RecoverAfter while another instance has gone quiet (Follower.peerGoneQuiet). Defaults:
	// DefaultRecoverEvery, DefaultRecoverAfter.
	RecoverEvery, RecoverAfter time.Duration
	// Logger receives the failures: a read that fails (once, until one succeeds), an expiry,
	// a recovery.
	Logger *zap.Logger
}

// Follower hands the local subscribers of one store the events of its log once each, in the
// log's order: the order of positions, the same on every instance, in which a post's events are
// in the order of its versions. A write of this instance offers its event as soon as it is
// logged: it is handed at once when every position before it is handed, so the writer's own
// subscribers need not wait for a read; an event behind a position not handed yet (another
// instance's write, or a write of this one that is still finishing) waits for the read that the
// offer starts at once. A read hands every event up to where the log is decided, and what was
// offered after it. So the order needs no waiting but for positions that are not decided yet,
// and a read that hangs holds back only the events behind it, for its timeout at most.
type Follower struct {
	cfg    FollowerConfig
	origin string // the log's, whose events a follower without Relay hands

	mu      sync.Mutex
	next    int64                 // the position of the next event to hand; 0 until the start is read
	offered map[int64]store.Event // events of this instance's writes, ahead of next
	failing bool                  // the last read failed (logged once)
	peers   map[string]time.Time  // when an event of each other origin was last handed (peerGoneQuiet)

	cursors Cursors        // of the log's key, read at the start
	stats   store.LogStats // as the last expiry left the log
	kick    chan struct{}  // asks for a read now
	recover chan struct{}  // asks for a recovery soon
	started chan struct{}  // closed once the start is read
	last    atomic.Int64   // unix nanoseconds of the last successful read, or of the start

	keepOrigins atomic.Bool // set by KeepOrigins
	origins     origins     // of the last events handed (origins.go)
}

// NewFollower returns a follower of cfg.Log; Run starts it.
func NewFollower(cfg FollowerConfig) *Follower {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultPollInterval)
	cfg.Timeout = cmp.Or(cfg.Timeout, max(10*cfg.Interval, time.Second))
	cfg.Page = cmp.Or(cfg.Page, DefaultPage)
	cfg.TTL = cmp.Or(cfg.TTL, DefaultTTL)
	cfg.Keep = cmp.Or(cfg.Keep, DefaultKeep)
	cfg.ExpireEvery = cmp.Or(cfg.ExpireEvery, DefaultExpireEvery)
	cfg.RecoverEvery = cmp.Or(cfg.RecoverEvery, DefaultRecoverEvery)
	cfg.RecoverAfter = cmp.Or(cfg.RecoverAfter, DefaultRecoverAfter)
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	f := &Follower{cfg: cfg, origin: cfg.Log.Origin(), offered: map[int64]store.Event{}, peers: map[string]time.Time{}, kick: make(chan struct{}, 1), recover: make(chan struct{}, 1), started: make(chan struct{})}
	f.recover <- struct{}{} // a writer of the last run may have stopped before its event
	f.last.Store(time.Now().UnixNano())
	return f
}

// Offer hands e, the event of a write of this instance, at once if every position before it is
// handed, else when they are; a position read already is not handed again.
func (f *Follower) Offer(e store.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next != 0 && e.Position < f.next {
		return
	}
	if len(f.offered) >= maxOffered {
		return // the next read hands it
	}
	f.offered[e.Position] = e
	if f.drain() {
		f.read()
	}
}

// drain hands the offered events that are next, and says whether some are left behind a
// position not handed yet; f.mu is held.
func (f *Follower) drain() bool {
	if f.next == 0 {
		return len(f.offered) > 0
	}
	for e, ok := f.offered[f.next]; ok; e, ok = f.offered[f.next] {
		delete(f.offered, f.next)
		f.hand(e)
	}
	return len(f.offered) > 0
}

// read asks for a read now, or after the one under way.
func (f *Follower) read() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// hand gives e to the subscribers and moves next past it; f.mu is held.
func (f *Follower) hand(e store.Event) {
	f.next = e.Position + 1
	own := e.Origin == f.origin
	if !own && !f.cfg.Relay {
		return
	}
	f.noteOrigin(e, !own)
	f.cfg.Hand(e)
	if !own {
		f.peers[e.Origin] = time.Now()
		metrics.RelayEvent(metrics.RelayRelayed)
		metrics.RelayLag(time.Since(e.At))
	}
}

// peerGoneQuiet says whether another instance has gone quiet: the follower handed an event of it
// less than RecoverEvery ago, and none for RecoverAfter. While one has, the follower recovers every
// RecoverAfter as well as every RecoverEvery (Run). An instance killed in a write leaves its event
// pending in the post, where nothing but RecoverEvents finds it: killed before its position, it
// leaves no trace in the log; after, a hole, which only a later event shows (readOnce asks for a
// recovery when it passes over one). But its writes stop: so a write it was killed in, made up to
// RecoverEvery less RecoverAfter after its last event handed here, reaches the subscribers here
// within two RecoverAfters, not at the next of every RecoverEvery. An instance that keeps writing
// is not quiet, and one quiet for RecoverEvery is forgotten: at idle, as under steady writes, the
// database is asked nothing more.
func (f *Follower) peerGoneQuiet() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	quiet := false
	for origin, at := range f.peers {
		switch since := time.Since(at); {
		case since >= f.cfg.RecoverEvery:
			delete(f.peers, origin)
		case since >= f.cfg.RecoverAfter:
			quiet = true
		}
	}
	return quiet
}

// Recover asks for the log's RecoverEvents RecoverAfter from now: a write failed in a way that
// may have left its event to be logged (the store stopped answering after the write).
func (f *Follower) Recover() {
	select {
	case f.recover <- struct{}{}:
	default:
	}
}

// Started is closed once the follower has read where the log ended when it started: from then
// on, an offered event that is next is handed before Offer returns.
func (f *Follower) Started() <-chan struct{} { return f.started }

// Handed returns the position of the last event the follower has handed to the subscribers or
// passed over: every later event it hands comes after this call. False before it has read where
// the log starts (Started).
func (f *Follower) Handed() (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.next - 1, f.next != 0
}

// Log is the log the follower reads.
func (f *Follower) Log() store.EventLog { return f.cfg.Log }

// Cursors are the cursors of the log's positions; valid once Started is closed.
func (f *Follower) Cursors() Cursors {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cursors
}

// Stats is what the log held at the start or the last expiry since, and whether it was read.
func (f *Follower) Stats() (store.LogStats, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats, f.next != 0
}

// Stalled says whether no read has succeeded for max(10 intervals, MinStall), and how long ago
// the last one did. Only a follower with Relay reads on its own.
func (f *Follower) Stalled() (bool, time.Duration) {
	ago := time.Since(time.Unix(0, f.last.Load()))
	return ago > max(10*f.cfg.Interval, MinStall), ago
}

// Run reads the log until ctx ends: first where it ends, then every Interval with Relay, and
// whenever an offered event waits. Meanwhile it expires old events and recovers lost ones.
func (f *Follower) Run(ctx context.Context) {
	f.last.Store(time.Now().UnixNano())
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		select { // once at the start too: a restart after a long stop has much to expire
		case <-f.started:
			call, cancel := context.WithTimeout(ctx, max(f.cfg.ExpireEvery/2, time.Second))
			if err := f.expire(call); err != nil && ctx.Err() == nil {
				metrics.RelayError(metrics.RelayExpire)
			}
			cancel()
		case <-ctx.Done():
			return
		}
		f.every(ctx, f.cfg.ExpireEvery, nil, nil, "deleting the expired events", metrics.RelayExpire, f.expire)
	})
	wg.Go(func() {
		f.every(ctx, f.cfg.RecoverEvery, f.recover, f.peerGoneQuiet, "logging the events of writes whose writer stopped", metrics.RelayRecover, f.recoverLost)
	})
	if !f.start(ctx) {
		return
	}
	ticker := time.NewTicker(f.cfg.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if !f.cfg.Relay && !f.waiting() {
				continue
			}
		case <-f.kick:
		}
		for f.readOnce(ctx) { // a full page: read on
		}
	}
}

// waiting says whether offered events wait for a read: then a follower without Relay reads
// every interval too, until the positions before them are decided.
func (f *Follower) waiting() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.offered) > 0
}

// start reads where the log ends, and its key and size, until it can, and hands from after the
// end: what was written before, no subscriber here was there for (a client that was resumes
// from its cursor). But the end is the last position given out, and the events of the last
// positions may not be logged yet: their writers (of any instance) are at work, and will
// acknowledge them after this start, to clients subscribed here by then. So it hands from the
// first position of the last Page that its read of them does not decide (a hole, or an event
// still to come); the events logged after that one before the start are handed too: once
// more, rather than never. An event offered meanwhile is handed from its own position.
func (f *Follower) start(ctx context.Context) bool {
	for {
		query, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
		key, err := f.cfg.Log.Key(query)
		var stats store.LogStats
		if err == nil {
			stats, err = f.cfg.Log.Stats(query)
		}
		last := stats.Last
		if err == nil && last > 0 {
			var decided int64
			if _, decided, err = f.cfg.Log.ReadEvents(query, max(last-int64(f.cfg.Page), 0), f.cfg.Page); err == nil {
				last = min(last, decided)
			}
		}
		cancel()
		if ctx.Err() != nil {
			return false
		}
		f.readDone(err)
		if err == nil {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.next, f.cursors, f.stats = last+1, NewCursors(key), stats
			metrics.EventLogStats(stats.Events, stats.Oldest, stats.Last)
			for p := range f.offered {
				f.next = min(f.next, p)
			}
			close(f.started)
			if f.drain() {
				f.read()
			}
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(f.cfg.Interval):
		}
	}
}

// readOnce reads the log from next on, hands what it read and what was offered behind it, and
// says whether it read a full page.
func (f *Follower) readOnce(ctx context.Context) bool {
	f.mu.Lock()
	after := f.next - 1
	f.mu.Unlock()
	query, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	events, upto, err := f.cfg.Log.ReadEvents(query, after, f.cfg.Page)
	cancel()
	if ctx.Err() != nil {
		return false
	}
	f.readDone(err)
	if err != nil {
		return false
	}
	if upto-after > int64(len(events)) {
		f.Recover() // it passed over a hole, or what expired: its writer may have stopped (peerGoneQuiet)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range events {
		if e.Position >= f.next { // not handed by an offer while the read was under way
			delete(f.offered, e.Position)
			f.hand(e)
		}
	}
	f.next = max(f.next, upto+1)
	for p := range f.offered {
		if p < f.next {
			delete(f.offered, p)
		}
	}
	if f.drain() && upto > after {
		f.read() // more was decided meanwhile, maybe
	}
	return len(events) >= f.cfg.Page
}

// readDone records the outcome of a read: its failure is logged once, until one succeeds.
func (f *Follower) readDone(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		metrics.RelayError(metrics.RelayTail)
		if !f.failing {
			f.cfg.Logger.Error("reading the event log failed; retrying", zap.Error(err))
		}
		f.failing = true
		return
	}
	f.last.Store(time.Now().UnixNano())
	if f.failing {
		f.cfg.Logger.Info("reading the event log again")
	}
	f.failing = false
}

// expire deletes the events older than the TTL, and those past Keep, and notes what is left.
func (f *Follower) expire(ctx context.Context) error {
	if _, err := f.cfg.Log.ExpireEvents(ctx, time.Now().Add(-f.cfg.TTL), f.cfg.Keep); err != nil {
		return err
	}
	stats, err := f.cfg.Log.Stats(ctx)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.stats = stats
	f.mu.Unlock()
	metrics.EventLogStats(stats.Events, stats.Oldest, stats.Last)
	return nil
}

// recoverLost logs the events of writes whose writer stopped before it logged them.
func (f *Follower) recoverLost(ctx context.Context) error {
	n, err := f.cfg.Log.RecoverEvents(ctx, time.Now().Add(-f.cfg.RecoverAfter))
	for range n {
		metrics.RelayEvent(metrics.RelayRecovered)
	}
	if n > 0 {
		f.read()
	}
	return err
}

// every runs do every period, RecoverAfter after each signal of soon (then also RecoverAfter
// after a failure), and every RecoverAfter while due (if any) says so, each under a timeout
// (half the period, at least 1s), until ctx ends; a failure is counted at stage, and logged once
// until do succeeds again.
func (f *Follower) every(ctx context.Context, period time.Duration, soon <-chan struct{}, due func() bool, what, stage string, do func(context.Context) error) {
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	var watch <-chan time.Time
	if due != nil {
		w := time.NewTicker(f.cfg.RecoverAfter)
		defer w.Stop()
		watch = w.C
	}
	failing := false
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-retry:
		case <-watch:
			if !due() {
				continue
			}
		case <-soon:
			select {
			case <-ctx.Done():
				return
			case <-time.After(f.cfg.RecoverAfter):
			}
		}
		retry = nil
		call, cancel := context.WithTimeout(ctx, max(period/2, time.Second))
		err := do(call)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			metrics.RelayError(stage)
			if !failing {
				f.cfg.Logger.Warn(what+" failed; trying again", zap.Error(err))
			}
			failing = true
			if soon != nil { // again soon, rather than a period later
				retry = time.After(f.cfg.RecoverAfter)
			}
		default:
			failing = false
		}
	}
}
