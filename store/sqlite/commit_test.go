package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// Writes that wait while the writer is held share the next transaction; one of them failing
// (an id taken, no post to update) fails none of the others, and logs nothing of its own.
func TestWritesThatShareATransactionEachHaveTheirOwnOutcome(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	post := func(n int) store.Post {
		return store.Post{ID: fmt.Sprintf("67d44600%016x", n), UserID: "alice", Title: fmt.Sprint("post ", n), CreatedAt: at, UpdatedAt: at}
	}
	if _, err := s.InsertPost(t.Context(), post(0)); err != nil {
		t.Fatal(err)
	}
	c, release := holdWriter(t, s)
	defer release()
	const n = 8
	type outcome struct {
		e   store.Event
		err error
	}
	outcomes := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var o outcome
			switch i {
			case 3: // an id taken
				o.e, o.err = s.InsertPost(t.Context(), post(0))
			case 5: // no such post
				o.e, o.err = s.UpdatePost(t.Context(), post(99).ID, "alice", store.AnyVersion, store.Update{Title: new("x"), UpdatedAt: at})
			default:
				o.e, o.err = s.InsertPost(t.Context(), post(1+i))
			}
			outcomes[i] = o
		})
	}
	for deadline := time.Now().Add(5 * time.Second); len(c.committer.queue) != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued; want %d", len(c.committer.queue), n)
		}
	}
	release()
	wg.Wait()

	var logged []int64
	for i, o := range outcomes {
		switch i {
		case 3:
			if o.err == nil || errors.Is(o.err, store.ErrUnavailable) {
				t.Errorf("the insert of a taken id: %v; want its constraint's error", o.err)
			}
		case 5:
			if !errors.Is(o.err, store.ErrNotFound) {
				t.Errorf("the update of no post: %v; want ErrNotFound", o.err)
			}
		default:
			if o.err != nil {
				t.Errorf("write %d: %v", i, o.err)
			}
			logged = append(logged, o.e.Position)
		}
	}
	events, _, err := s.ReadEvents(t.Context(), 1, 100) // after the first post's event
	if err != nil {
		t.Fatal(err)
	}
	var read []int64
	for _, e := range events {
		read = append(read, e.Position)
	}
	slices.Sort(logged)
	if !slices.Equal(read, logged) {
		t.Errorf("the log holds the positions %v; want those the successful writes returned, %v", read, logged)
	}
}

// A write whose caller gives up while it waits for the committer is never run.
func TestAWriteGivenUpWhileQueuedIsNotRun(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, release := holdWriter(t, s)
	defer release()
	ctx, cancel := context.WithCancel(t.Context())
	failed := make(chan error, 1)
	p := store.Post{ID: "67d446000000000000000001", UserID: "alice", Title: "given up", CreatedAt: time.Now(), UpdatedAt: time.Now()}
	go func() { _, err := s.InsertPost(ctx, p); failed <- err }()
	for deadline := time.Now().Add(5 * time.Second); len(c.committer.queue) != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the write was not queued")
		}
	}
	cancel()
	if err := <-failed; !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("InsertPost = %v; want ErrUnavailable", err)
	}
	release()
	// A write after it, through the same committer, is the next thing it runs.
	if _, err := s.InsertPost(t.Context(), store.Post{ID: "67d446000000000000000002", UserID: "alice", Title: "next", CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetPost(t.Context(), p.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetPost of the post given up: %v; want ErrNotFound", err)
	}
	if events, _, err := s.ReadEvents(t.Context(), 0, 10); err != nil || len(events) != 1 || events[0].Post.Title != "next" {
		t.Errorf("the log holds %+v, %v; want the next write's event alone", events, err)
	}
}

// holdWriter makes the committer take a write of the test's, which then waits in its BEGIN for
// the writer's one connection, held until release: the writes that follow wait in its queue.
func holdWriter(t *testing.T, s *Store) (*conns, func()) {
	t.Helper()
	c, err := s.conns()
	if err != nil {
		t.Fatal(err)
	}
	held, err := c.write.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	first := &write{ctx: t.Context(), do: func(context.Context, *sql.Tx, *conns) error { return nil }, done: make(chan struct{})}
	release := sync.OnceFunc(func() {
		held.Close()
		<-first.done
	})
	c.committer.queue <- first
	// Taken once the committer has looked for more to take with it: the writes that follow
	// wait for its next transaction.
	for deadline := time.Now().Add(5 * time.Second); first.state.Load() != taken; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			release()
			t.Fatal("the committer did not take the first write")
		}
	}
	return c, release
}
