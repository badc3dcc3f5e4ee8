// Package wsload is the WebSocket load client of the benchmarks: a fleet of graphql-transport-ws
// connections, each initialised and subscribed, whose reader goroutines time when each of them
// reads an event. BenchmarkSubscriptions and the harness of `make bench` (bench/run) both use it.
//
// Events are told apart by their post's title, ev-<number>: Begin starts timing event number
// seq, which the caller then publishes, and Wait says when every connection has read it.
package wsload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Subprotocol is the one the fleet speaks.
const Subprotocol = "graphql-transport-ws"

// Messages the fleet sends, and the ones the baselines answer with.
var (
	// Subscribe is operation 1 of every connection.
	Subscribe = []byte(`{"id":"1","type":"subscribe","payload":{"query":"subscription { postCreated { id title } }"}}`)
	Ack       = []byte(`{"type":"connection_ack"}`)
)

// SubscribeTo is operation 1's subscribe message for the posts of one user alone: Subscribe's
// selection, with postCreated's userId in the variables.
func SubscribeTo(userID string) []byte {
	return fmt.Appendf(nil, `{"id":"1","type":"subscribe","payload":{"query":"subscription($userId: ID) { postCreated(userId: $userId) { id title } }","variables":{"userId":%q}}}`, userID)
}

// Init is the connection_init message with an API key.
func Init(apiKey string) []byte {
	return []byte(`{"type":"connection_init","payload":{"Authorization":"ApiKey ` + apiKey + `"}}`)
}

// Next is the `next` message of operation 1 for event seq about post id, as the module writes it.
func Next(id string, seq int) []byte {
	return fmt.Appendf(nil, `{"id":"1","type":"next","payload":{"data":{"postCreated":{"id":%q,"title":"ev-%d"}}}}`, id, seq)
}

// dialWorkers is how many connections are opened at once.
const dialWorkers = 8

// Fleet is n client connections, each initialised and subscribed, each with a reader goroutine
// that times the events it reads.
type Fleet struct {
	n       int
	init    []byte
	conns   []*websocket.Conn // nil once closed, so that a closed fleet holds no memory
	hc      *http.Client
	ctx     context.Context
	cancel  context.CancelFunc
	cur     atomic.Pointer[Round] // the event being timed
	readers sync.WaitGroup
	closing atomic.Bool
	once    sync.Once

	subscribe []byte // what each connection sends after init: Subscribe, or another

	mu       sync.Mutex
	odd      []string       // the first few unexpected messages
	oddCount int            // how many
	ends     map[string]int // how the readers ended, by close code or error
}

// Round is one event, timed at each connection.
type Round struct {
	seq   int
	start time.Time
	times []time.Time // when each connection read it; written once each, by its reader
	got   atomic.Int32
	done  chan struct{} // closed when every connection has read it
}

// Each calls open for 0 to n-1, dialWorkers at once, and stops at the first error, which it
// returns: how a fleet opens its connections or subscriptions.
func Each(n int, open func(i int) error) error {
	var next atomic.Int64
	errs := make(chan error, dialWorkers)
	var workers sync.WaitGroup
	for range dialWorkers {
		workers.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := open(i); err != nil {
					errs <- err
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	workers.Wait()
	close(errs)
	return <-errs
}

// Stats is how long one event took to reach the connections, from just before it was published.
type Stats struct {
	First, Median, Last time.Duration
}

// Open opens n connections to url, each sending init and then Subscribe. Event 0 is timed from
// the start, for baselines that send it as soon as a connection subscribes.
func Open(ctx context.Context, url string, n int, init []byte) (*Fleet, error) {
	return OpenSubscribed(ctx, url, n, init, Subscribe)
}

// OpenSubscribed is Open with subscribe in place of Subscribe: another subscribe message of
// operation 1, whose events have the same selection.
func OpenSubscribed(ctx context.Context, url string, n int, init, subscribe []byte) (*Fleet, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := &Fleet{
		n:         n,
		init:      init,
		subscribe: subscribe,
		conns:     make([]*websocket.Conn, n),
		hc: &http.Client{Transport: &http.Transport{
			DisableCompression: true, DisableKeepAlives: true, MaxIdleConnsPerHost: -1,
		}},
		ctx: ctx, cancel: cancel, ends: map[string]int{},
	}
	f.Begin(0)
	err := Each(n, func(i int) error {
		c, err := f.dial(url)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		f.conns[i] = c
		f.readers.Add(1)
		go f.read(i, c)
		return nil
	})
	if err != nil {
		f.Close(false)
		return nil, err
	}
	return f, nil
}

// Len is the number of connections.
func (f *Fleet) Len() int { return f.n }

// dial opens one connection, initialises it and subscribes.
func (f *Fleet) dial(url string) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
	defer cancel()
	c, res, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{Subprotocol}, HTTPClient: f.hc})
	if err != nil {
		if res != nil {
			return nil, fmt.Errorf("%w (status %d)", err, res.StatusCode)
		}
		return nil, err
	}
	fail := func(err error) (*websocket.Conn, error) {
		_ = c.CloseNow()
		return nil, err
	}
	if c.Subprotocol() != Subprotocol {
		return fail(fmt.Errorf("subprotocol %q; want %s", c.Subprotocol(), Subprotocol))
	}
	if err := c.Write(ctx, websocket.MessageText, f.init); err != nil {
		return fail(err)
	}
	_, data, err := c.Read(ctx)
	if err != nil {
		return fail(fmt.Errorf("waiting for connection_ack: %w", err))
	}
	var ack struct{ Type string }
	if json.Unmarshal(data, &ack) != nil || ack.Type != "connection_ack" {
		return fail(fmt.Errorf("got %s; want connection_ack", data))
	}
	if err := c.Write(ctx, websocket.MessageText, f.subscribe); err != nil {
		return fail(err)
	}
	return c, nil
}

