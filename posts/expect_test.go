package posts

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/store"
)

// A write that expects something of the post happens only when the post meets it; otherwise it
// fails with the first of ErrNotFound, ErrForbidden and a *ConflictError that applies, and
// changes nothing.
func TestExpect(t *testing.T) {
	st := newStore(t)
	s := newService(st, 100)
	title := "changed"
	change := Changes{Title: Change{Set: true, Value: &title}}
	atTwo := func(p Post) bool { return p.Version == 2 }
	tests := []struct {
		name    string
		caller  auth.Identity
		missing bool
		expect  Expect
		want    error // nil: the write happens
	}{
		{"at the post's version, the write happens", alice, false, AtVersion(2), nil},
		{"at an earlier version, it is a conflict", alice, false, AtVersion(1), ErrVersionConflict},
		{"at a later version, it is a conflict", alice, false, AtVersion(3), ErrVersionConflict},
		{"at version 0, which no post is at, it is a conflict", alice, false, AtVersion(0), ErrVersionConflict},
		{"at a negative version, it is a conflict", alice, false, AtVersion(-2), ErrVersionConflict},
		{"of a post that holds, the write happens", alice, false, When(atTwo), nil},
		{"of a post that does not hold, it is a conflict", alice, false, When(func(Post) bool { return false }), ErrVersionConflict},
		{"at the version, someone else's post is forbidden", bob, false, AtVersion(2), ErrForbidden},
		{"at another version, someone else's post is still forbidden, not a conflict", bob, false, AtVersion(1), ErrForbidden},
		{"someone else's post that holds is forbidden", bob, false, When(atTwo), ErrForbidden},
		{"a missing post is not found, whatever the version", alice, true, AtVersion(1), ErrNotFound},
		{"a missing post is not found, whatever it should hold", alice, true, When(atTwo), ErrNotFound},
	}
	for _, delete := range []bool{false, true} {
		for _, tc := range tests {
			verb := "Update"
			if delete {
				verb = "Delete"
			}
			t.Run(verb+": "+tc.name, func(t *testing.T) {
				p := create(t, s, alice, "expected")
				p, err := s.Update(t.Context(), alice, p.ID, Changes{Body: Change{Set: true, Value: ptr("at 2")}}, Expect{})
				if err != nil || p.Version != 2 {
					t.Fatalf("the post is at %d (%v); want 2", p.Version, err)
				}
				id := p.ID
				if tc.missing {
					id = store.NewID(time.Now())
				}
				var got Post
				if delete {
					err = s.Delete(t.Context(), tc.caller, id, tc.expect)
				} else {
					got, err = s.Update(t.Context(), tc.caller, id, change, tc.expect)
				}
				after, getErr := s.Get(t.Context(), p.ID)
				switch {
				case tc.want != nil:
					if !errors.Is(err, tc.want) {
						t.Fatalf("error = %v; want %v", err, tc.want)
					}
					if conflict, ok := errors.AsType[*ConflictError](err); ok && conflict.Version != 2 {
						t.Errorf("the conflict names version %d; want the post's, 2", conflict.Version)
					}
					if getErr != nil || describe(after) != describe(p) {
						t.Errorf("the post is now %s (%v); want it unchanged, %s", describe(after), getErr, describe(p))
					}
				case err != nil:
					t.Fatalf("error = %v", err)
				case delete:
					if !errors.Is(getErr, ErrNotFound) {
						t.Errorf("after the delete, Get: %v; want ErrNotFound", getErr)
					}
				default:
					if got.Version != 3 || got.Title != title || describe(after) != describe(got) {
						t.Errorf("returned %s, stored %s; want the title changed at version 3", describe(got), describe(after))
					}
				}
			})
		}
	}
}

// Many writers that expect the post to hold what it holds now, at once: one writes, the others
// get a conflict, both for AtVersion (the store's statement decides) and When (which reads
// first, then writes at the version it read).
func TestOfConcurrentExpectingWritesOneWins(t *testing.T) {
	st := newStore(t)
	s := newService(st, 100)
	for _, tc := range []struct {
		name   string
		expect func(version int64) Expect
	}{
		{"AtVersion", AtVersion},
		{"When", func(v int64) Expect { return When(func(p Post) bool { return p.Version == v }) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := create(t, s, alice, "raced")
			const writers = 16
			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				start  = make(chan struct{})
				won    []string
				others []error
			)
			for w := range writers {
				wg.Go(func() {
					<-start
					title := fmt.Sprint("writer ", w)
					_, err := s.Update(t.Context(), alice, p.ID, Changes{Title: Change{Set: true, Value: &title}}, tc.expect(1))
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						won = append(won, title)
					} else if !errors.Is(err, ErrVersionConflict) {
						others = append(others, err)
					}
				})
			}
			close(start)
			wg.Wait()
			if len(won) != 1 || len(others) != 0 {
				t.Fatalf("%d writes succeeded (%v) and %d failed otherwise than by a conflict (%v); want one and none", len(won), won, len(others), others)
			}
			if after := get(t, s, p.ID); after.Version != 2 || !slices.Contains(won, after.Title) {
				t.Errorf("the post is %q at version %d; want the winner's, at 2", after.Title, after.Version)
			}
		})
	}
}
