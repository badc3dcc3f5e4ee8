// Package poststest serves the tests of the packages above posts: a service's events as
// caddymodule's Provision wires them, through a follower of the store's event log.
package poststest

import (
	"context"
	"testing"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store"
)

// Publishing returns a broker whose subscriptions queue up to queue events, fed by a follower of
// the event log, started (with its defaults: this process's writes only, from the end of the log
// on), and the follower, for posts.Config. Both stop when the test ends. What a test writes to the
// store itself, rather than through the service, is in the log too: the follower hands it when an
// offered event comes after it, so write it before.
func Publishing(t testing.TB, log store.EventLog, queue int) (*events.Broker[*posts.Event], *events.Follower) {
	t.Helper()
	broker := events.NewBroker[*posts.Event](queue)
	follower := events.NewFollower(events.FollowerConfig{Log: log, Hand: func(e store.Event) { posts.Publish(broker, e) }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		follower.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		broker.Close()
	})
	<-follower.Started()
	return broker, follower
}
