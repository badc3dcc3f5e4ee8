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

// idempotencyKeys returns the idempotency keys of ps, observed in the metrics, behind its
// store.Breaker, and starts the sweep of their expired keys (posts.SweepKeys) unless one runs.
func (h *Handler) idempotencyKeys(ps pooledStore) (store.IdempotencyStore, error) {
	keys, ok := ps.Store.(store.IdempotencyStore)
	if !ok {
		return nil, fmt.Errorf("the %s store keeps no idempotency keys", ps.backend)
	}
	keys = ps.breaker.GuardIdempotency(store.ObserveIdempotency(keys, ps.backend, storeObserver(ps.backend)))
	h.sweepKey = "sweep " + h.storeKey
	_, _, err := keySweeps.LoadOrNew(h.sweepKey, func() (caddy.Destructor, error) {
		logger, timeout := h.logger.Named("idempotency"), time.Duration(h.Timeout)
		return goBackground(func(ctx context.Context) { posts.SweepKeys(ctx, keys, posts.KeySweepEvery, timeout, logger) }), nil
	})
	return keys, err
}
