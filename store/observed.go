package store

import (
	"context"
	"errors"
	"time"

	"github.com/postsedge/caddy-posts/spans"
)

// Observer is told of every operation of an observed store: its name (get_post, list_posts,
// insert_post, update_post, delete_post, save_user, get_user, get_users, ping, and the
// idempotency keys' of ObserveIdempotency), how long it took and its error (nil when it
// succeeded).
type Observer func(operation string, took time.Duration, err error)

// Observe returns s, a store of system (sqlite, mongodb: OpenTelemetry's db.system.name),
// telling observe of each of its operations, and making each a span of the request it serves
// when that one is traced (spans.Start); the caller decides what to make of the operations
// (caddymodule records metrics), so the backends need not know.
func Observe(s Store, system string, observe Observer) Store {
	return observed{s, observing{system, observe}}
}

// observing opens and ends the spans of an observed store's operations and tells its Observer.
type observing struct {
	system  string
	observe Observer
}

// call is one operation of an observed store, from begin to end.
type call struct {
	operation string
	start     time.Time
	span      spans.Span
}

// begin starts the operation on collection, a span named as OpenTelemetry's database
// conventions name a call's (its operation, then its collection) with their attributes.
func (o observing) begin(ctx context.Context, operation, collection string) (context.Context, call) {
	var span spans.Span
	if spans.Traced(ctx) { // the name is made only then: it costs an allocation
		name := operation
		if collection != "" {
			name += " " + collection
		}
		ctx, span = spans.Start(ctx, name)
		span.String("db.system.name", o.system)
		span.String("db.operation.name", operation)
		if collection != "" {
			span.String("db.collection.name", collection)
		}
	}
	return ctx, call{operation, time.Now(), span}
}

// end ends c with err, which it returns. A post not found is an answer, not an error of the store.
func (o observing) end(c call, err error) error {
	took := time.Since(c.start)
	o.observe(c.operation, took, err)
	if kind := ErrorKind(err); kind != "" {
		c.span.Fail(err, kind)
	}
	c.span.End()
	return err
}

// ErrorKind is how the metrics and spans name a store's error: "" for none, and for not found,
// which is an answer; unavailable for ErrUnavailable (a timeout, a lost server, the breaker's
// refusal), and internal for the rest.
func ErrorKind(err error) string {
	switch {
	case err == nil, errors.Is(err, ErrNotFound):
		return ""
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	}
	return "internal"
}

// Collections of the spans' db.collection.name, as both backends name their tables and
// collections.
const (
	postsCollection = "posts"
	usersCollection = "users"
	keysCollection  = "idempotency_keys"
)

type observed struct {
	Store
	o observing
}

func (s observed) GetPost(ctx context.Context, id string) (Post, error) {
	ctx, c := s.o.begin(ctx, "get_post", postsCollection)
	p, err := s.Store.GetPost(ctx, id)
	return p, s.o.end(c, err)
}

func (s observed) ListPosts(ctx context.Context, f Filter) ([]Post, error) {
	ctx, c := s.o.begin(ctx, "list_posts", postsCollection)
	ps, err := s.Store.ListPosts(ctx, f)
	if c.span.On() && err == nil {
		c.span.Int("db.response.returned_rows", int64(len(ps)))
	}
	return ps, s.o.end(c, err)
}

func (s observed) InsertPost(ctx context.Context, p Post) (Event, error) {
	ctx, c := s.o.begin(ctx, "insert_post", postsCollection)
	e, err := s.Store.InsertPost(ctx, p)
	return e, s.o.end(c, err)
}

func (s observed) UpdatePost(ctx context.Context, id, owner string, version int64, u Update) (Event, error) {
	ctx, c := s.o.begin(ctx, "update_post", postsCollection)
	e, err := s.Store.UpdatePost(ctx, id, owner, version, u)
	return e, s.o.end(c, err)
}

func (s observed) DeletePost(ctx context.Context, id, owner string, version int64) (Event, error) {
	ctx, c := s.o.begin(ctx, "delete_post", postsCollection)
	e, err := s.Store.DeletePost(ctx, id, owner, version)
	return e, s.o.end(c, err)
}

func (s observed) SaveUser(ctx context.Context, u User) error {
	ctx, c := s.o.begin(ctx, "save_user", usersCollection)
	return s.o.end(c, s.Store.SaveUser(ctx, u))
}

func (s observed) GetUser(ctx context.Context, id string) (User, error) {
	ctx, c := s.o.begin(ctx, "get_user", usersCollection)
	u, err := s.Store.GetUser(ctx, id)
	return u, s.o.end(c, err)
}

func (s observed) GetUsers(ctx context.Context, ids []string) ([]User, error) {
	ctx, c := s.o.begin(ctx, "get_users", usersCollection)
	us, err := s.Store.GetUsers(ctx, ids)
	return us, s.o.end(c, err)
}

func (s observed) Ping(ctx context.Context) error {
	ctx, c := s.o.begin(ctx, "ping", "")
	return s.o.end(c, s.Store.Ping(ctx))
}
