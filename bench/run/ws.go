package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/bench/wsload"
	"github.com/postsedge/caddy-posts/store"
)

// The WebSocket pairs: wsConns idle subscribed connections, then wsEvents events to all of them.
const (
	wsConns  = 10000
	wsWarm   = 16 // connections that warm a fresh server before its memory is read
	wsEvents = 20
	wsIdle   = time.Second // between the last subscription and the memory reading
)

// wsServer is a fresh server process for one run of a WebSocket or stream side.
type wsServer struct {
	url   string // ws://…/graphql
	http  string // http://…/graphql, for streams
	pid   int
	pprof string // its /debug/pprof; "" for none
	// publish publishes event seq (titled ev-<seq>), a post of user ("": of the API key's,
	// author).
	publish func(ctx context.Context, seq int, user string) error
	stop    func()
}

// runs counts the WebSocket runs, for their directories.
var runs atomic.Int64

// moduleWS starts a Caddy of its own, on a fresh store, whose events are the posts created
// through the REST API of its READ site, where the connections go.
func (e *env) moduleWS(ctx context.Context) (*wsServer, error) { return e.module(ctx, "READ") }

// module starts a Caddy of its own, on fresh stores, whose events are the posts created through
// the REST API of site (a name of its port variable), where the connections go: with the API
// key, or a user's bearer token (which only sites with a jwks_url take).
func (e *env) module(ctx context.Context, site string) (*wsServer, error) {
	p, err := e.startCaddy(ctx, filepath.Join(e.dir, fmt.Sprintf("ws-%d", runs.Add(1))))
	if err != nil {
		return nil, err
	}
	base := p.sites[site]
	return &wsServer{
		url:   strings.Replace(base, "http://", "ws://", 1) + "/graphql",
		http:  base + "/graphql",
		pid:   p.proc.cmd.Process.Pid,
		pprof: p.sites["ADMIN"] + "/debug/pprof",
		publish: func(ctx context.Context, seq int, user string) error {
			auth := "Authorization: ApiKey " + e.apiKey
			if user != "" {
				auth = "Authorization: Bearer " + e.tokens[user]
			}
			status, body, err := do(ctx, "POST", base+"/posts", fmt.Sprintf(`{"title": "ev-%d"}`, seq), auth)
			if err == nil && status != http.StatusCreated {
				err = fmt.Errorf("POST /posts: %d %s", status, body)
			}
			return err
		},
		stop: func() { p.stop(); _ = os.RemoveAll(p.dir) },
	}, nil
}

// bareWS starts this program again as the ws-bare baseline, which broadcasts the bytes the
// module would send for the same event.
func bareWS(ctx context.Context) (*wsServer, error) {
	addrs, err := freeAddrs(1)
	if err != nil {
		return nil, err
	}
	p, err := serveChild(ctx, addrs[0], nil, wsBareArg, addrs[0])
	if err != nil {
		return nil, err
	}
	return &wsServer{
		url:  "ws://" + addrs[0] + "/graphql",
		http: "http://" + addrs[0] + "/graphql",
		pid:  p.cmd.Process.Pid,
		publish: func(ctx context.Context, seq int, user string) error {
			status, body, err := do(ctx, "POST", "http://"+addrs[0]+"/publish?userId="+url.QueryEscape(cmp.Or(user, author)),
				string(wsload.Next(store.NewID(time.Now()), seq)))
			if err == nil && status != http.StatusNoContent {
				err = fmt.Errorf("POST /publish: %d %s", status, body)
			}
			return err
		},
		stop: p.stop,
	}, nil
}

// fleet is the clients of a run of fanOut, each subscribed: WebSocket connections (bench/wsload)
// or streams of server-sent events (bench/sseload).
type fleet interface {
	Begin(seq int) *wsload.Round // starts timing event seq, published after
	Len() int
	Close(handshake bool) // ends every subscription, with the close handshake where there is one
	Check() error         // an error for an unexpected message or end
}

// opener opens n subscribed clients of srv.
type opener func(ctx context.Context, srv *wsServer, n int) (fleet, error)

// openWS opens graphql-transport-ws connections, each initialised with init.
func openWS(init []byte) opener {
	return func(ctx context.Context, srv *wsServer, n int) (fleet, error) {
		f, err := wsload.Open(ctx, srv.url, n, init)
		if err != nil {
			return nil, err
		}
		return wsFleet{f}, nil
	}
}

