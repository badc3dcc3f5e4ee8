// Package posts is the domain service behind every transport: it validates input, takes the
// author from the caller, decides who may do what, enforces ownership and reads and writes
// through the store. REST and GraphQL both call it, so each rule is written once, here. It also
// offers each write's event to the events.Follower (events.go), makes a create under an
// idempotency key happen once (idempotency.go, keysweep.go), and reads the log a subscription
// resumes from (resume.go).
package posts

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/store"
)

// Post is a post as the service returns it.
type Post struct {
	// ID is 24 lowercase hex characters, time-ordered.
	ID     string
	UserID string
	Title  string
	// Body is nil for a post without one, which differs from an empty body.
	Body *string
	// CreatedAt and UpdatedAt are in UTC with millisecond precision.
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version is 1 for a new post and grows by one with each update (see Expect).
	Version int64
}

// toPost is the one way in from the store's posts, and toStore the one way out: Post keeps no
// storage type, so the store may change its own without the transports noticing.
func toPost(p store.Post) Post {
	return Post{ID: p.ID, UserID: p.UserID, Title: p.Title, Body: p.Body, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt, Version: p.Version}
}

func toStore(p Post) store.Post {
	return store.Post{ID: p.ID, UserID: p.UserID, Title: p.Title, Body: p.Body, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt, Version: p.Version}
}

// TimeFormat is how createdAt and updatedAt are written: RFC 3339 in UTC with milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

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
	// MaxSearchTerms is how many words a search may have (ParseSearch). Default:
	// DefaultMaxSearchTerms.
	MaxSearchTerms int
	// Logger receives the failures that do not fail the request: a profile that could not be saved.
	Logger *zap.Logger
	// Events is the events.Broker that subscriptions subscribe to (Service.Subscribe); nil, the
	// service has none.
	Events *events.Broker[*Event]
	// Follower, if set, is offered the event of every write the service makes: it follows the
	// store's event log and publishes each event to Events, in the log's order.
	Follower *events.Follower
	// SubscriptionsRequireAuth makes Allow refuse Subscribe to an anonymous caller. False (the
	// default): anyone may subscribe, as anyone may read.
	SubscriptionsRequireAuth bool
	// Keys keeps the idempotency keys of CreateOnce and RunOnce. Default: Store, if it keeps them.
	Keys store.IdempotencyStore
	// KeyTTL is how long an idempotency key and its answer are kept. Default: DefaultKeyTTL.
	KeyTTL time.Duration
}

// Service applies the rules of posts. Its methods are safe for concurrent use.
type Service struct {
	store                    store.Store
	timeout                  time.Duration
	maxLimit                 int
	maxSearchTerms           int
	logger                   *zap.Logger
	events                   *events.Broker[*Event]
	follower                 *events.Follower
	subscriptionsRequireAuth bool
	profiles                 profiles // saved lately, so that unchanged ones are not saved on every write
	keys                     store.IdempotencyStore
	keyTTL                   time.Duration
	readCursor               atomic.Pointer[positionCursor] // the last cursor ReadCursor made
}

// NewService returns the Service that cfg describes.
func NewService(cfg Config) *Service {
	if cfg.Keys == nil {
		cfg.Keys, _ = cfg.Store.(store.IdempotencyStore)
	}
	return &Service{
		store:                    cfg.Store,
		timeout:                  cfg.Timeout,
		maxLimit:                 cfg.MaxLimit,
		maxSearchTerms:           cmp.Or(cfg.MaxSearchTerms, DefaultMaxSearchTerms),
		logger:                   cfg.Logger,
		events:                   cfg.Events,
		follower:                 cfg.Follower,
		subscriptionsRequireAuth: cfg.SubscriptionsRequireAuth,
		keys:                     cfg.Keys,
		keyTTL:                   cmp.Or(cfg.KeyTTL, DefaultKeyTTL),
	}
}

// MaxLimit is the largest page a List returns.
func (s *Service) MaxLimit() int { return s.maxLimit }

// bounded is ctx with the store's deadline, under which every store call of a method runs: a
// database that stops answering costs a request the timeout, then ErrUnavailable.
func (s *Service) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
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
	case errors.Is(err, store.ErrBreakerOpen):
		return fmt.Errorf("%w: %w", ErrNotTried, err)
	case errors.Is(err, store.ErrUnavailable):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case errors.Is(err, store.ErrIndexing):
		return fmt.Errorf("%w: %w", ErrIndexing, err)
	}
	return err
}

// Ping checks that the store answers within the timeout: ErrUnavailable if it does not.
func (s *Service) Ping(ctx context.Context) error {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	return fromStore(s.store.Ping(ctx))
}
