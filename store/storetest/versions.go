package storetest

// The behaviours of posts' versions: each update adds one, and a write given a version happens
// only while the post is at it (If-Match, expectedVersion), checked in the write's statement.

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

func testVersionsGrow(t *testing.T, open Open) {
	s := open(t)
	insert(t, s, newPost(1, "alice", base))
	if got := get(t, s, id(1)).Version; got != 1 {
		t.Fatalf("a new post is at version %d; want 1", got)
	}
	for want := int64(2); want <= 4; want++ {
		updated, err := s.UpdatePost(t.Context(), id(1), "alice", store.AnyVersion, store.Update{Title: ptr(fmt.Sprint("v", want)), UpdatedAt: base})
		if err != nil {
			t.Fatal(err)
		}
		if updated.Post.Version != want || get(t, s, id(1)).Version != want {
			t.Errorf("after update %d the version returned is %d and stored %d; want %d", want-1, updated.Post.Version, get(t, s, id(1)).Version, want)
		}
	}
	if _, err := s.UpdatePost(t.Context(), id(1), "mallory", store.AnyVersion, store.Update{Title: ptr("x"), UpdatedAt: base}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("someone else's update: error = %v; want ErrNotFound", err)
	}
	if got := get(t, s, id(1)).Version; got != 4 {
		t.Errorf("a refused update moved the version to %d; want 4", got)
	}
	if got := list(t, s, store.Filter{Limit: 1}); len(got) != 1 || got[0].Version != 4 {
		t.Errorf("ListPosts reads %+v; want the post at version 4", got)
	}
}

func testConditionalWrites(t *testing.T, open Open) {
	s := open(t)
	later := base.Add(time.Minute)
	// Each case starts from a post of alice's at version 3.
	tests := []struct {
		name    string
		owner   string
		version int64
		delete  bool
		ok      bool
	}{
		{"an update at the post's version succeeds", "alice", 3, false, true},
		{"an update at an earlier version is refused", "alice", 2, false, false},
		{"an update at a later version is refused", "alice", 4, false, false},
		{"an update at the version by someone else is refused", "mallory", 3, false, false},
		{"a delete at the post's version succeeds", "alice", 3, true, true},
		{"a delete at an earlier version is refused", "alice", 1, true, false},
		{"a delete at a later version is refused", "alice", 9, true, false},
		{"a delete at the version by someone else is refused", "mallory", 3, true, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := store.Post{ID: id(i), UserID: "alice", Title: "start", Body: ptr("kept"), CreatedAt: base, UpdatedAt: base, Version: 3}
			insert(t, s, start)
			var err error
			var updated store.Event
			if tc.delete {
				_, err = s.DeletePost(t.Context(), start.ID, tc.owner, tc.version)
			} else {
				updated, err = s.UpdatePost(t.Context(), start.ID, tc.owner, tc.version, store.Update{Title: ptr("changed"), UpdatedAt: later})
			}
			stored, getErr := s.GetPost(t.Context(), start.ID)
			switch {
			case !tc.ok:
				if !errors.Is(err, store.ErrNotFound) {
					t.Errorf("error = %v; want ErrNotFound", err)
				}
				if getErr != nil {
					t.Fatalf("the post is gone: %v", getErr)
				}
				if d := diff(stored, start); d != "" {
					t.Errorf("the post changed: %s", d)
				}
			case err != nil:
				t.Fatalf("error = %v", err)
			case tc.delete:
				if !errors.Is(getErr, store.ErrNotFound) {
					t.Errorf("after the delete GetPost: %v; want ErrNotFound", getErr)
				}
			default:
				want := start
				want.Title, want.UpdatedAt, want.Version = "changed", later, 4
				if d := diff(updated.Post, want); d != "" {
					t.Errorf("returned: %s", d)
				}
				if d := diff(stored, want); d != "" {
					t.Errorf("stored: %s", d)
				}
			}
		})
	}
	t.Run("a missing post is not found at any version", func(t *testing.T) {
		if _, err := s.UpdatePost(t.Context(), id(99), "alice", 1, store.Update{Title: ptr("x"), UpdatedAt: later}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("UpdatePost error = %v; want ErrNotFound", err)
		}
		if _, err := s.DeletePost(t.Context(), id(99), "alice", 1); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("DeletePost error = %v; want ErrNotFound", err)
		}
	})
}

// testConditionalRace starts writers writes at one version of one post at once, round after
// round: in each, exactly one may succeed, and the post is then the winner's. The last round
// mixes deletes with the updates.
func testConditionalRace(t *testing.T, open Open, writers int) {
	s := open(t)
	insert(t, s, newPost(1, "alice", base))
	const rounds = 5
	for round := int64(1); round <= rounds+1; round++ {
		mixed := round > rounds
		var (
			wg     sync.WaitGroup
			start  = make(chan struct{})
			mu     sync.Mutex
			won    []string
			failed []error
		)
		for w := range writers {
			wg.Go(func() {
				<-start
				name := fmt.Sprintf("writer %d of round %d", w, round)
				var err error
				if mixed && w%2 == 1 {
					name = "deleting " + name
					_, err = s.DeletePost(t.Context(), id(1), "alice", round)
				} else {
					_, err = s.UpdatePost(t.Context(), id(1), "alice", round, store.Update{Title: &name, UpdatedAt: base.Add(time.Duration(round) * time.Second)})
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won = append(won, name)
				case !errors.Is(err, store.ErrNotFound):
					failed = append(failed, err)
				}
			})
		}
		close(start)
		wg.Wait()
		for _, err := range failed {
			t.Errorf("round %d: %v", round, err)
		}
		if len(won) != 1 {
			t.Fatalf("round %d: %d of %d writes at version %d succeeded (%v); want exactly one", round, len(won), writers, round, won)
		}
		got, err := s.GetPost(t.Context(), id(1))
		switch {
		case mixed && errors.Is(err, store.ErrNotFound) && strings.HasPrefix(won[0], "deleting "):
		case err != nil:
			t.Fatalf("round %d: %v", round, err)
		case got.Version != round+1 || got.Title != won[0]:
			t.Errorf("round %d: the post is %q at version %d; want %q at %d", round, got.Title, got.Version, won[0], round+1)
		}
	}
}
