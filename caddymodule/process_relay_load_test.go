//go:build !race

// The relay's multi-process tests that measure or take long: built without the race detector,
// which multiplies FerretDB's work, and run on their own by `make test`, one after the other so
// that their figures are their own.
package caddymodule

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestTwoCaddiesRelayTenThousandWrites spreads 10,000 writes (creates, updates, deletes) over
// two instances with the defaults: every subscriber of each gets every event once, each post's
// in order; it logs the time and the relay lag.
//
// FerretDB v1 reads the whole events collection at each poll (it filters in Go, about 25µs an
// event on 2 cores), which grows to 10,000 events here, so the two instances' polls take most
// of the database's CPU, the writes slow down (about a minute), and a poll hands a subscriber
// a few hundred events at once: what the look-back (5s) and a connection's send queue (256)
// are sized for. A real MongoDB reads its index.
func TestTwoCaddiesRelayTenThousandWrites(t *testing.T) {
	relayEveryWrite(t, 10_000, 16, "")
}

// TestTwoCaddiesOneKilledAndRestarted kills B (SIGKILL) while A is written to: A's subscriber
// gets every write; B's new subscriber, once B is back, gets the writes after it subscribed
// through both instances, and nothing from before.
func TestTwoCaddiesOneKilledAndRestarted(t *testing.T) {
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
