package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// request is what one load run sends, over and over.
type request struct {
	method  string // GET unless set
	url     string
	body    string // sent as application/json when not empty
	headers []string
	status  int    // the status every answer must have
	want    string // when set, what every answer must contain
	// ids, when set, gives the ids of a run's requests before the run, for the n requests of
	// the run (0 for a run of a duration): the i-th request takes the (i mod len)-th, in place of
	// "{id}" in url and body. So a run reads random posts, or deletes posts made for it.
	ids func(ctx context.Context, n int) ([]string, error)
	// instead and every, when set, make every every-th request of a run (the every-th, the
	// 2·every-th, …) instead's: two requests mixed in one run, as row 4f's creates with the
	// PATCHes that are refused.
	instead *request
	every   int
}

// result is one load run: its answered requests' latencies (or its events' times to the last
// subscriber), sorted, how long it took, and for a WebSocket run the server's memory per
// connection, or its CPU time per event delivered.
type result struct {
	latencies   []float64 // seconds
	seconds     float64   // from the start until the last answer
	perConn     float64   // bytes of resident memory
	cpuPerEvent float64   // seconds
}

// throughput is answers per second.
func (r result) throughput() float64 { return float64(len(r.latencies)) / r.seconds }

// quantile is the latency below which q of the answers came, in seconds.
func (r result) quantile(q float64) float64 {
	return r.latencies[min(int(q*float64(len(r.latencies))), len(r.latencies)-1)]
}

// load sends req for d (or n times, if n is not 0) from conc workers and returns what it
// measured. rate, when not 0, is the total requests per second, spread evenly over the
// workers; 0 is closed loop, each worker sending its next request as soon as it has the answer.
func load(ctx context.Context, req request, conc int, d time.Duration, n int, rate float64) (result, error) {
	do, err := req.sender(ctx, n)
	if err != nil {
		return result{}, err
	}
	if req.instead != nil {
		mixed, err := req.instead.sender(ctx, n)
		if err != nil {
			return result{}, err
		}
		alone := do
		do = func(ctx context.Context, c *http.Client, i int) error {
			if i%req.every == req.every-1 {
				return mixed(ctx, c, i)
			}
			return alone(ctx, c, i)
		}
	}
	return drive(ctx, conc, d, n, rate, do)
}

// sender returns what sends the i-th request of a run of n (0 for a run of a duration) of req,
// and checks its answer; req.instead is not its.
func (req request) sender(ctx context.Context, n int) (func(ctx context.Context, c *http.Client, i int) error, error) {
	var ids []string
	if req.ids != nil {
		var err error
		if ids, err = req.ids(ctx, n); err != nil || len(ids) == 0 {
			return nil, fmt.Errorf("the ids of %s: %d, %v", req.url, len(ids), err)
		}
	}
	method := cmp.Or(req.method, http.MethodGet)
	return func(ctx context.Context, c *http.Client, i int) error {
		url, body := req.url, req.body
		if ids != nil {
			id := ids[i%len(ids)]
			url, body = strings.ReplaceAll(url, "{id}", id), strings.ReplaceAll(body, "{id}", id)
		}
		res, answer, err := send(ctx, c, method, url, body, req.headers)
		if err == nil && (res.StatusCode != req.status || !bytes.Contains(answer, []byte(req.want))) {
			err = fmt.Errorf("%s %s: %d %.200s; want %d %s", method, url, res.StatusCode, answer, req.status, req.want)
		}
		return err
	}, nil
}

// send makes one request with c and reads its whole answer; the response's body is closed.
func send(ctx context.Context, c *http.Client, method, url, body string, headers []string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Set(name, value)
	}
	res, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(res.Body)
	return res, answer, err
}

// drive is the load generator: conc workers call do with the numbers 0, 1, 2, … in turn, each
// its next one as soon as its last returned (or, with a rate, at its share of the rate), for d
// or until n calls were made, and it times every call. The workers share a fresh pool of
// conc keep-alive connections, so every run starts as a new client would. The first error
// ends the run.
func drive(ctx context.Context, conc int, d time.Duration, n int, rate float64, do func(ctx context.Context, c *http.Client, i int) error) (result, error) {
	transport := &http.Transport{MaxIdleConnsPerHost: conc, DisableCompression: true}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: time.Minute}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var (
		next      atomic.Int64
		mu        sync.Mutex
		latencies []float64
		last      time.Duration
		wg        sync.WaitGroup
	)
	start := time.Now()
	for range conc {
		wg.Go(func() {
			var mine []float64
			var tick <-chan time.Time
			if rate > 0 {
				t := time.NewTicker(time.Duration(float64(conc) / rate * float64(time.Second)))
				defer t.Stop()
				tick = t.C
			}
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if n > 0 && i >= n || n == 0 && time.Since(start) >= d {
					break
				}
				if tick != nil {
					select {
					case <-tick:
					case <-ctx.Done():
					}
				}
				began := time.Now()
				if err := do(ctx, client, i); err != nil {
					cancel(err)
					break
				}
				mine = append(mine, time.Since(began).Seconds())
			}
			mu.Lock()
			latencies, last = append(latencies, mine...), max(last, time.Since(start))
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return result{}, err
	}
	if len(latencies) == 0 {
		return result{}, errors.New("no answers")
	}
	slices.Sort(latencies)
	return result{latencies: latencies, seconds: last.Seconds()}, nil
}
