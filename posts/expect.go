package posts

import (
	"context"

	"github.com/postsedge/caddy-posts/store"
)

// Expect is what an update or a delete expects of the post it writes (an If-Match, an
// expectedVersion): the write happens only if the post meets it, or fails with a
// *ConflictError and changes nothing. The zero Expect expects nothing.
//
// Whatever it expects, the store is asked to write the post at one version, in the statement
// that writes it (store.Store.UpdatePost), so of two writers that expect the same version at
// most one succeeds. AtVersion names that version; When reads the post first, checks it, and
// writes at the version it read.
type Expect struct {
	version int64           // the version the post must be at; 0 for none
	holds   func(Post) bool // when set (and version 0), what the post as it is must satisfy
}

// AtVersion expects the post at version v. No post is at a version below 1: such a v is never met.
func AtVersion(v int64) Expect {
	if v < 1 {
		return Expect{holds: never}
	}
	return Expect{version: v}
}

// When expects the post as it is stored to satisfy holds (a list of versions, a time). It costs
// a read before the write.
func When(holds func(Post) bool) Expect { return Expect{holds: holds} }

func never(Post) bool { return false }

// conditional says whether e expects anything.
func (e Expect) conditional() bool { return e.version != 0 || e.holds != nil }

// atVersion is the version the caller's write of the post with the id must find in the store,
// or store.AnyVersion: e's version, or, for When, the post's version once it is read and found
// to hold (checked as the write checks: a missing post, then the owner, then the version).
func (s *Service) atVersion(ctx context.Context, caller Caller, id string, e Expect) (int64, error) {
	switch {
	case e.version != 0:
		return e.version, nil
	case e.holds == nil:
		return store.AnyVersion, nil
	}
	stored, err := s.store.GetPost(ctx, id)
	switch {
	case err != nil:
		return 0, fromStore(err)
	case stored.UserID != caller.UserID:
		return 0, ErrForbidden
	case !e.holds(toPost(stored)):
		return 0, &ConflictError{Version: stored.Version}
	}
	return stored.Version, nil
}

// whyNotWritten tells, after a write filtered by owner (and version) matched nothing, a missing
// post (404) from someone else's (403) and, for a write that expected something, from one at
// another version (412). It is the only read that follows a write: nothing was written, so it
// undoes nothing. Of a post that changes meanwhile, it tells what it reads.
func (s *Service) whyNotWritten(ctx context.Context, caller Caller, id string, e Expect) error {
	stored, err := s.store.GetPost(ctx, id)
	switch {
	case err != nil:
		return fromStore(err)
	case stored.UserID != caller.UserID || !e.conditional():
		return ErrForbidden
	}
	return &ConflictError{Version: stored.Version}
}
