// The sweep of expired idempotency keys: an expired key counts as absent wherever it is read, and
// a sweep deletes it within a minute, so that the keys kept stay those of the last KeyTTL. MongoDB
// deletes them itself too, where it has TTL indexes. The same sweep deletes the ids of deleted
// posts kept while a key named them (store.Store.DeletePost), once those keys have expired.

package posts

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/store"
)

// The bounds of a sweep: how often it runs, and how many keys it deletes in one call to the store
// and in one sweep at most (100,000 a minute, 1,666 creates with a key a second, keeps up).
const (
	KeySweepEvery   = time.Minute
	keySweepBatch   = 1000
	keySweepBatches = 100
)

// SweepKeys deletes the expired keys of keys every every, until ctx ends; each call to the store
// runs under timeout. A failure is logged, and the next sweep tries again.
func SweepKeys(ctx context.Context, keys store.IdempotencyStore, every, timeout time.Duration, logger *zap.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n, err := sweepKeys(ctx, keys, now(), timeout)
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("sweeping expired idempotency keys failed", zap.Int("deleted", n), zap.Error(err))
		case n > 0:
			logger.Debug("expired idempotency keys deleted", zap.Int("deleted", n))
		}
	}
}

// sweepKeys deletes the keys expired at t, a batch at a time while batches come full, and
// returns how many it deleted.
func sweepKeys(ctx context.Context, keys store.IdempotencyStore, t time.Time, timeout time.Duration) (deleted int, err error) {
	for range keySweepBatches {
		batch, cancel := context.WithTimeout(ctx, timeout)
		n, err := keys.DeleteExpiredKeys(batch, t, keySweepBatch)
		cancel()
		deleted += n
		if err != nil || n < keySweepBatch {
			return deleted, err
		}
	}
	return deleted, nil
}
