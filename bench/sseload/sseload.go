// Package sseload is the server-sent events load client of the benchmarks: a fleet of GraphQL
// over SSE subscriptions (graphql-sse's distinct connections mode, as an EventSource sends
// them: a GET with the query in its query string), each read by a goroutine of its own that
// times when it reads an event, as bench/wsload's fleet does for WebSockets (and with its
// rounds). The harness of `make bench` (bench/run) uses it.
//
// Over HTTP/1.1 each subscription is a connection of its own; over HTTP/2 (cleartext, with
// prior knowledge: h2c) the subscriptions are streams spread evenly over a given number of
// connections.
package sseload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postsedge/caddy-posts/bench/wsload"
)

// Query is the subscription of every stream: the one wsload's fleet subscribes to.
const Query = "subscription { postCreated { id title } }"

// Options say how a fleet reaches the server.
type Options struct {
	// Headers are sent with every request, e.g. Authorization.
	Headers http.Header
	// HTTP2Conns, when not 0, makes the fleet speak HTTP/2 without TLS (h2c, prior knowledge)
	// over this many connections, the streams spread evenly over them; 0 is HTTP/1.1, one
	// connection a subscription.
	HTTP2Conns int
}

// Fleet is n subscriptions, each with a reader goroutine that times the events it reads.
type Fleet struct {
	n       int
	clients []*http.Client // one for HTTP/1.1; one a connection for HTTP/2
	bodies  []*bufferedBody
	ctx     context.Context
	cancel  context.CancelFunc
	cur     atomic.Pointer[wsload.Round]
	readers sync.WaitGroup
	closing atomic.Bool
	once    sync.Once

	mu       sync.Mutex
	odd      []string       // the first few unexpected events
	oddCount int            // how many
	ends     map[string]int // how the readers ended
}

