package store

import (
	"context"
	"time"
)

// ObserveIdempotency returns s, telling observe of each of its operations as Observe does: its
// name (reserve_key, take_over_key, complete_key, insert_post_completing_key, release_key,
// delete_key, delete_expired_keys), how long it took and its error.
func ObserveIdempotency(s IdempotencyStore, observe Observer) IdempotencyStore {
	return observedKeys{s, observe}
}

type observedKeys struct {
	IdempotencyStore
	observe Observer
}

// done tells of the operation name that started at start and ended with err, and returns err.
func (o observedKeys) done(name string, start time.Time, err error) error {
	o.observe(name, time.Since(start), err)
	return err
}

func (o observedKeys) ReserveKey(ctx context.Context, r IdempotencyRecord, now time.Time) (IdempotencyRecord, bool, error) {
	start := time.Now()
	stored, reserved, err := o.IdempotencyStore.ReserveKey(ctx, r, now)
	return stored, reserved, o.done("reserve_key", start, err)
}

func (o observedKeys) TakeOverKey(ctx context.Context, user, key string, attempt int, now, until time.Time) (bool, error) {
	start := time.Now()
	took, err := o.IdempotencyStore.TakeOverKey(ctx, user, key, attempt, now, until)
	return took, o.done("take_over_key", start, err)
}

func (o observedKeys) CompleteKey(ctx context.Context, user, key string, res Response) error {
	start := time.Now()
	return o.done("complete_key", start, o.IdempotencyStore.CompleteKey(ctx, user, key, res))
}

func (o observedKeys) InsertPostCompletingKey(ctx context.Context, p Post, key string, res Response) (Event, bool, error) {
	start := time.Now()
	e, inserted, err := o.IdempotencyStore.InsertPostCompletingKey(ctx, p, key, res)
	return e, inserted, o.done("insert_post_completing_key", start, err)
}

func (o observedKeys) ReleaseKey(ctx context.Context, user, key string, attempt int) error {
	start := time.Now()
	return o.done("release_key", start, o.IdempotencyStore.ReleaseKey(ctx, user, key, attempt))
}

func (o observedKeys) DeleteKey(ctx context.Context, user, key string, attempt int) error {
	start := time.Now()
	return o.done("delete_key", start, o.IdempotencyStore.DeleteKey(ctx, user, key, attempt))
}

func (o observedKeys) DeleteExpiredKeys(ctx context.Context, now time.Time, limit int) (int, error) {
	start := time.Now()
	n, err := o.IdempotencyStore.DeleteExpiredKeys(ctx, now, limit)
	return n, o.done("delete_expired_keys", start, err)
}
