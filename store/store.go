// Package store is the storage contract of caddy-posts: the stored types, with no driver type in
// them, and the Store interface that package posts reads and writes through. Its backends live
// beside it: store/sqlite (the embedded default) and store/mongo (MongoDB); store/storetest is
// the conformance suite both pass.
//
// Beside Store, the contracts of the event log (EventLog, events.go) and of idempotency keys
// (IdempotencyStore, idempotency.go), and what serves every backend: ids (NewID, id.go), an
// observed store (Observe, observed.go), the Breaker (breaker.go, breaker_guard.go), and Copy
// between two stores (copy.go).
package store

import (
	"context"
	"errors"
	"iter"
	"strings"
	"time"

	"github.com/postsedge/caddy-posts/store/words"
)

// Post is a post as stored.
type Post struct {
	// ID is 24 lowercase hex characters, time-ordered (see NewID).
	ID     string
	UserID string
	Title  string
	// Body is nil for a post without one, which differs from an empty body.
	Body *string
	// CreatedAt and UpdatedAt are stored in UTC with millisecond precision.
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version is 1 for a new post and grows by one with each update, in the statement that
	// writes it. InsertPost stores a Version below 1 as 1; posts stored by releases that had
	// no versions read as 1.
	Version int64
}

// AnyVersion, as the version of UpdatePost or DeletePost, writes the post whatever its version.
const AnyVersion int64 = 0

// Key is a post's place in the newest-first order of lists: CreatedAt, then ID, both descending.
type Key struct {
	CreatedAt time.Time
	ID        string
}

// KeyOf returns the place of p in the order of lists.
func KeyOf(p Post) Key { return Key{CreatedAt: p.CreatedAt, ID: p.ID} }

// Filter selects a page of posts, newest first or, with Oldest, oldest first.
type Filter struct {
	// UserID, when not empty, keeps only that user's posts.
	UserID string
	// Search, when not empty, keeps only the posts it matches (words.Query.Match) by the words
	// of their title and body (words.Of), read from an index: a store that is still building
	// it answers ErrIndexing.
	Search words.Query
	// Since and Until, when not zero, keep only the posts created at Since or later, and
	// before Until.
	Since, Until time.Time
	// Oldest orders the posts oldest first: CreatedAt, then ID, both ascending, the reverse of
	// the order that Key names.
	Oldest bool
	// After, when set, keeps only the posts that come after it in the order (keyset paging:
	// posts inserted meanwhile are newer than the key and never shift the pages after it).
	After *Key
	// Limit is the largest number of posts returned, at least 1.
	Limit int
}

// Follows says whether p comes after the key k in f's order.
func (f Filter) Follows(p Post, k Key) bool {
	c := p.CreatedAt.Compare(k.CreatedAt)
	if c == 0 {
		c = strings.Compare(p.ID, k.ID)
	}
	if f.Oldest {
		return c > 0
	}
	return c < 0
}

// Update is a change to a post. Nil fields are left as they are.
type Update struct {
	Title     *string
	Body      *string
	UnsetBody bool
	UpdatedAt time.Time
}

// User is a user's profile, keyed by the user id.
type User struct {
	ID    string
	Name  *string
	Email *string
	// UpdatedAt is when the profile was last saved, in UTC with millisecond precision.
	UpdatedAt time.Time
}

