package caddymodule

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// jwksPool holds one key set per URL and refresh interval, shared by every config that names it,
// so a reload keeps the keys it has and does not fetch them again.
var jwksPool = caddy.NewUsagePool()

// pooledJWKS makes a key set a pool value.
type pooledJWKS struct{ *auth.JWKS }

// Destruct stops the key set's background fetches when the last config that used it is cleaned up.
func (s pooledJWKS) Destruct() error {
	s.Close()
	return nil
}

func (h *Handler) loadJWKS(u string) (*auth.JWKS, error) {
	refresh := time.Duration(h.JWKSRefresh)
	key := fmt.Sprintf("jwks %s every %s", u, refresh)
	val, _, err := jwksPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		return pooledJWKS{auth.NewJWKS(u, refresh, nil, h.logger.Named("jwks"))}, nil
	})
	if err != nil {
		return nil, err
	}
	h.jwksKeys = append(h.jwksKeys, key)
	return val.(pooledJWKS).JWKS, nil
}

// stores holds the stores, one per MongoDB URI and database or per embedded data directory,
// shared by every config that names it, so that a reload keeps its connections and the
// embedded store's file open.
var stores = caddy.NewUsagePool()

// brokers holds the event brokers, one per store.
var brokers = caddy.NewUsagePool()

// EventQueue is how many events a subscription may have waiting before it is dropped as too slow.
const EventQueue = 256

// pooledBroker makes a broker a pool value.
type pooledBroker struct{ *events.Broker[*posts.Event] }

// Destruct ends the broker's subscriptions when the last config that used it is cleaned up.
func (b pooledBroker) Destruct() error {
	b.Close()
	return nil
}

// pooledStore makes a store a pool value, with its breaker (one per store, so that a reload
// keeps its state and its probe).
type pooledStore struct {
	store.Store
	breaker *store.Breaker
	backend string // sqlite or mongodb, as the metrics name it
}

// newPooledStore is s, of backend, with a store.Breaker that probes it, each ping bounded by
// timeout, the operations' own (store.BreakerConfig.ProbeTimeout says why).
// The MongoDB driver needs no setting for the probe to see a server come back soon: while an
// operation (the probe's ping) waits in server selection, the driver checks the server at once,
// at most every 500 ms (topology's minHeartbeatInterval), not every heartbeatInterval (10 s).
func newPooledStore(s store.Store, backend string, timeout time.Duration) pooledStore {
	cfg := store.BreakerConfig{ProbeTimeout: timeout, Changed: func(open bool) { metrics.StoreBreaker(backend, open) }}
	if client, ok := s.(interface{ Down() bool }); ok { // MongoDB's (mongo.Store.Down)
		cfg.Down = client.Down
	}
	breaker := store.NewBreaker(observeStore(s, backend), cfg)
	return pooledStore{Store: s, breaker: breaker, backend: backend}
}

// Destruct stops the breaker's probe and closes the store when the last config that used it is
// cleaned up.
func (s pooledStore) Destruct() error {
	s.breaker.Stop()
	return s.Close()
}

// loadStore returns the pooled store the config names: MongoDB's at uri (expanded), or else
// the embedded one in data_dir. It does no I/O: the MongoDB driver connects on first use, and
// the app opens an embedded store when the config starts.
func (h *Handler) loadStore(ctx caddy.Context, uri string) (pooledStore, error) {
	// The store, once pooled, keeps the waits and the probe's timeout of the config that
	// opened it, across reloads and for the other sites that share it.
	waits := mongo.Waits{Hole: time.Duration(h.MongoDBHoleWait), Timeout: time.Duration(h.Timeout)}
	key := "mongodb " + uri + " " + h.Database
	construct := func() (caddy.Destructor, error) {
		h.logger.Info("using MongoDB", zap.String("hosts", mongo.Redact(uri)), zap.String("database", h.Database))
		s, err := mongo.Open(uri, h.Database)
		if err != nil {
			return nil, err
		}
		s.SetWaits(waits)
		s.SetLogger(h.logger.Named("store"))
		return newPooledStore(s, "mongodb", waits.Timeout), nil
	}
	if uri == "" {
		dataDir, err := filepath.Abs(h.DataDir)
		if err != nil {
			return pooledStore{}, fmt.Errorf("data_dir: %w", err)
		}
		key = "sqlite " + dataDir
		construct = func() (caddy.Destructor, error) {
			h.logger.Info("using the embedded store; it opens when the config starts",
				zap.String("file", filepath.Join(dataDir, sqlite.DatabaseFile)))
			return newPooledStore(sqlite.New(dataDir, sqlite.Options{Logger: h.logger.Named("store")}), "sqlite", time.Duration(h.Timeout)), nil
		}
	}
	val, _, err := stores.LoadOrNew(key, construct)
	if err != nil {
		return pooledStore{}, err
	}
	h.storeKey = key
	ps := val.(pooledStore)
	if embedded, ok := ps.Store.(*sqlite.Store); ok {
		app, err := ctx.App(AppName)
		if err != nil {
			return pooledStore{}, err
		}
		if err := app.(*App).open(embeddedStore{embedded, h.Synchronous == SyncFull, h.PostCacheSize}); err != nil {
			return pooledStore{}, err
		}
	}
	return ps, nil
}

// followers holds the followers of the stores' event logs, one per store (follower.go).
var followers = caddy.NewUsagePool()

// pooledFollower is a running follower, stopped when the last config on its store is cleaned up.
type pooledFollower struct {
	*events.Follower
	background
	start func() // lets it run, once its first config starts
}

// background is a goroutine a pool keeps running across reloads (a follower, a sweep of keys).
type background struct {
	stop context.CancelFunc
	done chan struct{}
}

// goBackground runs run in a goroutine until Destruct.
func goBackground(run func(context.Context)) background {
	ctx, stop := context.WithCancel(context.Background())
	b := background{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		run(ctx)
	}()
	return b
}

// Destruct stops the goroutine, when the last config that used it is cleaned up, and waits
// for it.
func (b background) Destruct() error {
	b.stop()
	<-b.done
	return nil
}
