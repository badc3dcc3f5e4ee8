package store

import (
	"context"
	"time"
)

// IdempotencyRecord is what is kept of a create made under an idempotency key: who sent it and
// with which key, what it asked for, the post id it reserved, and, once it is done, its response.
// posts.Service.CreateOnce decides what each state means; a store only keeps the records and
// makes each change in one atomic step.
type IdempotencyRecord struct {
	// UserID and Key name the record: a key is the caller's own, never shared across users.
	UserID string
	Key    string
	// Fingerprint is what the request asked for, in a form that a retry of it repeats.
	Fingerprint string
	// PostID is the id the create gives its post, chosen when the key is reserved, so that a
	// retry after a crash can find the post the first attempt wrote. Once that post is deleted,
	// the id is refused (store.ErrDeleted) until the record expires.
	PostID string
	// Attempt counts the attempts that held the record: 1 for the first, one more for each
	// that took over from an attempt that ended without a response.
	Attempt int
	// LockedUntil is when the attempt's hold on the record ends (its lease): until then a retry
	// is told that the first is still under way.
	LockedUntil time.Time
	// CreatedAt is when the key was reserved, ExpiresAt when the record stops counting: a
	// record past it is as good as absent, and a sweep deletes it.
	CreatedAt time.Time
	ExpiresAt time.Time
	// Response is the response of the create, nil while it is under way.
	Response *Response
}

// Response is a response as kept, to be sent again as it was.
type Response struct {
	Status int
	// Header holds the header fields the response was written with.
	Header map[string][]string
	Body   []byte
}

// IdempotencyStore keeps the records of idempotency keys, beside the posts of the same store.
// Both backends are one. Every method is safe for concurrent use, across processes sharing the
// database too, and honours ctx as Store's methods do. A record past its ExpiresAt counts as
// absent everywhere.
type IdempotencyStore interface {
	// ReserveKey stores r, a record under way, unless a record of r.UserID and r.Key that has
	// not expired at now is stored; it returns the record stored afterwards and whether it is r.
	ReserveKey(ctx context.Context, r IdempotencyRecord, now time.Time) (stored IdempotencyRecord, reserved bool, err error)
	// TakeOverKey moves the record under way of user and key from attempt to the next one, held
	// until until, if attempt still holds it and its hold has ended at now; it says whether it did.
	TakeOverKey(ctx context.Context, user, key string, attempt int, now, until time.Time) (bool, error)
	// CompleteKey keeps res as the response of the record of user and key if it is still under
	// way, whichever attempt holds it; a record done already keeps its response.
	CompleteKey(ctx context.Context, user, key string, res Response) error
	// InsertPostCompletingKey inserts p and logs its event, as InsertPost does, and completes the
	// record of p.UserID and key with res, as CompleteKey does: in one transaction where the
	// backend has them (SQLite), else in that order (MongoDB). inserted says whether p was stored
	// (with its event), which it may be with an error: that of the completion, where it is not in
	// the same transaction. A post id in use fails it, and so does a deleted post's id kept
	// (ErrDeleted, see Store.DeletePost): then neither is written.
	InsertPostCompletingKey(ctx context.Context, p Post, key string, res Response) (e Event, inserted bool, err error)
	// ReleaseKey ends the hold of attempt on the record of user and key, still under way, so that
	// the next retry takes it over at once.
	ReleaseKey(ctx context.Context, user, key string, attempt int) error
	// DeleteKey deletes the record of user and key if attempt holds it, still under way: its
	// create wrote nothing, so the key may be used again as if never sent.
	DeleteKey(ctx context.Context, user, key string, attempt int) error
	// DeleteExpiredKeys deletes at most limit records that have expired at now, and the deleted
	// post ids kept for them (Store.DeletePost) whose records have all expired at now, at most
	// limit in all, and returns how many it deleted.
	DeleteExpiredKeys(ctx context.Context, now time.Time, limit int) (int, error)
}
