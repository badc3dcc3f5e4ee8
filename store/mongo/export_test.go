package mongo

import (
	"context"
	"slices"
	"testing"
	"time"
)

// SetWaits sets holeWait and helpAfter until the test ends, whatever the latency of the
// commands (latencyFactor).
func SetWaits(t *testing.T, hole, help time.Duration) {
	savedHole, savedHelp, savedFactor := holeWait, helpAfter, latencyFactor
	holeWait, helpAfter, latencyFactor = hole, help, 0
	t.Cleanup(func() { holeWait, helpAfter, latencyFactor = savedHole, savedHelp, savedFactor })
}

// TakePosition takes the next position of the log and leaves it empty, as a writer that stopped
// right after it would.
func (s *Store) TakePosition(t *testing.T) int64 {
	t.Helper()
	p, err := s.nextPosition(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Preparing says whether a call holds preparing: it prepares a collection on first use.
func (s *Store) Preparing() bool { return len(s.preparing) == 1 }

// Database is the name of the store's database.
func (s *Store) Database() string { return s.database }

// SetExpiry sets settleWait and expireBatch until the test ends.
func SetExpiry(t *testing.T, settle time.Duration, batch int64) {
	savedSettle, savedBatch := settleWait, expireBatch
	settleWait, expireBatch = settle, batch
	t.Cleanup(func() { settleWait, expireBatch = savedSettle, savedBatch })
}

// SetClock sets the clock of the times the store writes offset from this machine's: another
// instance's, skewed.
func (s *Store) SetClock(offset time.Duration) {
	s.now = func() time.Time { return time.Now().Add(offset) }
}

// IndexOptions is how many options each of the package's index models with options has.
func IndexOptions() []int {
	var n []int
	for _, model := range append(append(slices.Clone(indexes), eventIndexes...), expiryIndex) {
		if model.Options != nil {
			n = append(n, len(model.Options.Opts))
		}
	}
	return n
}

// SetBackfill sets the backfill's batch and its first wait after a batch that stored nothing
// until the test ends.
func SetBackfill(t *testing.T, batch int, retry time.Duration) {
	savedBatch, savedRetry := backfillBatch, backfillRetry
	backfillBatch, backfillRetry = batch, retry
	t.Cleanup(func() { backfillBatch, backfillRetry = savedBatch, savedRetry })
}

// OnBackfillRead has the store's backfill call read with the ids of each batch it read, before
// it writes them, and under the batch's context; before the store's first use.
func (s *Store) OnBackfillRead(read func(ctx context.Context, ids []string)) {
	s.backfillRead = func(ctx context.Context, docs []post) {
		ids := make([]string, len(docs))
		for i, d := range docs {
			ids[i] = d.ID.Hex()
		}
		read(ctx, ids)
	}
}
