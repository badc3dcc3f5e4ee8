package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/bench/wsload"
)

// The feeds row (9c): on a fresh server each run, feedSubscribers WebSocket subscribers in feeds
// feeds, each feed a user's posts (postCreated(userId:), the user in the subscribe message's
// variables: user-01, user-02, …) with feedSubscribers/feeds subscribers; then a burst of
// feedEvents posts to each feed, from a writer a feed, which writes its next post once every
// subscriber of its feed has its last. The result is the server's CPU time over the burst
// (cpuTime) divided by the events delivered, feedEvents × feedSubscribers: the module's
// includes its writes (POST /posts) that make the events, as ws-bare's its POST /publish.
const (
	feeds           = 10
	feedSubscribers = 1000
	feedEvents      = 50
)

// feedUser is the user of feed i.
func feedUser(i int) string { return fmt.Sprintf("user-%02d", i+1) }

// feedBurst is one run of a side of row 9c on a server that start starts, its subscribers
// initialised with init.
func feedBurst(ctx context.Context, start func(context.Context) (*wsServer, error), init []byte, profile string) (r result, err error) {
	srv, err := start(ctx)
	if err != nil {
		return r, err
	}
	defer srv.stop()
	fleets := make([]*wsload.Fleet, feeds)
	defer func() {
		for _, f := range fleets {
			if f != nil {
				f.Close(false)
			}
		}
	}()
	for i := range fleets {
		if fleets[i], err = wsload.OpenSubscribed(ctx, srv.url, feedSubscribers/feeds, init, wsload.SubscribeTo(feedUser(i))); err != nil {
			return r, fmt.Errorf("feed %d: %w", i, err)
		}
	}
	// Event n of feed i is numbered n·feeds + i, so that no feed counts another's.
	event := func(i, n int, wait time.Duration) (*wsload.Round, error) {
		f, seq := fleets[i], n*feeds+i
		round := f.Begin(seq)
		if err := srv.publish(ctx, seq, feedUser(i)); err != nil {
			return round, err
		}
		if !round.Wait(wait) {
			return round, fmt.Errorf("event %d of feed %d reached %d of its %d subscribers in %s", seq, i, round.Got(), f.Len(), wait)
		}
		return round, nil
	}
	// As fanOut's subscribed: events until one reaches every subscriber of each feed, which are
	// not counted.
	n := 0
	for i := range fleets {
		for try := 0; ; try++ {
			n++
			if _, err = event(i, n, 5*time.Second); err == nil {
				break
			}
			if try == 4 {
				return r, err
			}
		}
	}

	first := n + 1
	before, err := cpuTime(srv.pid)
	if err != nil {
		return r, err
	}
	began := time.Now()
	profiled := make(chan error, 1)
	if profile != "" && srv.pprof != "" {
		// A CPU profile of the burst's first second (Caddy serves /debug/pprof).
		go func() { profiled <- fetchTo(ctx, srv.pprof+"/profile?seconds=1", profile+"-cpu.pprof") }()
	} else {
		profiled <- nil
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range fleets {
		wg.Go(func() {
			var mine []float64
			var err error
			for n := first; n < first+feedEvents && err == nil; n++ {
				var round *wsload.Round
				if round, err = event(i, n, 30*time.Second); err == nil {
					mine = append(mine, round.Stats().Last.Seconds())
				}
			}
			mu.Lock()
			r.latencies, errs = append(r.latencies, mine...), append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(append(errs, <-profiled)...); err != nil {
		return r, err
	}
	r.seconds = time.Since(began).Seconds()
	after, err := cpuTime(srv.pid)
	if err != nil {
		return r, err
	}
	delivered := feeds * feedEvents * (feedSubscribers / feeds)
	r.cpuPerEvent = (after - before).Seconds() / float64(delivered)
	slices.Sort(r.latencies)

	for i, f := range fleets {
		f.Close(true)
		if err := f.Check(websocket.StatusNormalClosure); err != nil {
			return r, fmt.Errorf("feed %d: %w", i, err)
		}
	}
	return r, nil
}
