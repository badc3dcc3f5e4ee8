package main

import (
	"context"
	"fmt"
	"net/http"
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

// wsServer is a fresh server process for one run of a WebSocket side.
type wsServer struct {
	url     string // ws://…/graphql
	pid     int
	publish func(ctx context.Context, seq int) error // publishes event seq (titled ev-<seq>)
	stop    func()
}

// runs counts the WebSocket runs, for their directories.
var runs atomic.Int64

// moduleWS starts a Caddy of its own, on a fresh store, whose events are the posts created
// through its REST API.
func (e *env) moduleWS(ctx context.Context) (*wsServer, error) {
	p, err := e.startCaddy(ctx, filepath.Join(e.dir, fmt.Sprintf("ws-%d", runs.Add(1))))
	if err != nil {
		return nil, err
	}
	return &wsServer{
		url: strings.Replace(p.sites["READ"], "http://", "ws://", 1) + "/graphql",
		pid: p.proc.cmd.Process.Pid,
		publish: func(ctx context.Context, seq int) error {
			status, body, err := do(ctx, "POST", p.sites["READ"]+"/posts", fmt.Sprintf(`{"title": "ev-%d"}`, seq), "X-API-Key: "+e.apiKey)
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
		url: "ws://" + addrs[0] + "/graphql",
		pid: p.cmd.Process.Pid,
		publish: func(ctx context.Context, seq int) error {
			status, body, err := do(ctx, "POST", "http://"+addrs[0]+"/publish", string(wsload.Next(store.NewID(time.Now()), seq)))
			if err == nil && status != http.StatusNoContent {
				err = fmt.Errorf("POST /publish: %d %s", status, body)
			}
			return err
		},
		stop: p.stop,
	}, nil
}

// fanOut is one run of a WebSocket side, on a fresh server: it warms the server with a few
// connections and an event, reads its resident memory, opens wsConns subscribed connections,
// waits until an event reaches all of them (so every subscription is in place), and, after
// wsIdle, reads the memory again; then it times wsEvents events, one at a time, until the last
// connection has each. The result is the time-to-last of each event, and the memory per
// connection.
func fanOut(ctx context.Context, start func(context.Context) (*wsServer, error), init []byte) (r result, err error) {
	if err := enoughFiles(); err != nil {
		return r, err
	}
	srv, err := start(ctx)
	if err != nil {
		return r, err
	}
	defer srv.stop()
	seq := 0
	event := func(f *wsload.Fleet, wait time.Duration) (*wsload.Round, error) {
		seq++
		round := f.Begin(seq)
		if err := srv.publish(ctx, seq); err != nil {
			return round, err
		}
		if !round.Wait(wait) {
			return round, fmt.Errorf("event %d reached %d of %d connections in %s", seq, round.Got(), f.Len(), wait)
		}
		return round, nil
	}
	// A subscription is in place once the server has read it, after the connection opened:
	// events are published until one reaches every connection.
	subscribed := func(f *wsload.Fleet) error {
		var err error
		for range 5 {
			if _, err = event(f, 5*time.Second); err == nil {
				return nil
			}
		}
		return err
	}

	warm, err := wsload.Open(ctx, srv.url, wsWarm, init)
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

	f, err := wsload.Open(ctx, srv.url, wsConns, init)
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

	for range wsEvents {
		round, err := event(f, 30*time.Second)
		if err != nil {
			return r, err
		}
		r.latencies = append(r.latencies, round.Stats().Last.Seconds())
	}
	slices.Sort(r.latencies)
	f.Close(true)
	return r, f.Check(websocket.StatusNormalClosure)
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
