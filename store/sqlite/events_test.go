package sqlite_test

import (
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// Expiry deletes a batch per statement, so that the writes waiting for the one writer go in
// between; a log of more than two batches goes whole, and the writes after it go on.
func TestExpiryDeletesInBatches(t *testing.T) {
	t.Parallel() // on a store of its own; the package's longest tests under the race detector run together
	s := open(t, t.TempDir(), sqlite.Options{})
	total := 2*sqlite.ExpireBatch + 1
	for i := range total {
		p := store.Post{ID: store.NewID(time.Now()), UserID: "alice", Title: "t", CreatedAt: time.Now(), UpdatedAt: time.Now()}
		if _, err := s.InsertPost(t.Context(), p); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	n, err := s.ExpireEvents(t.Context(), time.Time{}, 1)
	if err != nil || n != total-1 {
		t.Fatalf("ExpireEvents = %d, %v; want %d, all but the last", n, err, total-1)
	}
	if st, err := s.Stats(t.Context()); err != nil || st != (store.LogStats{Events: 1, Oldest: int64(total), Last: int64(total)}) {
		t.Errorf("Stats = %+v, %v; want the last event alone", st, err)
	}
}
