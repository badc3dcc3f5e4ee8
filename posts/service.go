// Package posts is the domain service behind every transport: it validates input, takes the
// author from the caller, enforces ownership and reads and writes through the store. REST and
// GraphQL both call it, so each rule is written once, here.
package posts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/store"
)

// Post is a stored post.
type Post = store.Post

// TimeFormat is how createdAt and updatedAt are written: RFC 3339 in UTC with milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Limits on the input.
const (
	MaxTitleLength = 300    // characters, after trimming surrounding white space
	MaxBodyLength  = 50_000 // characters
	DefaultLimit   = 20     // posts in a page when the request names no limit
)

// NewPost is the input of Create.
type NewPost struct {
	Title string
	Body  *string // nil: no body
}

// Change is one member of a partial update: left alone (Set false), set to a value, or set to
// null (Set true, Value nil).
type Change struct {
	Set   bool
	Value *string
}

// Changes is the input of Update: only the members that are Set change.
type Changes struct {
	Title Change
	Body  Change // null removes the body
}

// ListQuery selects a page of posts, newest first.
type ListQuery struct {
	UserID string // only this user's posts, when not empty
	Limit  int    // 0 means DefaultLimit
	After  string // a cursor from an earlier Page.Next
}

// Page is one page of a list.
type Page struct {
	Posts []Post
	// Next is the cursor of the following page, empty on the last page.
	Next string
}

// now is the clock, replaceable in tests.
var now = time.Now

// Config is what a Service needs.
type Config struct {
	// Store holds the posts and the user profiles.
	Store store.Store
	// Timeout bounds the store calls of each method; past it the method fails with
	// ErrUnavailable. Zero: the caller's context alone.
	Timeout time.Duration
	// MaxLimit is the largest page of a list.
	MaxLimit int
	// Logger receives the failures that do not fail the request: a profile that could not be saved.
	Logger *zap.Logger
	// Events, if set, receives every write once it is stored.
	Events *events.Broker[Event]
}

// EventKind is what a write did.
type EventKind int

// The kinds of writes.
const (
	Created EventKind = iota + 1
	Updated
	Deleted
)

// Event is a write, published after it is stored: the post as it is afterwards (of a deleted
// post, only its ID and UserID).
type Event struct {
	Kind EventKind
	Post Post
}

// Service applies the rules of posts. Its methods are safe for concurrent use.
type Service struct {
	store    store.Store
	timeout  time.Duration
	maxLimit int
	logger   *zap.Logger
	events   *events.Broker[Event]
	profiles profiles // saved lately, so that unchanged ones are not saved on every write
}

// NewService returns the Service that cfg describes.
func NewService(cfg Config) *Service {
	return &Service{store: cfg.Store, timeout: cfg.Timeout, maxLimit: cfg.MaxLimit, logger: cfg.Logger, events: cfg.Events}
}

// bounded is ctx with the store's deadline, under which every store call of a method runs: a
// database that stops answering costs a request the timeout, then ErrUnavailable.
func (s *Service) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// Subscribe returns a subscription to the writes that match, as they are stored. It fails with
// ErrUnavailable when the service publishes no events.
func (s *Service) Subscribe(match func(Event) bool) (*events.Subscription[Event], error) {
	if s.events == nil {
		return nil, fmt.Errorf("%w: this service publishes no events", ErrUnavailable)
	}
	return s.events.Subscribe(match), nil
}

// written does what follows every stored write: the caller's profile, then the event.
func (s *Service) written(ctx context.Context, caller auth.Identity, kind EventKind, post Post) {
	s.saveProfile(ctx, caller)
	if s.events != nil {
		s.events.Publish(Event{Kind: kind, Post: post})
	}
}

// MaxLimit is the largest page a List returns.
func (s *Service) MaxLimit() int { return s.maxLimit }

// RequireCaller returns ErrUnauthenticated for an anonymous caller: every write needs one.
func RequireCaller(caller auth.Identity) error {
	if caller.Anonymous() {
		return ErrUnauthenticated
	}
	return nil
}

