package posts

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/requestid"
	"github.com/postsedge/caddy-posts/store"
)

// ProfileRefresh is how long a saved profile is not saved again unchanged, and so how far a
// user's updatedAt may lag behind their last write.
const ProfileRefresh = 10 * time.Minute

// maxRemembered bounds the profiles remembered; past it, they are forgotten all at once.
const maxRemembered = 10_000

// saveProfile records the caller in the users collection, with the name and email its
// credential gives, after each of its writes. The write has happened by then, so a failure here
// is logged, not returned: the client must not retry a write that succeeded.
//
// The same profile is saved again only after ProfileRefresh: a user who writes often would
// otherwise cost two store writes per write.
func (s *Service) saveProfile(ctx context.Context, caller Caller) {
	saved := savedProfile{name: caller.Name, email: caller.Email, at: now()}
	if !s.profiles.stale(caller.UserID, saved) {
		return
	}
	err := s.store.SaveUser(ctx, store.User{
		ID: caller.UserID, Name: nonEmpty(caller.Name), Email: nonEmpty(caller.Email), UpdatedAt: timestamp(),
	})
	if err != nil {
		s.logger.Warn("could not save the user's profile", requestid.Field(ctx), zap.String("user_id", caller.UserID), zap.Error(err))
		return
	}
	s.profiles.remember(caller.UserID, saved)
}

// savedProfile is a profile this service saved, and when.
type savedProfile struct {
	name, email string
	at          time.Time
}

// profiles remembers the profiles saved lately, by user id.
type profiles struct {
	mu    sync.Mutex
	saved map[string]savedProfile
}

// stale says whether p must be saved: it differs from the one saved last, or that one is older
// than ProfileRefresh.
func (ps *profiles) stale(user string, p savedProfile) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	last, ok := ps.saved[user]
	return !ok || last.name != p.name || last.email != p.email || p.at.Sub(last.at) >= ProfileRefresh
}

func (ps *profiles) remember(user string, p savedProfile) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.saved == nil || len(ps.saved) >= maxRemembered {
		ps.saved = map[string]savedProfile{}
	}
	ps.saved[user] = p
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
