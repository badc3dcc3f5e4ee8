package events

import (
	"cmp"
	"context"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// Source delivers batches of the events recorded by any instance, from when it starts until ctx
// ends. Poll is one; a change stream could be another.
type Source interface {
	// Run calls deliver with each batch, one at a time, until ctx ends.
	Run(ctx context.Context, deliver func(Batch))
}

// Batch is what a Source read at once.
type Batch struct {
	// Events are in order of At, then ID; an event may come again in a later batch (a look-back
	// reads it again), never before Floor.
	Events []store.Event
	// Err says the read failed: Events is empty and the source tries again.
	Err error
	// Floor is the oldest At a later batch may hold: what is older will not come again, so a
	// relay may forget it.
	Floor time.Time
	// Upto, unless zero, is when the read began: every event that committed before it is in
	// this batch or an earlier one. Zero for a read that left more to read (a full page).
	Upto time.Time
}

// The defaults of Poll.
const (
	DefaultPollInterval = 100 * time.Millisecond
	DefaultLookback     = 5 * time.Second
	DefaultPage         = 1000
)

// Poll is a Source over an EventLog: one query per interval, EventsSince(since, Page), where
// since is the start of the last successful poll less the look-back (never before the poll
// started: nothing older is replayed). An event that becomes visible more than Lookback after
// its At (a write that commits that late, or a writer whose clock is that far behind) is missed.
// After a failed query since stays where it was, so what was written meanwhile is read once the
// log answers again, a page at a time (full pages one after the other, with no wait), for as
// long as the log keeps it (its TTL).
type Poll struct {
	Log store.EventLog
	// Interval is the time between two queries. Default: DefaultPollInterval.
	Interval time.Duration
	// Lookback is how far before the last poll's start the next one reads again. Default:
	// DefaultLookback.
	Lookback time.Duration
	// Page is the most events one query returns. Default: DefaultPage.
	Page int
	// Timeout bounds each query. Default: ten intervals, at least 1s.
	Timeout time.Duration
}

// Run polls until ctx ends.
func (p *Poll) Run(ctx context.Context, deliver func(Batch)) {
	interval := cmp.Or(p.Interval, DefaultPollInterval)
	lookback := cmp.Or(p.Lookback, DefaultLookback)
	page := cmp.Or(p.Page, DefaultPage)
	timeout := cmp.Or(p.Timeout, max(10*interval, time.Second))
	start := time.Now().UTC().Truncate(time.Millisecond)
	since, limit := start, page
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		upto := time.Now()
		began := upto.UTC()
		query, cancel := context.WithTimeout(ctx, timeout)
		events, err := p.Log.EventsSince(query, since, limit)
		cancel()
		if ctx.Err() != nil {
			return
		}
		full := err == nil && len(events) == limit
		switch {
		case err != nil:
			deliver(Batch{Err: err, Floor: since})
		case full:
			// The next page starts at the last event read. A page whose events all share one
			// millisecond would be read again and again: the next query asks for twice as many.
			last := events[len(events)-1].At
			if last.After(since) {
				since, limit = last, page
			} else {
				limit *= 2
			}
			deliver(Batch{Events: events, Floor: since})
		default:
			// Everything up to began is read: the next poll looks back from there, never
			// below where this one began reading (the window only moves forward).
			limit = page
			if next := began.Add(-lookback).Truncate(time.Millisecond); next.After(since) {
				since = next
			}
			deliver(Batch{Events: events, Floor: since, Upto: upto})
		}
		if full {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