// read reads connection i until it ends, and times the events of the current round.
func (f *Fleet) read(i int, c *websocket.Conn) {
	defer f.readers.Done()
	for {
		_, data, err := c.Read(f.ctx)
		now := time.Now()
		if err != nil {
			f.ended(err)
			return
		}
		seq, ok := eventSeq(data)
		if !ok {
			f.mu.Lock()
			if f.oddCount++; len(f.odd) < 5 {
				f.odd = append(f.odd, string(data))
			}
			f.mu.Unlock()
			continue
		}
		if r := f.cur.Load(); r != nil {
			r.Arrived(i, seq, now)
		}
	}
}

// eventSeq is the number of the event of a `next` message of operation 1: its post's title
// is ev-<number>.
func eventSeq(data []byte) (int, bool) {
	var m struct {
		ID      string
		Type    string
		Payload struct {
			Data *struct {
				PostCreated struct{ ID, Title string }
			}
			Errors json.RawMessage
		}
	}
	if json.Unmarshal(data, &m) != nil || m.ID != "1" || m.Type != "next" || m.Payload.Data == nil || len(m.Payload.Errors) > 0 {
		return 0, false
	}
	rest, ok := strings.CutPrefix(m.Payload.Data.PostCreated.Title, "ev-")
	if !ok {
		return 0, false
	}
	seq, err := strconv.Atoi(rest)
	return seq, err == nil
}

// ended records why a reader ended.
func (f *Fleet) ended(err error) {
	why := "error: " + err.Error()
	switch code := websocket.CloseStatus(err); {
	case code != -1:
		why = fmt.Sprintf("close %d", code)
	case f.closing.Load() && (errors.Is(err, net.ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF)):
		why = "closed here"
	}
	f.mu.Lock()
	f.ends[why]++
	f.mu.Unlock()
}

// Begin starts timing event seq; it must be published after.
func (f *Fleet) Begin(seq int) *Round {
	r := NewRound(seq, f.n)
	f.cur.Store(r)
	return r
}

// NewRound starts timing event seq at n connections, numbered from 0, as of now: for another
// client's fleet (bench/sseload) to time its events as this one does.
func NewRound(seq, n int) *Round {
	return &Round{seq: seq, start: time.Now(), times: make([]time.Time, n), done: make(chan struct{})}
}

// Arrived records that connection i read event seq at t. Each connection's reader calls it, and
// only its own; an event other than the round's (one of a round given up on) is not counted,
// nor the round's again.
func (r *Round) Arrived(i, seq int, t time.Time) {
	if r.seq != seq || !r.times[i].IsZero() {
		return
	}
	r.times[i] = t
	if int(r.got.Add(1)) == len(r.times) {
		close(r.done)
	}
}

// Current is the event being timed.
func (f *Fleet) Current() *Round { return f.cur.Load() }

// Wait says whether every connection read the event of r within d.
func (r *Round) Wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.done:
		return true
	case <-t.C:
		return false
	}
}

// Got is how many connections have read the event.
func (r *Round) Got() int { return int(r.got.Load()) }

// Stats is how long the event took; call it after Wait said true.
func (r *Round) Stats() Stats {
	ds := make([]time.Duration, len(r.times))
	for i, t := range r.times {
		ds[i] = t.Sub(r.start)
	}
	slices.Sort(ds)
	return Stats{First: ds[0], Median: ds[len(ds)/2], Last: ds[len(ds)-1]}
}

// Close closes every connection, with the close handshake (1000) or at once, and waits for
// the readers. Closing again does nothing.
func (f *Fleet) Close(handshake bool) {
	f.once.Do(func() {
		f.closing.Store(true)
		var next atomic.Int64
		var workers sync.WaitGroup
		for range 4 * dialWorkers {
			workers.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= len(f.conns) {
						return
					}
					c := f.conns[i]
					if c == nil {
						continue
					}
					var err error
					if handshake {
						err = c.Close(websocket.StatusNormalClosure, "")
					} else {
						err = c.CloseNow()
					}
					if err != nil && !errors.Is(err, net.ErrClosed) {
						f.mu.Lock()
						f.ends["Close: "+err.Error()]++
						f.mu.Unlock()
					}
				}
			})
		}
		workers.Wait()
		f.cancel()
		f.readers.Wait()
		f.hc.CloseIdleConnections()
		f.conns = nil
		f.cur.Store(nil)
	})
}

// Check says how the readers ended and whether any message was not an event: an error for an
// unexpected message or for an end other than closing here (or with want).
func (f *Fleet) Check(want websocket.StatusCode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for why, count := range f.ends {
		if why != "closed here" && why != fmt.Sprintf("close %d", want) {
			errs = append(errs, fmt.Errorf("%d of %d connections ended with %s", count, f.n, why))
		}
	}
	if f.oddCount > 0 {
		errs = append(errs, fmt.Errorf("%d unexpected messages, such as %q", f.oddCount, f.odd))
	}
	return errors.Join(errs...)
}

// Ends is how the readers ended, by close code or error, for a report.
func (f *Fleet) Ends() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.ends)
}

// ResidentMemory is the resident set size of process pid, in bytes, from /proc: what the
// connections of a server process cost, read before and after they open.
func ResidentMemory(pid int) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
