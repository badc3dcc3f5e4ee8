//go:build !race

// Two stores on one FerretDB, which the race detector would instrument too (in-process) for no
// concurrency of ours that events/'s tests of the follower do not race already: make test runs
// it in its step without it.

package posts

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// instance is what one Caddy process holds of a MongoDB store: its own client, broker and
// follower of the event log.
type instance struct {
	svc      *Service
	sub      *events.Subscription[*Event]
	follower *events.Follower
}

// startInstance opens uri's database "relay" through a client of its own and runs a follower
// that relays on it.
func startInstance(t *testing.T, uri string) *instance {
	t.Helper()
	st, err := mongo.Open(uri, "relay")
	if err != nil {
		t.Fatal(err)
	}
	broker := events.NewBroker[*Event](1000)
	follower := events.NewFollower(events.FollowerConfig{Log: st, Hand: func(e store.Event) { Publish(broker, e) },
		Relay: true, Interval: 20 * time.Millisecond, Timeout: 500 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		follower.Run(ctx)
	}()
	in := &instance{follower: follower, sub: broker.Subscribe(nil),
		svc: NewService(Config{Store: st, MaxLimit: 10, Logger: zap.NewNop(), Events: broker, Follower: follower, Timeout: 5 * time.Second})}
	t.Cleanup(func() {
		cancel()
		<-done
		in.sub.Close()
		st.Close()
	})
	return in
}

// received reads what in's subscriber gets until nothing more comes for quiet.
func (in *instance) received(quiet time.Duration) []string {
	var got []string
	for {
		select {
		case e := <-in.sub.C():
			got = append(got, fmt.Sprintf("%s %d", kindNames[e.Kind], e.Post.Version))
		case <-time.After(quiet):
			return got
		}
	}
}

var kindNames = map[EventKind]string{Created: "created", Updated: "updated", Deleted: "deleted"}

func TestTwoInstancesOnOneMongoDBSeeEachOthersWrites(t *testing.T) {
	server := mongotest.FerretDB(t)
	alice := auth.Identity{UserID: "alice", Method: auth.MethodAPIKey}
	ctx := t.Context()

	// An event logged before the instances start is never handed over.
	early, err := mongo.Open(server.URI, "relay")
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	at := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := early.InsertPost(ctx, store.Post{ID: store.NewID(at), UserID: "alice", Title: "from before", CreatedAt: at, UpdatedAt: at}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)

	cut := newSwitchedProxy(t, server.URI) // B reaches the database through it
	a, b := startInstance(t, server.URI), startInstance(t, cut.uri)
	time.Sleep(50 * time.Millisecond)

	t.Run("a create on A and its update on B reach both, once each and in that order", func(t *testing.T) {
		p, err := a.svc.Create(ctx, alice, NewPost{Title: "one"})
		if err != nil {
			t.Fatal(err)
		}
		title := "two"
		if _, err := b.svc.Update(ctx, alice, p.ID, Changes{Title: Change{Set: true, Value: &title}}, Expect{}); err != nil {
			t.Fatal(err)
		}
		if err := a.svc.Delete(ctx, alice, p.ID, Expect{}); err != nil {
			t.Fatal(err)
		}
		want := []string{"created 1", "updated 2", "deleted 2"}
		for name, in := range map[string]*instance{"A": a, "B": b} {
			if got := in.received(600 * time.Millisecond); !slices.Equal(got, want) {
				t.Errorf("%s's subscriber got %v; want %v", name, got, want)
			}
		}
	})

	t.Run("what A writes while B cannot read reaches B once it can, once", func(t *testing.T) {
		cut.set(false)
		var want []string
		for i := range 20 {
			if _, err := a.svc.Create(ctx, alice, NewPost{Title: fmt.Sprint("meanwhile ", i)}); err != nil {
				t.Fatal(err)
			}
			want = append(want, "created 1")
		}
		time.Sleep(time.Second) // B tries its read every interval meanwhile
		if stalled, _ := b.follower.Stalled(); stalled {
			t.Error("B is stalled after 1s; the bound is 5s")
		}
		if got := b.received(10 * time.Millisecond); len(got) != 0 {
			t.Errorf("B's subscriber got %v while B could not read", got)
		}
		cut.set(true)
		if got := b.received(time.Second); !slices.Equal(got, want) {
			t.Errorf("B's subscriber got %d events %v; want the %d written meanwhile", len(got), got, len(want))
		}
		if got := a.received(10 * time.Millisecond); !slices.Equal(got, want) {
			t.Errorf("A's subscriber got %d events; want its %d writes", len(got), len(want))
		}
	})
}

// switchedProxy forwards a unix socket to the database's while it is on; off, it closes every
// connection and refuses new ones, as a database that went away would.
type switchedProxy struct {
	uri   string
	mu    sync.Mutex
	on    bool
	conns map[net.Conn]bool
}

func newSwitchedProxy(t *testing.T, uri string) *switchedProxy {
	target, err := url.QueryUnescape(uri[len("mongodb://") : len(uri)-1])
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "relay-proxy-")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &switchedProxy{uri: "mongodb://" + url.QueryEscape(path) + "/", on: true, conns: map[net.Conn]bool{}}
	t.Cleanup(func() {
		ln.Close()
		p.set(false)
		os.RemoveAll(dir)
	})
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if !p.on {
				p.mu.Unlock()
				client.Close()
				continue
			}
			server, err := net.Dial("unix", target)
			if err != nil {
				p.mu.Unlock()
				client.Close()
				continue
			}
			p.conns[client], p.conns[server] = true, true
			p.mu.Unlock()
			go func() { io.Copy(server, client); server.Close() }()
			go func() { io.Copy(client, server); client.Close() }()
		}
	}()
	return p
}

func (p *switchedProxy) set(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = on
	if !on {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}