// wsFleet is a WebSocket fleet, which ends with the close handshake.
type wsFleet struct{ *wsload.Fleet }

func (f wsFleet) Check() error { return f.Fleet.Check(websocket.StatusNormalClosure) }

// fanOut is one run of a WebSocket or stream side, on a fresh server: it warms the server with
// a few subscribers and an event, reads its resident memory, opens wsConns subscribers, waits
// until an event reaches all of them (so every subscription is in place), and, after wsIdle,
// reads the memory again; then it times wsEvents events, one at a time, until the last
// subscriber has each. The result is the time-to-last of each event, and the memory per
// subscriber. With profile (a path and the start of a file name), a server that serves
// /debug/pprof (Caddy) is profiled with its subscribers idle, right after the second reading.
func fanOut(ctx context.Context, start func(context.Context) (*wsServer, error), open opener, profile string) (r result, err error) {
	if err := enoughFiles(); err != nil {
		return r, err
	}
	srv, err := start(ctx)
	if err != nil {
		return r, err
	}
	defer srv.stop()
	seq := 0
	event := func(f fleet, wait time.Duration) (*wsload.Round, error) {
		seq++
		round := f.Begin(seq)
		if err := srv.publish(ctx, seq, ""); err != nil {
			return round, err
		}
		if !round.Wait(wait) {
			return round, fmt.Errorf("event %d reached %d of %d connections in %s", seq, round.Got(), f.Len(), wait)
		}
		return round, nil
	}
	// A subscription is in place once the server has read it, after the connection opened:
	// events are published until one reaches every connection.
	subscribed := func(f fleet) error {
		var err error
		for range 5 {
			if _, err = event(f, 5*time.Second); err == nil {
				return nil
			}
		}
		return err
	}

	warm, err := open(ctx, srv, wsWarm)
	if err != nil {
		return r, err
	}
	err = subscribed(warm)
	warm.Close(true)
	if err != nil {
		return r, fmt.Errorf("warming: %w", err)
	}
	time.Sleep(wsIdle)
	before, err := wsload.ResidentMemory(srv.pid)
	if err != nil {
		return r, err
	}

	f, err := open(ctx, srv, wsConns)
	if err != nil {
		return r, err
	}
	defer f.Close(false)
	if err := subscribed(f); err != nil {
		return r, err
	}
	time.Sleep(wsIdle)
	after, err := wsload.ResidentMemory(srv.pid)
	if err != nil {
		return r, err
	}
	r.perConn = float64(after-before) / wsConns
	if profile != "" && srv.pprof != "" {
		if err := idleProfiles(ctx, srv.pprof, profile); err != nil {
			return r, err
		}
	}

	for range wsEvents {
		round, err := event(f, 30*time.Second)
		if err != nil {
			return r, err
		}
		r.latencies = append(r.latencies, round.Stats().Last.Seconds())
	}
	slices.Sort(r.latencies)
	f.Close(true)
	return r, f.Check()
}

// idleProfiles writes the heap profile (after a collection: what is live) and the goroutines
// (their stacks, in text) of the server whose /debug/pprof is at pprof, to files named
// profile-heap.pprof and profile-goroutines.txt. Read them with `go tool pprof -sample_index
// inuse_space`; the goroutines' stacks are not in the heap, but in MemStats' Stack line at the
// end of /debug/pprof/heap?debug=1, which profile-memstats.txt keeps.
func idleProfiles(ctx context.Context, pprof, profile string) error {
	for _, get := range []struct{ path, file string }{
		{"/heap?gc=1", "-heap.pprof"},
		{"/goroutine?debug=1", "-goroutines.txt"},
		{"/heap?debug=1", "-memstats.txt"},
	} {
		if err := fetchTo(ctx, pprof+get.path, profile+get.file); err != nil {
			return err
		}
	}
	return nil
}

// fetchTo writes what a GET of url answers to the file at path.
func fetchTo(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, res.Body)
	return errors.Join(err, f.Close())
}

// enoughFiles fails unless this process may open wsConns connections and some more files (Go
// raises the soft limit to the hard one when a program starts).
func enoughFiles() error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err == nil && l.Cur < wsConns+1000 {
		return fmt.Errorf("the open-file limit is %d; the WebSocket pairs need %d (ulimit -Hn)", l.Cur, wsConns+1000)
	}
	return nil
}
