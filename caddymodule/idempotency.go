// Idempotency keys in the config: the rule of idempotency_ttl, and the sweep of expired keys, one
// per store, shared across reloads.

package caddymodule

import (
	"context"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store"
)

// maxIdempotencyTTL bounds idempotency_ttl: every key of that long is kept, with its answer.
const maxIdempotencyTTL = caddy.Duration(30 * 24 * time.Hour)

func checkIdempotencyTTL(h *Handler) error {
	if h.IdempotencyTTL < caddy.Duration(time.Second) || h.IdempotencyTTL > maxIdempotencyTTL {
		return fmt.Errorf("idempotency_ttl must be from 1s to 720h (30 days), not %s", time.Duration(h.IdempotencyTTL))
	}
	return nil
}

// keySweeps holds the sweeps of expired idempotency keys, one per store, so that a reload keeps
// the one that runs.
var keySweeps = caddy.NewUsagePool()

// keySweep is a running posts.SweepKeys.
type keySweep struct {
	stop context.CancelFunc
	done chan struct{}
}

// Destruct stops the sweep when the last config on its store is cleaned up.
func (s keySweep) Destruct() error {
	s.stop()
	<-s.done
	return nil
}

// idempotencyKeys returns the idempotency keys of ps, observed in the metrics, behind its
// breaker, and starts the sweep of their expired keys unless one runs.
func (h *Handler) idempotencyKeys(ps pooledStore) (store.IdempotencyStore, error) {
	keys, ok := ps.Store.(store.IdempotencyStore)
	if !ok {
		return nil, fmt.Errorf("the %s store keeps no idempotency keys", ps.backend)
	}
	keys = ps.breaker.GuardIdempotency(store.ObserveIdempotency(keys, storeObserver(ps.backend)))
	h.sweepKey = "sweep " + h.storeKey
	_, _, err := keySweeps.LoadOrNew(h.sweepKey, func() (caddy.Destructor, error) {
		ctx, stop := context.WithCancel(context.Background())
		s := keySweep{stop: stop, done: make(chan struct{})}
		logger, timeout := h.logger.Named("idempotency"), time.Duration(h.Timeout)
		go func() {
			defer close(s.done)
			posts.SweepKeys(ctx, keys, posts.KeySweepEvery, timeout, logger)
		}()
		return s, nil
	})
	return keys, err
}
