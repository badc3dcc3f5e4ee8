package store

import (
	"context"
	"time"
)

// ObserveIdempotency returns s, a store of system, telling observe of each of its operations
// and making each a span as Observe does: reserve_key, take_over_key, complete_key,
// insert_post_completing_key, release_key, delete_key, delete_expired_keys.
func ObserveIdempotency(s IdempotencyStore, system string, observe Observer) IdempotencyStore {
	return observedKeys{s, observing{system, observe}}
}

type observedKeys struct {
	IdempotencyStore
	o observing
}

func (s observedKeys) ReserveKey(ctx context.Context, r IdempotencyRecord, now time.Time) (IdempotencyRecord, bool, error) {
	ctx, c := s.o.begin(ctx, "reserve_key", keysCollection)
	stored, reserved, err := s.IdempotencyStore.ReserveKey(ctx, r, now)
	return stored, reserved, s.o.end(c, err)
}

func (s observedKeys) TakeOverKey(ctx context.Context, user, key string, attempt int, now, until time.Time) (bool, error) {
	ctx, c := s.o.begin(ctx, "take_over_key", keysCollection)
	took, err := s.IdempotencyStore.TakeOverKey(ctx, user, key, attempt, now, until)
	return took, s.o.end(c, err)
}

func (s observedKeys) CompleteKey(ctx context.Context, user, key string, res Response) error {
	ctx, c := s.o.begin(ctx, "complete_key", keysCollection)
	return s.o.end(c, s.IdempotencyStore.CompleteKey(ctx, user, key, res))
}

func (s observedKeys) InsertPostCompletingKey(ctx context.Context, p Post, key string, res Response) (Event, bool, error) {
	ctx, c := s.o.begin(ctx, "insert_post_completing_key", postsCollection)
	e, inserted, err := s.IdempotencyStore.InsertPostCompletingKey(ctx, p, key, res)
	return e, inserted, s.o.end(c, err)
}

func (s observedKeys) ReleaseKey(ctx context.Context, user, key string, attempt int) error {
	ctx, c := s.o.begin(ctx, "release_key", keysCollection)
	return s.o.end(c, s.IdempotencyStore.ReleaseKey(ctx, user, key, attempt))
}

func (s observedKeys) DeleteKey(ctx context.Context, user, key string, attempt int) error {
	ctx, c := s.o.begin(ctx, "delete_key", keysCollection)
	return s.o.end(c, s.IdempotencyStore.DeleteKey(ctx, user, key, attempt))
}

func (s observedKeys) DeleteExpiredKeys(ctx context.Context, now time.Time, limit int) (int, error) {
	ctx, c := s.o.begin(ctx, "delete_expired_keys", keysCollection)
	n, err := s.IdempotencyStore.DeleteExpiredKeys(ctx, now, limit)
	return n, s.o.end(c, err)
}
