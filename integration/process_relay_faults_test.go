//go:build integration

// The relay through faults: writes cut after the post, and a database that stalls.

package integration

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// tolerantWriter writes chains as relayWriter does, but a write answered 503 ends its chain
// without failing the test: its outcome is unknown (unless it says it was not sent), so its event
// may come, or not.
type tolerantWriter struct {
	*relayWriter
	mu       sync.Mutex
	maybe    map[string]string // by post id, the entry of the write answered 503, outcome unknown
	notSent  map[string]string // by post id, the entry of the write answered 503 as not sent
	unknown  int               // creates answered 503: posts the test does not know
	failures int
}

func newTolerantWriter(t *testing.T) *tolerantWriter {
	w := &tolerantWriter{relayWriter: newRelayWriter(t), maybe: map[string]string{}, notSent: map[string]string{}}
	w.on503 = func(step int, id string, s chainStep, body []byte) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.failures++
		switch {
		case step == 0:
			w.unknown++
		case strings.Contains(string(body), posts.ErrNotTried.Error()):
			w.notSent[id] = s.entry
		default:
			w.maybe[id] = s.entry
		}
	}
	return w
}

// run writes chains from writers goroutines, alternating which instance creates, while during
// runs beside them: at least n writes' worth, a chain every 10ms, and on until during returns.
func (w *tolerantWriter) run(a, b *caddyProcess, n, writers int, during func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		during()
	}()
	w.writeChains(a, b, writers, func(chains chan<- int) {
		for i := 0; ; i++ {
			if i >= n/4 {
				select {
				case <-done:
					return
				default:
				}
			}
			chains <- i
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// checkNeverHalf waits until the subscribers agree, and past the recovery of pending events,
// then checks that every acknowledged write reached every one of them once, in its post's
// order; that a write answered 503 reached all of them or none, right after its post's
// acknowledged events, and none if the 503 said it was not sent; and that a post whose create
// was answered 503 (and so unknown to the test) came to all of them alike, created once. It
// returns how many writes answered 503 (of unknown outcome) reached every subscriber.
func (w *tolerantWriter) checkNeverHalf(t *testing.T, subs map[string]*relaySubscriber) int {
	t.Helper()
	names := slices.Sorted(maps.Keys(subs))
	snapshot := func() map[string]map[string][]string {
		out := map[string]map[string][]string{}
		for _, name := range names {
			s := subs[name]
			s.mu.Lock()
			got := map[string][]string{}
			for id, entries := range s.got {
				got[id] = slices.Clone(entries)
			}
			out[name] = got
			s.mu.Unlock()
		}
		return out
	}
	agree := func(got map[string]map[string][]string) bool {
		for _, name := range names[1:] {
			if !maps.EqualFunc(got[names[0]], got[name], slices.Equal[[]string]) {
				return false
			}
		}
		return true
	}
	// Pending events are logged within RecoverAfter (the timeout, 5s) of a failed write, and
	// a minute at the latest: wait for the subscribers to agree, and for every acknowledged
	// event to have come.
	var got map[string]map[string][]string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got = snapshot()
		complete := true
		for id, want := range w.want {
			if len(got[names[0]][id]) < len(want) {
				complete = false
			}
		}
		if complete && agree(got) || time.Now().After(deadline) {
			break
		}
	}
	// Past two RecoverAfters (the timeout, 5s) from the last failure: the pending events of the
	// writes answered 503 are logged by now, and a recovery cut itself has been tried again.
	time.Sleep(12 * time.Second)
	got = snapshot()
	for _, name := range names[1:] {
		for id := range w.unionIDs(got[names[0]], got[name]) {
			if a, b := got[names[0]][id], got[name][id]; !slices.Equal(a, b) {
				t.Errorf("post %s: %s got %v, %s got %v: a write reached one and not the other", id, names[0], a, name, b)
			}
		}
	}
	first := got[names[0]]
	delivered503, unknownPosts := 0, 0
	for id, entries := range first {
		want, known := w.want[id]
		switch {
		case !known && w.maybe[id] == "":
			if !slices.Equal(entries, []string{"c1"}) {
				t.Errorf("post %s, which no acknowledged write made: got %v; want at most its create", id, entries)
			}
			unknownPosts++
		case slices.Equal(entries, want):
		case w.maybe[id] != "" && slices.Equal(entries, append(slices.Clone(want), w.maybe[id])):
			delivered503++
		case w.notSent[id] != "":
			t.Errorf("post %s: got %v; want %v: the last write, answered as not sent, came", id, entries, want)
		default:
			t.Errorf("post %s: got %v; want %v, then maybe %q", id, entries, want, w.maybe[id])
		}
	}
	for id, want := range w.want {
		if _, ok := first[id]; !ok {
			t.Errorf("post %s: got nothing; want %v", id, want)
		}
	}
	for _, name := range names {
		s := subs[name]
		s.mu.Lock()
		if len(s.trouble) > 0 {
			t.Errorf("%s: besides events, %d messages or a close, the first: %s", name, len(s.trouble), s.trouble[0])
		}
		s.mu.Unlock()
	}
	t.Logf("%d writes acknowledged, %d answered 503 (%d creates, %d not sent); of the others, %d delivered to every subscriber, the rest to none; %d posts of creates answered 503 delivered to every subscriber",
		w.writes, w.failures, w.unknown, len(w.notSent), delivered503, unknownPosts)
	return delivered503 + unknownPosts
}

func (w *tolerantWriter) unionIDs(a, b map[string][]string) map[string]bool {
	ids := map[string]bool{}
	for id := range a {
		ids[id] = true
	}
	for id := range b {
		ids[id] = true
	}
	return ids
}

// subscribeOnBoth starts n subscribers on each of a and b, named A1…, B1….
func subscribeOnBoth(t *testing.T, a, b *caddyProcess, n int) map[string]*relaySubscriber {
	subs := map[string]*relaySubscriber{}
	for i := range n {
		subs[fmt.Sprint("A", i+1)] = a.subscribeToWrites(t)
		subs[fmt.Sprint("B", i+1)] = b.subscribeToWrites(t)
	}
	return subs
}

// TestTwoCaddiesWithWritesCutAfterThePost runs the relay's load through two instances, A
// reaching the database through a proxy that, every few writes, lets the post's write through
// and drops the connection before anything else (the position of its event): A answers 503, its
// post is written and its event pending. Every acknowledged write reaches every subscriber of
// both instances once, in order; each write answered 503 reaches all of them, or none.
func TestTwoCaddiesWithWritesCutAfterThePost(t *testing.T) {
	ownProcesses(t)
	db := startFerretProcess(t)
	proxy := mongotest.NewFaultProxy(t, db.socket)
	pair := startRelayPairOn(t, db, proxy.URI, "")
	subs := subscribeOnBoth(t, pair.a, pair.b, 3)
	w := newTolerantWriter(t)
	cut := mongotest.Fault{Command: "findAndModify", Collection: "counters"}
	w.run(pair.a, pair.b, 400, 8, func() {
		for range 50 { // a cut every 100ms at most, for 5s
			time.Sleep(100 * time.Millisecond)
			if proxy.Armed() == 0 {
				proxy.Arm(cut)
			}
		}
		proxy.Disarm() // what follows, the recovery of the writes cut, goes through
	})
	if proxy.Hits(cut) == 0 || w.failures == 0 {
		t.Fatalf("%d writes cut, %d answered 503: the test cut nothing", proxy.Hits(cut), w.failures)
	}
	t.Logf("%d writes cut after the post", proxy.Hits(cut))
	// A cut write was written, its event pending: the recovery logs it, for every subscriber.
	if w.checkNeverHalf(t, subs) == 0 {
		t.Error("no write cut after its post reached the subscribers")
	}
}

// TestTwoCaddiesWhileTheDatabaseStalls stops the database process (SIGSTOP) for 10s under the
// relay's load: connections stay open and nothing answers, past every timeout; then it goes on
// (SIGCONT). Every acknowledged write reaches every subscriber once, in order; each write
// answered 503 reaches all of them, or none.
func TestTwoCaddiesWhileTheDatabaseStalls(t *testing.T) {
	ownProcesses(t)
	pair := startRelayPair(t, "")
	subs := subscribeOnBoth(t, pair.a, pair.b, 3)
	w := newTolerantWriter(t)
	w.run(pair.a, pair.b, 600, 8, func() {
		time.Sleep(time.Second)
		pair.db.signal(syscall.SIGSTOP)
		time.Sleep(10 * time.Second)
		pair.db.signal(syscall.SIGCONT)
	})
	if w.failures == 0 {
		t.Fatal("no write was answered 503 while the database stalled")
	}
	w.checkNeverHalf(t, subs)
}
