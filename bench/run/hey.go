package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// request is what one load run sends, over and over.
type request struct {
	method  string // GET unless set
	url     string
	body    string // sent as application/json when not empty
	headers []string
	status  int // the status every answer must have
}

// result is one load run: its answered requests' latencies (or its events' times to the last
// subscriber), sorted, how long it took, and for a WebSocket run the server's memory per
// connection.
type result struct {
	latencies []float64 // seconds
	seconds   float64   // from the start until the last answer
	perConn   float64   // bytes of resident memory
}

// heyStep is the resolution of hey's CSV: seconds with 4 decimals.
const heyStep = 1e-4

// load runs hey for d (or for n requests, if n is not 0) with conc workers and returns what it
// measured. rate, when not 0, is the total requests per second, spread over the workers (hey's
// -q is per worker); 0 is closed loop, each worker sending its next request as soon as it has
// the answer.
func load(ctx context.Context, req request, conc int, d time.Duration, n int, rate float64) (result, error) {
	args := []string{"-z", d.String(), "-c", strconv.Itoa(conc), "-t", "150", "-o", "csv", "-disable-compression"}
	if n > 0 {
		args[0], args[1] = "-n", strconv.Itoa(n)
	}
	if rate > 0 {
		args = append(args, "-q", strconv.FormatFloat(rate/float64(conc), 'f', 3, 64))
	}
	if req.method != "" {
		args = append(args, "-m", req.method)
	}
	if req.body != "" {
		args = append(args, "-T", "application/json", "-d", req.body)
	}
	for _, h := range req.headers {
		args = append(args, "-H", h)
	}
	args = append(args, req.url)
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "hey", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("hey %s: %v: %s", req.url, err, stderr.Bytes())
	}
	return parseCSV(out, req.status)
}

// parseCSV reads hey's CSV (response-time,DNS+dialup,DNS,Request-write,Response-delay,
// Response-read,status-code,offset; times in seconds). hey leaves failed requests out of it, so
// a run that failed shows as a lower count.
func parseCSV(out []byte, status int) (result, error) {
	var r result
	bad := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) < 8 || f[0] == "response-time" {
			continue
		}
		lat, err1 := strconv.ParseFloat(f[0], 64)
		offset, err2 := strconv.ParseFloat(f[7], 64)
		if err1 != nil || err2 != nil {
			return r, fmt.Errorf("hey wrote %q", sc.Text())
		}
		if f[6] != strconv.Itoa(status) {
			bad[f[6]]++
			continue
		}
		r.latencies = append(r.latencies, lat)
		r.seconds = max(r.seconds, offset+lat)
	}
	if len(bad) > 0 {
		return r, fmt.Errorf("answers with another status than %d: %v", status, bad)
	}
	if len(r.latencies) == 0 {
		return r, fmt.Errorf("no answers: %.200s", out)
	}
	slices.Sort(r.latencies)
	return r, nil
}

// throughput is answers per second.
func (r result) throughput() float64 { return float64(len(r.latencies)) / r.seconds }

// quantile is the latency below which q of the answers came, in seconds. hey rounds to 0.1 ms,
// so the answers in the step that holds the rank are taken as spread evenly over it (the
// grouped median), which resolves a shift of less than a step between two runs.
func (r result) quantile(q float64) float64 {
	n := len(r.latencies)
	rank := q * float64(n)
	v := r.latencies[min(int(rank), n-1)]
	lo, _ := slices.BinarySearch(r.latencies, v-heyStep/2)
	hi, _ := slices.BinarySearch(r.latencies, v+heyStep/2)
	return math.Max(0, v-heyStep/2+(rank-float64(lo))/float64(hi-lo)*heyStep)
}
