package ws

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// BenchmarkEventMessage encodes the message a subscriber is sent for one event, its payload
// already encoded by the subscription's feed (schema's BenchmarkSubscriptionEvent measures
// that part, once per event): this is the part paid once per subscriber.
func BenchmarkEventMessage(b *testing.B) {
	payload, err := json.Marshal(map[string]any{"data": map[string]any{"postCreated": map[string]any{
		"id": store.NewID(time.Now()), "title": "Hello, world"}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{transportWS, legacyWS} {
		b.Run(name, func(b *testing.B) {
			m := message{ID: "1", Type: protocols[name].next, Payload: payload}
			b.ReportAllocs()
			for b.Loop() {
				if len(m.encode()) == 0 {
					b.Fatal("an empty message")
				}
			}
		})
	}
}