// Open subscribes n times to the GraphQL endpoint at endpoint (http://…/graphql), and returns
// once every stream has begun (its headers and opening comment read). Event 0 is timed from
// the start.
func Open(ctx context.Context, endpoint string, n int, opts Options) (*Fleet, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := &Fleet{n: n, bodies: make([]*bufferedBody, n), ctx: ctx, cancel: cancel, ends: map[string]int{}}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	if opts.HTTP2Conns == 0 {
		f.clients = []*http.Client{{Transport: &http.Transport{
			DialContext: dialer.DialContext, DisableCompression: true, DisableKeepAlives: true,
			ResponseHeaderTimeout: 10 * time.Second,
		}}}
	} else {
		// A transport of its own for each connection: Go's HTTP/2 transport would otherwise
		// put as many streams on one connection as the server allows (250 for Go's server).
		for range opts.HTTP2Conns {
			var protocols http.Protocols
			protocols.SetUnencryptedHTTP2(true)
			f.clients = append(f.clients, &http.Client{Transport: &http.Transport{
				DialContext: dialer.DialContext, DisableCompression: true, Protocols: &protocols,
				ResponseHeaderTimeout: 10 * time.Second,
			}})
		}
	}
	target := endpoint + "?" + url.Values{"query": {Query}}.Encode()
	f.Begin(0)
	err := wsload.Each(n, func(i int) error {
		body, err := f.subscribe(f.clients[i%len(f.clients)], target, opts)
		if err != nil {
			return fmt.Errorf("subscription %d: %w", i, err)
		}
		f.bodies[i] = body
		f.readers.Add(1)
		go f.read(i, body)
		return nil
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// subscribe sends one subscription and reads the stream's headers and opening comment; the
// stream's body is the caller's to read.
func (f *Fleet) subscribe(c *http.Client, target string, opts Options) (*bufferedBody, error) {
	req, err := http.NewRequestWithContext(f.ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	maps.Copy(req.Header, opts.Headers)
	req.Header.Set("Accept", "text/event-stream")
	res, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*bufferedBody, error) {
		res.Body.Close()
		return nil, err
	}
	if wantMajor := map[bool]int{true: 2, false: 1}[opts.HTTP2Conns > 0]; res.ProtoMajor != wantMajor {
		return fail(fmt.Errorf("the stream came over %s; want HTTP/%d", res.Proto, wantMajor))
	}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		answer, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fail(fmt.Errorf("%s (%s): %s", res.Status, res.Header.Get("Content-Type"), answer))
	}
	b := &bufferedBody{Reader: bufio.NewReader(res.Body), Closer: res.Body}
	// The opening comment, with a deadline of its own: the request's context is the stream's.
	opened := time.AfterFunc(10*time.Second, func() { res.Body.Close() })
	line, err := b.ReadSlice('\n')
	if !opened.Stop() || err != nil || !bytes.HasPrefix(line, []byte(":")) {
		return fail(fmt.Errorf("waiting for the opening comment: got %q, %v", line, err))
	}
	return b, nil
}

// bufferedBody is a stream's body and its reader.
type bufferedBody struct {
	*bufio.Reader
	io.Closer
}

// read reads stream i until it ends, and times the events of the current round.
func (f *Fleet) read(i int, r *bufferedBody) {
	defer f.readers.Done()
	var event, data []byte
	for {
		line, err := r.ReadSlice('\n')
		now := time.Now()
		if err != nil {
			f.ended(err)
			return
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		switch field, value, _ := bytes.Cut(line, []byte(":")); {
		case len(line) == 0: // the end of an event: dispatch it
			if len(event) > 0 || len(data) > 0 {
				if seq, ok := eventSeq(event, data); ok {
					if round := f.cur.Load(); round != nil {
						round.Arrived(i, seq, now)
					}
				} else {
					f.unexpected(fmt.Sprintf("event %q, data %s", event, data))
				}
			}
			event, data = event[:0], data[:0]
		case len(field) == 0: // a comment: the keep-alive
		case string(field) == "event":
			event = append(event[:0], bytes.TrimPrefix(value, []byte(" "))...)
		case string(field) == "data":
			data = append(data, bytes.TrimPrefix(value, []byte(" "))...)
		}
	}
}

// eventSeq is the number of the event of a next event: its post's title is ev-<number>.
func eventSeq(event, data []byte) (int, bool) {
	var res struct {
		Data *struct {
			PostCreated struct{ ID, Title string }
		}
		Errors json.RawMessage
	}
	if string(event) != "next" || json.Unmarshal(data, &res) != nil || res.Data == nil || len(res.Errors) > 0 {
		return 0, false
	}
	rest, ok := strings.CutPrefix(res.Data.PostCreated.Title, "ev-")
	if !ok {
		return 0, false
	}
	seq, err := strconv.Atoi(rest)
	return seq, err == nil
}

func (f *Fleet) unexpected(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.oddCount++; len(f.odd) < 5 {
		f.odd = append(f.odd, what)
	}
}

// ended records why a reader ended.
func (f *Fleet) ended(err error) {
	why := "error: " + err.Error()
	switch {
	case f.closing.Load():
		why = "closed here"
	case errors.Is(err, io.EOF):
		why = "the server ended the stream"
	}
	f.mu.Lock()
	f.ends[why]++
	f.mu.Unlock()
}

// Len is the number of subscriptions.
func (f *Fleet) Len() int { return f.n }

// Begin starts timing event seq; it must be published after.
func (f *Fleet) Begin(seq int) *wsload.Round {
	r := wsload.NewRound(seq, f.n)
	f.cur.Store(r)
	return r
}

// Close ends every stream (an SSE client has no other way to unsubscribe) and waits for the
// readers. Closing again does nothing.
func (f *Fleet) Close() {
	f.once.Do(func() {
		f.closing.Store(true)
		f.cancel()
		for _, b := range f.bodies {
			if b != nil {
				b.Close()
			}
		}
		f.readers.Wait()
		for _, c := range f.clients {
			c.CloseIdleConnections()
		}
		f.bodies, f.clients = nil, nil
		f.cur.Store(nil)
	})
}

// Check says whether any stream ended other than by closing here, or any event was not an
// event of the rounds.
func (f *Fleet) Check() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for why, count := range f.ends {
		if why != "closed here" {
			errs = append(errs, fmt.Errorf("%d of %d streams ended with %s", count, f.n, why))
		}
	}
	if f.oddCount > 0 {
		errs = append(errs, fmt.Errorf("%d unexpected events, such as %q", f.oddCount, f.odd))
	}
	return errors.Join(errs...)
}
