package posts

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/store"
)

// reserveAt stores a key of alice's reserved at t and expiring at expires.
func reserveAt(t *testing.T, keys store.IdempotencyStore, key string, at, expires time.Time) {
	t.Helper()
	r := store.IdempotencyRecord{UserID: "alice", Key: key, Fingerprint: "f", PostID: store.NewID(at), Attempt: 1,
		LockedUntil: at, CreatedAt: at, ExpiresAt: expires}
	if _, reserved, err := keys.ReserveKey(t.Context(), r, at); !reserved || err != nil {
		t.Fatalf("ReserveKey(%s): %v, %v", key, reserved, err)
	}
}

// live says whether key is still stored at t: a reservation of it then finds it.
func live(t *testing.T, keys store.IdempotencyStore, key string, at time.Time) bool {
	t.Helper()
	r := store.IdempotencyRecord{UserID: "alice", Key: key, Fingerprint: "probe", PostID: store.NewID(at), Attempt: 1,
		LockedUntil: at, CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
	stored, reserved, err := keys.ReserveKey(t.Context(), r, at)
	if err != nil {
		t.Fatal(err)
	}
	return !reserved && stored.Fingerprint == "f"
}

func TestASweepDeletesEveryExpiredKeyInBatches(t *testing.T) {
	keys := newStore(t).(store.IdempotencyStore)
	expired := 2*keySweepBatch + 10
	for i := range expired {
		reserveAt(t, keys, fmt.Sprint("old", i), start, start.Add(time.Hour))
	}
	reserveAt(t, keys, "young", start, start.Add(3*time.Hour))
	n, err := sweepKeys(t.Context(), keys, start.Add(2*time.Hour), 5*time.Second)
	if n != expired || err != nil {
		t.Errorf("the sweep deleted %d (%v); want %d", n, err, expired)
	}
	if n, err := sweepKeys(t.Context(), keys, start.Add(2*time.Hour), 5*time.Second); n != 0 || err != nil {
		t.Errorf("a second sweep deleted %d (%v); want none", n, err)
	}
	if !live(t, keys, "young", start.Add(2*time.Hour)) {
		t.Error("the key that had not expired was deleted")
	}
}

func TestSweepKeysRunsUntilItsContextEnds(t *testing.T) {
	keys := newStore(t).(store.IdempotencyStore)
	past := time.Now().Add(-time.Hour)
	reserveAt(t, keys, "old", past, past.Add(time.Minute))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		SweepKeys(ctx, keys, 5*time.Millisecond, time.Second, zap.NewNop())
	}()
	for deadline := time.Now().Add(5 * time.Second); live(t, keys, "old", past); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the expired key is still stored after 5s of sweeps")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("SweepKeys did not return once its context ended")
	}
}
