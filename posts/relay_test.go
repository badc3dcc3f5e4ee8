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
	"sync/atomic"
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
	log      *countedLog
}

// countedLog is an event log that counts the follower's calls of RecoverEvents.
type countedLog struct {
	store.EventLog
	recoveries atomic.Int64
}

func (l *countedLog) RecoverEvents(ctx context.Context, before time.Time) (int, error) {
	l.recoveries.Add(1)
	return l.EventLog.RecoverEvents(ctx, before)
}

// startInstance opens uri's database "relay" through a client of its own and runs a follower
// that relays on it, whose RecoverAfter is recoverAfter (0: the default).
func startInstance(t *testing.T, uri string, recoverAfter time.Duration) *instance {
	t.Helper()
	st, err := mongo.Open(uri, "relay")
	if err != nil {
		t.Fatal(err)
	}
	broker := events.NewBroker[*Event](1000)
	log := &countedLog{EventLog: st}
	follower := events.NewFollower(events.FollowerConfig{Log: log, Hand: func(e store.Event) { Publish(broker, e) },
		Relay: true, Interval: 20 * time.Millisecond, Timeout: 500 * time.Millisecond, RecoverAfter: recoverAfter})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		follower.Run(ctx)
	}()
	in := &instance{follower: follower, log: log, sub: broker.Subscribe(nil),
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
	a, b := startInstance(t, server.URI, 0), startInstance(t, cut.uri, 0)
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

// An instance killed in a write, after its post and before the position of its event, leaves
// the event pending in the post and no trace in the log. The survivor, which had its earlier
// events, looks for pending events every RecoverAfter once it has gone quiet
// (events.Follower), so that its subscriber gets the event within seconds, where before it
// waited for the look of every minute; at idle, it looks no more often than before.
func TestAnInstanceKilledInAWriteIsFoundWithinSeconds(t *testing.T) {
	server := mongotest.FerretDB(t)
	proxy := mongotest.NewFaultProxy(t, server.Socket)
	const recoverAfter = time.Second
	b := startInstance(t, server.URI, recoverAfter)
	// A is a store through a proxy that cuts its commands, and no follower: its own would
	// recover its write, and it dies with it.
	a, err := mongo.Open(proxy.URI, "relay")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	for deadline := time.Now().Add(30 * time.Second); b.log.recoveries.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("B did not look for pending events after its start")
		}
	}
	time.Sleep(3 * recoverAfter)
	if n := b.log.recoveries.Load(); n != 1 {
		t.Errorf("B looked for pending events %d times by %v after its start, at idle; want once, as before", n, 4*recoverAfter)
	}

	at := time.Now().UTC().Truncate(time.Millisecond)
	p := store.Post{ID: store.NewID(at), UserID: "alice", Title: "v1", CreatedAt: at, UpdatedAt: at}
	if _, err := a.InsertPost(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if got := b.received(time.Second); !slices.Equal(got, []string{"created 1"}) {
		t.Fatalf("B's subscriber got %v; want A's create", got)
	}
	cut := mongotest.Fault{Command: "findAndModify", Collection: mongo.CountersCollection}
	proxy.Arm(cut)
	title := "v2"
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	_, err = a.UpdatePost(ctx, p.ID, "alice", store.AnyVersion, store.Update{Title: &title, UpdatedAt: at.Add(time.Millisecond)})
	cancel()
	killed := time.Now()
	if err == nil || proxy.Hits(cut) != 1 {
		t.Fatalf("the update was not cut before its position: %v", err)
	}
	a.Close()

	// Within two RecoverAfters of the write, a recovery's commands and a read: 1.96-2.04 s in
	// 7 runs on a loaded 2-core host. Before, at the look of every minute: 55 s in a run.
	const bound = 15 * time.Second
	select {
	case e := <-b.sub.C():
		took := time.Since(killed)
		if e.Kind != Updated || e.Post.Version != 2 {
			t.Errorf("B's subscriber got %s %d; want the update A was killed in", kindNames[e.Kind], e.Post.Version)
		}
		if took > bound {
			t.Errorf("B's subscriber got the update %v after A was killed; want it within %v", took, bound)
		}
		t.Logf("B's subscriber got the update %v after A was killed, after %d looks for pending events", took.Round(time.Millisecond), b.log.recoveries.Load())
	case <-time.After(time.Minute):
		t.Fatalf("B's subscriber did not get the update in a minute after A was killed")
	}
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
