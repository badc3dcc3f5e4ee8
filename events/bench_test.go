package events_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/events"
)

// event has the size of a posts.Event, which Publish copies into each queue.
type event struct {
	kind                 int
	id                   [12]byte
	userID, title        string
	body                 *string
	createdAt, updatedAt time.Time
}

// BenchmarkPublish hands one event to n subscriptions, each with a filter as GraphQL's
// subscriptions have. The queues are emptied, off the clock, whenever they are full: ns/op is
// Publish alone, with the copy of the event into each queue.
func BenchmarkPublish(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			queue := max(1<<16/n, 64) // long queues are emptied less often; 64 Ki events in all
			broker := events.NewBroker[event](queue)
			defer broker.Close()
			subs := make([]*events.Subscription[event], n)
			for i := range subs {
				subs[i] = broker.Subscribe(func(e event) bool { return e.kind == 1 })
			}
			e := event{kind: 1, userID: "alice", title: "Hello, world"}
			queued := 0
			b.ReportAllocs()
			for b.Loop() {
				if queued == queue {
					b.StopTimer()
					for _, s := range subs {
						for range queue {
							<-s.C()
						}
					}
					queued = 0
					b.StartTimer()
				}
				broker.Publish(e)
				queued++
			}
			if broker.Subscribers() != n {
				b.Fatalf("%d subscribers left; want all %d", broker.Subscribers(), n)
			}
		})
	}
}
