// Package handlerstest serves the tests of handlers/ and of the packages under it: the posts
// service they serve, over a SQLite store of the test's own. It is imported by tests only.
package handlerstest

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/posts/poststest"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// Subscriptions and Limits are the defaults of caddymodule/config.go's table, which fills every
// field before handlers.New and schema.New: the config of a site that sets none.
var (
	Subscriptions = live.Subscriptions{
		ReadLimit:             32 << 10,
		InitTimeout:           3 * time.Second,
		MaxSubscriptions:      100,
		MaxConnectionsPerUser: 100,
		MaxConnections:        10000,
		KeepAlive:             12 * time.Second,
	}
	Limits = schema.Limits{
		MaxQueryLength:       16 << 10,
		MaxDepth:             15,
		MaxCost:              2000,
		MaxFeeds:             1000,
		MaxFeedsPerClient:    100,
		MaxAliases:           30,
		MaxRootFields:        10,
		MaxFields:            500,
		MaxResponseSize:      8 << 20,
		DocumentCacheEntries: 1000,
		DocumentCacheSize:    32 << 20,
	}
)

// Posts returns a posts.Service with the rules of rules over a new SQLite store, and the broker
// its writes are published to (poststest.Publishing, queues of 16); it sets rules's store,
// timeout (5 s), largest page (10), logger, events and follower. Both end with the test.
func Posts(t testing.TB, rules posts.Config) (*posts.Service, *events.Broker[*posts.Event]) {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	broker, follower := poststest.Publishing(t, st, 16)
	rules.Store, rules.Timeout, rules.MaxLimit, rules.Logger, rules.Events, rules.Follower = st, 5*time.Second, 10, zap.NewNop(), broker, follower
	return posts.NewService(rules), broker
}