// Store reads and writes posts and user profiles, and logs each write of a post in its event log
// (EventLog) with the write. Every method is safe for concurrent use, honours ctx (a cancelled or
// expired context ends the call with ErrUnavailable), and maps its driver's failures to
// ErrNotFound and ErrUnavailable.
type Store interface {
	// GetPost returns the post with the id, or ErrNotFound (a malformed id included).
	GetPost(ctx context.Context, id string) (Post, error)
	// ListPosts returns the posts that f selects, in its order.
	ListPosts(ctx context.Context, f Filter) ([]Post, error)
	// InsertPost stores a new post and logs its event, which it returns; an id in use already
	// is an error and changes nothing, and so is ErrDeleted, the id of a post deleted while an
	// idempotency record named it (IdempotencyRecord.PostID): a deleted post is never created
	// again, whichever attempt of its key retries it (see DeletePost).
	InsertPost(ctx context.Context, p Post) (Event, error)
	// UpdatePost applies u to the post with the id if it belongs to owner and, unless version
	// is AnyVersion, is at that version, in one statement that also adds one to its version,
	// and returns the post as it is afterwards. Of two calls with the same version, at most one
	// succeeds. ErrNotFound means no post has that id, owner and version; nothing was written.
	// The event it returns, logged with the write, holds the post as it is afterwards.
	UpdatePost(ctx context.Context, id, owner string, version int64, u Update) (Event, error)
	// DeletePost deletes the post with the id if it belongs to owner and, unless version is
	// AnyVersion, is at that version, in one statement, and returns its event. ErrNotFound
	// means no post has that id, owner and version; nothing was deleted. If an idempotency
	// record names the id, the store keeps the id, deleted, until the latest such record
	// expires (IdempotencyStore.DeleteExpiredKeys deletes it then), and InsertPost refuses it
	// meanwhile: only a retry of that record's create could give it again, as every other
	// create takes a new id (NewID). An id no record names leaves nothing behind.
	DeletePost(ctx context.Context, id, owner string, version int64) (Event, error)

	// SaveUser creates the user or refreshes its profile. A nil Name or Email leaves the stored
	// one as it is, so a credential without a profile never erases one.
	SaveUser(ctx context.Context, u User) error
	// GetUser returns the user with the id, or ErrNotFound.
	GetUser(ctx context.Context, id string) (User, error)
	// GetUsers returns, in one query, the users with the ids that have a profile, in no order.
	GetUsers(ctx context.Context, ids []string) ([]User, error)

	// Ping checks that the store answers.
	Ping(ctx context.Context) error
	// Close releases the store; calls after it fail with ErrUnavailable.
	Close() error
}

// CopySource is a store that `caddy posts-copy` reads: every post and every profile in ascending
// order of their ids (byte order, as Go compares strings), read a batch at a time so that memory
// stays bounded at any size. Both backends' stores are one, and so is sqlite.Snapshot.
type CopySource interface {
	// AllPosts yields every post in ascending id order, reading at most batch posts (and about
	// MaxBatchBytes) at a time; an error is its last value.
	AllPosts(ctx context.Context, batch int) iter.Seq2[Post, error]
	// AllUsers yields every profile in ascending id order, as AllPosts does.
	AllUsers(ctx context.Context, batch int) iter.Seq2[User, error]
}

// CopyTarget is a store that `caddy posts-copy` writes: batches stored as they are, skipping
// what is there already, so that a copy that stopped half-way completes when run again.
type CopyTarget interface {
	CopySource
	// InsertPosts stores the posts whose ids are not stored yet, as they are (ids and times
	// kept), in one transaction or one bulk write, and leaves the posts stored already as they
	// are; it returns how many it stored. An id that is not a post id fails the batch before
	// anything is written. It keeps no reference to posts.
	InsertPosts(ctx context.Context, posts []Post) (inserted int, err error)
	// InsertUsers stores the profiles whose ids are not stored yet, as they are, and leaves the
	// others as they are, as InsertPosts does; it returns how many it stored.
	InsertUsers(ctx context.Context, users []User) (inserted int, err error)
}

var (
	// ErrNotFound means nothing matched.
	ErrNotFound = errors.New("no matching record")
	// ErrUnavailable means the database could not be reached, was closed, or did not answer
	// before the context ended.
	ErrUnavailable = errors.New("database unavailable")
	// ErrDeleted means an insert named the id of a post deleted while an idempotency record
	// named it (see Store.DeletePost); nothing was written.
	ErrDeleted = errors.New("the post of this id was deleted, and is not created again")
	// ErrIndexing means a search asked a store that is still building its search index from
	// the posts it held before it had one: its answer would miss some of them.
	ErrIndexing = errors.New("the search index is being built")
)
