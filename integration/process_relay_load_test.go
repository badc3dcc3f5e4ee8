//go:build integration

// The relay's multi-process tests under load: they check what every subscriber gets, not how fast,
// so they run beside the other tests that call ownProcesses; the figures they log are their own
// when each runs alone (go test -tags integration -run TestName ./integration/).
package integration

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestTwoCaddiesRelayAThousandWrites spreads 1,000 writes (chains of a create, two updates and
// a delete, each write through the other instance than the one before, as fast as they are
// answered) over two instances with the defaults, to 10 connections of three subscriptions
// each on each instance: every connection gets every event once, each post's in the order
// written; it logs the time and the relay lag.
//
// FerretDB v1 reads the whole events collection at each read (it filters in Go, about 25µs an
// event on 2 cores), and the whole posts collection at each write whose filter names more than
// _id: a real MongoDB reads its indexes.
func TestTwoCaddiesRelayAThousandWrites(t *testing.T) {
	ownProcesses(t)
	relayEveryWrite(t, 1000, 16, 10, "")
}

// TestTwoCaddiesOneKilledAndRestarted kills B (SIGKILL) while A is written to: A's subscriber
// gets every write; B's new subscriber, once B is back, gets the writes after it subscribed
// through both instances, and nothing from before.
func TestTwoCaddiesOneKilledAndRestarted(t *testing.T) {
	ownProcesses(t)
	pair := startRelayPair(t, "")
	a := pair.a
	onA := a.subscribeToWrites(t)
	writer := newRelayWriter(t)
	var wg sync.WaitGroup
	wg.Go(func() { // creates through A all along
		for i := range 60 {
			if status, body, _ := writer.write(a, "POST", "/posts", fmt.Sprintf(`{"title":"during %d"}`, i)); status == http.StatusCreated {
				writer.acknowledged(createdID(body), chainStep{on: a, entry: "c1"})
			} else {
				t.Errorf("a create through A while B is killed: %d %s", status, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	time.Sleep(300 * time.Millisecond)
	pair.b.kill()
	b := startProcess(t, pair.config(pair.portB), pair.portB)
	wg.Wait()
	onA.check(t, "A's subscriber across B's kill", writer.want, nil)

	time.Sleep(time.Second) // B's reads hand over what was written before its subscriber joins
	onB := b.subscribeToWrites(t)
	after := newRelayWriter(t)
	after.run(a, b, 200, 4)
	onB.check(t, "the restarted B's new subscriber", after.want, nil)
	onA.check(t, "A's subscriber, after B's restart", merged(writer.want, after.want), nil)
}

// merged is the expected events of two writers' posts.
func merged(a, b map[string][]string) map[string][]string {
	out := map[string][]string{}
	for _, m := range []map[string][]string{a, b} {
		for id, entries := range m {
			out[id] = append(out[id], entries...)
		}
	}
	return out
}
