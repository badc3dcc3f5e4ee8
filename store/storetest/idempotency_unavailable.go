package storetest

// The calls of store.IdempotencyStore on an ended context or a closed store.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

func testKeysUnavailable(t *testing.T, open Open) {
	s := keysOf(t, open)
	reserve(t, s, record("alice", "k", "f", 1), base)
	ops := []struct {
		name string
		do   func(context.Context) error
	}{
		{"ReserveKey", func(ctx context.Context) error {
			_, _, err := s.ReserveKey(ctx, record("alice", "k2", "f", 2), base)
			return err
		}},
		{"TakeOverKey", func(ctx context.Context) error {
			_, err := s.TakeOverKey(ctx, "alice", "k", 1, base.Add(time.Hour), base.Add(2*time.Hour))
			return err
		}},
		{"CompleteKey", func(ctx context.Context) error { return s.CompleteKey(ctx, "alice", "k", response(201, 10)) }},
		{"InsertPostCompletingKey", func(ctx context.Context) error {
			_, _, err := s.InsertPostCompletingKey(ctx, newPost(1, "alice", base), "k", response(201, 10))
			return err
		}},
		{"ReleaseKey", func(ctx context.Context) error { return s.ReleaseKey(ctx, "alice", "k", 1) }},
		{"DeleteKey", func(ctx context.Context) error { return s.DeleteKey(ctx, "alice", "k", 1) }},
		{"DeleteExpiredKeys", func(ctx context.Context) error {
			_, err := s.DeleteExpiredKeys(ctx, base.Add(48*time.Hour), 10)
			return err
		}},
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, op := range ops {
		t.Run(op.name+" with a cancelled context fails and changes nothing", func(t *testing.T) {
			if err := op.do(cancelled); !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("error = %v; want ErrUnavailable", err)
			}
		})
	}
	if got := current(t, s, "alice", "k", base); got.Fingerprint != "f" || got.Attempt != 1 || got.Response != nil || !got.LockedUntil.Equal(base.Add(time.Minute)) {
		t.Errorf("the record changed: %s", describeRecord(got))
	}
	if got := list(t, s, store.Filter{Limit: 10}); len(got) != 0 {
		t.Errorf("a post was stored: %v", ids(got))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		t.Run(op.name+" on a closed store fails", func(t *testing.T) {
			if err := op.do(t.Context()); !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("error = %v; want ErrUnavailable", err)
			}
		})
	}
}