// Get returns the post with the id.
func (s *Service) Get(ctx context.Context, id string) (Post, error) {
	id, err := parseID(id)
	if err != nil {
		return Post{}, err
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	post, err := s.store.GetPost(ctx, id)
	return post, fromStore(err)
}

// List returns a page of posts, newest first.
func (s *Service) List(ctx context.Context, q ListQuery) (Page, error) {
	limit := q.Limit
	if limit == 0 {
		limit = min(DefaultLimit, s.maxLimit)
	}
	if limit < 1 || limit > s.maxLimit {
		return Page{}, invalid("limit", "limit must be from 1 to %d", s.maxLimit)
	}
	f := store.Filter{UserID: q.UserID, Limit: limit + 1} // one more tells whether a next page exists
	if q.After != "" {
		key, ok := decodeCursor(q.After)
		if !ok {
			return Page{}, invalid("after", "after is not a cursor from this API; follow the next link of the previous page")
		}
		f.After = &key
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	posts, err := s.store.ListPosts(ctx, f)
	if err != nil {
		return Page{}, fromStore(err)
	}
	page := Page{Posts: posts}
	if len(posts) > limit {
		page.Posts = posts[:limit]
		last := page.Posts[limit-1]
		page.Next = Cursor(last)
	}
	return page, nil
}

// Create stores a new post by the caller.
func (s *Service) Create(ctx context.Context, caller auth.Identity, in NewPost) (Post, error) {
	if err := RequireCaller(caller); err != nil {
		return Post{}, err
	}
	title, err := validTitle(in.Title)
	if err != nil {
		return Post{}, err
	}
	if err := validBody(in.Body); err != nil {
		return Post{}, err
	}
	t := timestamp()
	post := Post{ID: store.NewID(t), UserID: caller.UserID, Title: title, Body: in.Body, CreatedAt: t, UpdatedAt: t}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	if err := s.store.InsertPost(ctx, post); err != nil {
		return Post{}, fromStore(err)
	}
	s.written(ctx, caller, Created, post)
	return post, nil
}

// Update changes the caller's post in one atomic write and returns it as it is afterwards.
func (s *Service) Update(ctx context.Context, caller auth.Identity, id string, ch Changes) (Post, error) {
	if err := RequireCaller(caller); err != nil {
		return Post{}, err
	}
	u, err := validUpdate(ch)
	if err != nil {
		return Post{}, err
	}
	id, err = parseID(id)
	if err != nil {
		return Post{}, err
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	post, err := s.store.UpdatePost(ctx, id, caller.UserID, u)
	if errors.Is(err, store.ErrNotFound) {
		return Post{}, s.whyNotOwned(ctx, id)
	}
	if err != nil {
		return Post{}, fromStore(err)
	}
	s.written(ctx, caller, Updated, post)
	return post, nil
}

// Delete deletes the caller's post.
func (s *Service) Delete(ctx context.Context, caller auth.Identity, id string) error {
	if err := RequireCaller(caller); err != nil {
		return err
	}
	id, err := parseID(id)
	if err != nil {
		return err
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	err = s.store.DeletePost(ctx, id, caller.UserID)
	if errors.Is(err, store.ErrNotFound) {
		return s.whyNotOwned(ctx, id)
	}
	if err != nil {
		return fromStore(err)
	}
	s.written(ctx, caller, Deleted, Post{ID: id, UserID: caller.UserID})
	return nil
}

// saveProfile records the caller in the users collection, with the name and email its
// credential gives, after each of its writes. The write has happened by then, so a failure here
// is logged, not returned: the client must not retry a write that succeeded.
//
// The same profile is saved again only after ProfileRefresh: a user who writes often would
// otherwise cost two store writes per write.
func (s *Service) saveProfile(ctx context.Context, caller auth.Identity) {
	saved := savedProfile{name: caller.Name, email: caller.Email, at: now()}
	if !s.profiles.stale(caller.UserID, saved) {
		return
	}
	err := s.store.SaveUser(ctx, store.User{
		ID: caller.UserID, Name: nonEmpty(caller.Name), Email: nonEmpty(caller.Email), UpdatedAt: timestamp(),
	})
	if err != nil {
		s.logger.Warn("could not save the user's profile", zap.String("user_id", caller.UserID), zap.Error(err))
		return
	}
	s.profiles.remember(caller.UserID, saved)
}

// ProfileRefresh is how long a saved profile is not saved again unchanged, and so how far a
// user's updatedAt may lag behind their last write.
const ProfileRefresh = 10 * time.Minute

// maxRemembered bounds the profiles remembered; past it, they are forgotten all at once.
const maxRemembered = 10_000

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

// User is a user as a caller may see it.
type User struct {
	ID   string
	Name *string
	// Email is the user's own: it is set only when the caller is that user.
	Email *string
}

// User returns the user with the id: the saved profile, or just the id for a user who has posts
// but no profile. found is false when the user has neither.
func (s *Service) User(ctx context.Context, caller auth.Identity, id string) (User, bool, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	saved, err := s.store.GetUser(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		posts, err := s.store.ListPosts(ctx, store.Filter{UserID: id, Limit: 1})
		if err != nil || len(posts) == 0 {
			return User{}, false, fromStore(err)
		}
		return User{ID: id}, true, nil
	}
	if err != nil {
		return User{}, false, fromStore(err)
	}
	return profile(caller, saved), true, nil
}

// Authors returns the authors of ps by user id, read in one query: the saved profile, or the id
// alone for an author without one. As with User, an email is set only for the caller.
func (s *Service) Authors(ctx context.Context, caller auth.Identity, ps []Post) (map[string]User, error) {
	authors := make(map[string]User)
	var ids []string
	for _, p := range ps {
		if _, ok := authors[p.UserID]; !ok {
			authors[p.UserID] = User{ID: p.UserID}
			ids = append(ids, p.UserID)
		}
	}
	if len(ids) == 0 {
		return authors, nil
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	saved, err := s.store.GetUsers(ctx, ids)
	if err != nil {
		return nil, fromStore(err)
	}
	for _, u := range saved {
		authors[u.ID] = profile(caller, u)
	}
	return authors, nil
}

// profile is a saved user as caller may see it.
func profile(caller auth.Identity, saved store.User) User {
	user := User{ID: saved.ID, Name: saved.Name}
	if caller.UserID == saved.ID {
		user.Email = saved.Email
	}
	return user
}

// whyNotOwned tells, after a write filtered by owner matched nothing, a missing post (404) from
// someone else's (403). It is the only read that follows a write.
func (s *Service) whyNotOwned(ctx context.Context, id string) error {
	_, err := s.store.GetPost(ctx, id)
	if err == nil {
		return ErrForbidden
	}
	return fromStore(err)
}

func validTitle(title string) (string, error) {
	if !utf8.ValidString(title) {
		return "", invalid("title", "title must be valid UTF-8")
	}
	title = strings.TrimSpace(title)
	if title == "" {
		return "", invalid("title", "title is required and cannot be blank")
	}
	if n := utf8.RuneCountInString(title); n > MaxTitleLength {
		return "", invalid("title", "title must be 1 to %d characters after trimming white space, not %d", MaxTitleLength, n)
	}
	if r, at, found := forbiddenRune(title, true); found {
		if r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029' {
			return "", invalid("title", "title must be one line: it cannot hold the line break U+%04X (character %d)", r, at)
		}
		return "", invalid("title", "title cannot hold the control character U+%04X (character %d); of the controls, only tab is allowed", r, at)
	}
	return title, nil
}

func validBody(body *string) error {
	if body != nil {
		if !utf8.ValidString(*body) {
			return invalid("body", "body must be valid UTF-8")
		}
		if n := utf8.RuneCountInString(*body); n > MaxBodyLength {
			return invalid("body", "body must be at most %d characters, not %d", MaxBodyLength, n)
		}
		if r, at, found := forbiddenRune(*body, false); found {
			return invalid("body", "body cannot hold the control character U+%04X (character %d); of the controls, only tab, newline and carriage return are allowed", r, at)
		}
	}
	return nil
}

// forbiddenRune finds the first character of s, valid UTF-8, that no text may hold: a C0
// control other than tab, newline and carriage return, DEL, or a C1 control (U+0080 to U+009F).
// Such characters print nothing, or move a terminal's cursor, and are never what a person wrote.
// oneLine also forbids the line breaks: newline, carriage return, U+2028 and U+2029 (NEL,
// U+0085, is a C1 control). at counts characters from 1.
func forbiddenRune(s string, oneLine bool) (r rune, at int, found bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\t':
		case c == '\n' || c == '\r':
			r, found = rune(c), oneLine
		case c < 0x20 || c == 0x7f:
			r, found = rune(c), true
		case c == 0xc2 || c == 0xe2 && oneLine: // the first byte of U+0080 to U+009F; of U+2028 and U+2029
			r, _ = utf8.DecodeRuneInString(s[i:])
			found = 0x80 <= r && r < 0xa0 || r == '\u2028' || r == '\u2029'
		}
		if found {
			return r, utf8.RuneCountInString(s[:i]) + 1, true
		}
	}
	return 0, 0, false
}

func validUpdate(ch Changes) (store.Update, error) {
	if !ch.Title.Set && !ch.Body.Set {
		return store.Update{}, invalid("", "the update is empty: give title, body or both")
	}
	u := store.Update{UpdatedAt: timestamp()}
	if ch.Title.Set {
		if ch.Title.Value == nil {
			return store.Update{}, invalid("title", "title cannot be null: every post has a title")
		}
		title, err := validTitle(*ch.Title.Value)
		if err != nil {
			return store.Update{}, err
		}
		u.Title = &title
	}
	if ch.Body.Set {
		if err := validBody(ch.Body.Value); err != nil {
			return store.Update{}, err
		}
		u.Body, u.UnsetBody = ch.Body.Value, ch.Body.Value == nil
	}
	return u, nil
}

// parseID reads a post id, in either case; a malformed id names no post, so it is ErrNotFound.
func parseID(id string) (string, error) {
	if id = strings.ToLower(id); !store.ValidID(id) {
		return "", ErrNotFound
	}
	return id, nil
}

// timestamp is the current time as stored: UTC, milliseconds (MongoDB's own precision).
func timestamp() time.Time { return now().UTC().Truncate(time.Millisecond) }

// fromStore maps the store's errors to the service's, keeping the cause for the log.
func fromStore(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return ErrNotFound
	case errors.Is(err, store.ErrUnavailable):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}
