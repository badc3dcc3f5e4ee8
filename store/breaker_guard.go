package store

import (
	"context"
	"sync/atomic"
	"time"
)

// Guard returns s with its calls through b: refused at once while b is open, and their outcomes
// counted. Close is s's own.
func (b *Breaker) Guard(s Store) Store { return guarded{s, b} }

type guarded struct {
	Store
	b *Breaker
}

func (g guarded) GetPost(ctx context.Context, id string) (Post, error) {
	if err := g.b.allow(ctx); err != nil {
		return Post{}, err
	}
	p, err := g.Store.GetPost(ctx, id)
	return p, g.b.done(ctx, err)
}

func (g guarded) ListPosts(ctx context.Context, f Filter) ([]Post, error) {
	if err := g.b.allow(ctx); err != nil {
		return nil, err
	}
	ps, err := g.Store.ListPosts(ctx, f)
	return ps, g.b.done(ctx, err)
}

func (g guarded) InsertPost(ctx context.Context, p Post) (Event, error) {
	if err := g.b.allow(ctx); err != nil {
		return Event{}, err
	}
	e, err := g.Store.InsertPost(ctx, p)
	return e, g.b.done(ctx, err)
}

func (g guarded) UpdatePost(ctx context.Context, id, owner string, version int64, u Update) (Event, error) {
	if err := g.b.allow(ctx); err != nil {
		return Event{}, err
	}
	e, err := g.Store.UpdatePost(ctx, id, owner, version, u)
	return e, g.b.done(ctx, err)
}

func (g guarded) DeletePost(ctx context.Context, id, owner string, version int64) (Event, error) {
	if err := g.b.allow(ctx); err != nil {
		return Event{}, err
	}
	e, err := g.Store.DeletePost(ctx, id, owner, version)
	return e, g.b.done(ctx, err)
}

func (g guarded) SaveUser(ctx context.Context, u User) error {
	if err := g.b.allow(ctx); err != nil {
		return err
	}
	return g.b.done(ctx, g.Store.SaveUser(ctx, u))
}

func (g guarded) GetUser(ctx context.Context, id string) (User, error) {
	if err := g.b.allow(ctx); err != nil {
		return User{}, err
	}
	u, err := g.Store.GetUser(ctx, id)
	return u, g.b.done(ctx, err)
}

func (g guarded) GetUsers(ctx context.Context, ids []string) ([]User, error) {
	if err := g.b.allow(ctx); err != nil {
		return nil, err
	}
	us, err := g.Store.GetUsers(ctx, ids)
	return us, g.b.done(ctx, err)
}

// Ping is refused too while b is open, so a health probe does not wait for a store known down,
// and a ping under way when b opens ends with the refusal at once.
func (g guarded) Ping(ctx context.Context) error {
	opening := g.b.opening()
	if opening == nil {
		return refused
	}
	if err := g.b.allow(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cut atomic.Bool
	go func() {
		select {
		case <-opening:
			cut.Store(true)
			cancel()
		case <-ctx.Done():
		}
	}()
	err := g.Store.Ping(ctx)
	if err != nil && cut.Load() { // before done, whose count may open the breaker itself
		g.b.done(ctx, err) // a cancelled call: no word on the store
		return refused
	}
	return g.b.done(ctx, err)
}

// GuardIdempotency returns k with its calls through b, as Guard does.
func (b *Breaker) GuardIdempotency(k IdempotencyStore) IdempotencyStore { return guardedKeys{k, b} }

type guardedKeys struct {
	IdempotencyStore
	b *Breaker
}

func (g guardedKeys) ReserveKey(ctx context.Context, r IdempotencyRecord, now time.Time) (IdempotencyRecord, bool, error) {
	if err := g.b.allow(ctx); err != nil {
		return IdempotencyRecord{}, false, err
	}
	stored, reserved, err := g.IdempotencyStore.ReserveKey(ctx, r, now)
	return stored, reserved, g.b.done(ctx, err)
}

func (g guardedKeys) TakeOverKey(ctx context.Context, user, key string, attempt int, now, until time.Time) (bool, error) {
	if err := g.b.allow(ctx); err != nil {
		return false, err
	}
	took, err := g.IdempotencyStore.TakeOverKey(ctx, user, key, attempt, now, until)
	return took, g.b.done(ctx, err)
}

func (g guardedKeys) CompleteKey(ctx context.Context, user, key string, res Response) error {
	if err := g.b.allow(ctx); err != nil {
		return err
	}
	return g.b.done(ctx, g.IdempotencyStore.CompleteKey(ctx, user, key, res))
}

func (g guardedKeys) InsertPostCompletingKey(ctx context.Context, p Post, key string, res Response) (Event, bool, error) {
	if err := g.b.allow(ctx); err != nil {
		return Event{}, false, err
	}
	e, inserted, err := g.IdempotencyStore.InsertPostCompletingKey(ctx, p, key, res)
	return e, inserted, g.b.done(ctx, err)
}

func (g guardedKeys) ReleaseKey(ctx context.Context, user, key string, attempt int) error {
	if err := g.b.allow(ctx); err != nil {
		return err
	}
	return g.b.done(ctx, g.IdempotencyStore.ReleaseKey(ctx, user, key, attempt))
}

func (g guardedKeys) DeleteKey(ctx context.Context, user, key string, attempt int) error {
	if err := g.b.allow(ctx); err != nil {
		return err
	}
	return g.b.done(ctx, g.IdempotencyStore.DeleteKey(ctx, user, key, attempt))
}

func (g guardedKeys) DeleteExpiredKeys(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := g.b.allow(ctx); err != nil {
		return 0, err
	}
	n, err := g.IdempotencyStore.DeleteExpiredKeys(ctx, now, limit)
	return n, g.b.done(ctx, err)
}
