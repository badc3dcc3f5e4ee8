package mongo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/internal/race"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// A write after the database comes back, through the store's breaker, succeeds within a second
// of its restart, on a loaded machine.
func TestWritesSucceedWithinASecondOfADatabaseRestart(t *testing.T) {
	dir := t.TempDir()
	sockDir, err := os.MkdirTemp("", "ferretdb-restart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	socket := filepath.Join(sockDir, "mongodb.sock")
	server, err := mongotest.StartOn(dir, socket)
	if err != nil {
		t.Fatal(err)
	}
	s, err := mongo.Open(server.URI, fmt.Sprintf("restart_%d", databases.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b := store.NewBreaker(s, store.BreakerConfig{Down: s.Down})
	t.Cleanup(b.Stop)
	st := b.Guard(s)
	n := 0
	write := func() error {
		n++
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := st.InsertPost(ctx, post(n))
		return err
	}
	if err := write(); err != nil {
		t.Fatal(err)
	}
	server.Close()
	// The writes meanwhile fail, and open the breaker.
	for deadline := time.Now().Add(30 * time.Second); !b.Open(); {
		if err := write(); err == nil {
			t.Fatal("a write succeeded with the database stopped")
		}
		if time.Now().After(deadline) {
			t.Fatal("the breaker did not open")
		}
	}
	time.Sleep(2 * time.Second) // down a while
	if server, err = mongotest.StartOn(dir, socket); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Close)
	back := time.Now()
	for write() != nil {
		if time.Since(back) > 30*time.Second {
			t.Fatal("no write succeeded 30 s after the restart")
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(back)
	t.Logf("the first write succeeded %v after the restart", took.Round(time.Millisecond))
	if !race.Enabled && took > time.Second {
		t.Errorf("the first write succeeded %v after the restart; want within 1 s", took.Round(time.Millisecond))
	}
}
