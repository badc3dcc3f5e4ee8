package stream

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/internal/race"
)

// TestWhatAStreamWritesIsGivenBackOnceCounted has a stream's writer take, write and give back
// what is pushed as fast as it is pushed, while another client's connection keeps the account
// busy: a push counts its payload before the writer can take it, so the stream ends up holding
// nothing.
func TestWhatAStreamWritesIsGivenBackOnceCounted(t *testing.T) {
	hub := live.NewHub()
	hub.Register(&live.Config{Subscriptions: live.Subscriptions{SendQueue: 1 << 30}})
	s := &stream{wake: make(chan struct{}, 1), client: "user carol", hub: hub}
	hub.Add(s, s.client)
	other := &stream{client: "user dave", hub: hub}
	hub.Add(other, other.client)
	payload := json.RawMessage(strings.Repeat("x", 1000))
	events := 100_000
	if race.Enabled {
		events = 10_000
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			hub.Hold(other, 10)
			hub.Hold(other, -10)
		}
	})
	written, done := 0, make(chan struct{})
	go func() { // run's loop, without the writes
		defer close(done)
		for range s.wake {
			results, _, _ := s.take()
			taken := 0
			for _, p := range results {
				taken += len(p)
			}
			s.hold(-taken)
			if written += len(results); written == events {
				return
			}
		}
	}()
	for range events {
		s.push(payload, 1<<30)
	}
	<-done
	close(stop)
	wg.Wait()
	if got := hub.Held("user carol"); got != 0 {
		t.Errorf("every event pushed was taken and written, and the stream still holds %d bytes", got)
	}
}
