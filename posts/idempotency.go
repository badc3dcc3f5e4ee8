// Idempotent creates: a create sent with an idempotency key makes at most one post per caller
// and key, and every retry of it gets the answer the first got.
//
// The first request reserves the key, with the id its post will have, and holds it for a lease;
// the create inserts the post with that id; the answer is then kept as the key's response,
// together with the post in one transaction where the store can (the embedded store, for REST,
// whose answer is known before the insert), else just after it. A retry finds the key: with
// another request than the first, it is refused (ErrKeyReused); done, it gets the kept answer
// (replayed); under way and held, it is told to wait (KeyInUseError); under way but no longer
// held (the attempt crashed, or failed in a way that may have written), it takes the key over,
// keeping its post id, and creates again: an insert that finds the post of that id already
// stored answers with that post instead, and publishes nothing; one that finds it deleted since
// (its user deleted it before the retry came) is refused by the store (store.ErrDeleted), and the
// retry is told so (KeyPostDeletedError), with nothing written: a deleted post never comes back.
// So a crash at any point leaves one post at most, and its event at most once.

package posts

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/requestid"
	"github.com/postsedge/caddy-posts/store"
)

// DefaultKeyTTL is how long an idempotency key is kept when Config.KeyTTL is zero: 24 hours, as
// Stripe keeps them.
const DefaultKeyTTL = 24 * time.Hour

// Answer is a response as a transport wrote it, kept to be sent again as it was.
type Answer struct {
	Status int
	// Header holds the header fields the transport wrote with the answer.
	Header map[string][]string
	Body   []byte
}

// Keyed is what a create sent with an idempotency key is kept under.
type Keyed struct {
	// Key is the caller's idempotency key, whose syntax the transport checked.
	Key string
	// Fingerprint is what the request asks for, written so that a retry of the same request
	// gives the same and another request another (the transport decides what counts).
	Fingerprint string
}

// ErrKeyReused is a request whose idempotency key the caller sent earlier with another request.
var ErrKeyReused = errors.New("this Idempotency-Key was sent before with another request: send a new key for a new request")

// KeyInUseError is a request whose idempotency key an earlier request holds, still under way.
type KeyInUseError struct {
	// RetryAfter is when that request's hold on the key ends, at the latest.
	RetryAfter time.Duration
}

func (e *KeyInUseError) Error() string {
	return "a request with this Idempotency-Key is still under way: retry once it has finished"
}

// KeyPostDeletedError is a retry of a create whose idempotency key made its post, which was
// deleted since: the post is not created again (store.ErrDeleted), and nothing is written.
type KeyPostDeletedError struct {
	// PostID is the id of the post the key's create made.
	PostID string
}

func (e *KeyPostDeletedError) Error() string {
	return "the post this Idempotency-Key created (" + e.PostID + ") was deleted since, and is not created again: send a new key to create a new post"
}

// CreateOnce is Create under an idempotency key: the first request with k creates the post and
// keeps render's answer to it, in the same transaction where the store can; a retry gets that
// answer back, and replayed says so. Input that breaks a rule is refused before the key is
// reserved, so that a corrected request may use it.
func (s *Service) CreateOnce(ctx context.Context, caller Caller, in NewPost, k Keyed, render func(Post) Answer) (a Answer, replayed bool, err error) {
	if _, err := validTitle(in.Title); err != nil {
		return Answer{}, false, err
	}
	if err := validBody(in.Body); err != nil {
		return Answer{}, false, err
	}
	return s.once(ctx, caller, k, render, func(ctx context.Context) (Answer, error) {
		post, err := s.Create(ctx, caller, in)
		if err != nil {
			return Answer{}, err
		}
		return render(post), nil
	})
}

// RunOnce runs run under an idempotency key, for a transport whose answer is known only once
// run has finished (a GraphQL createPost, whose selection reads the store): run calls Create
// once with the context it is given, and its answer is kept after. A retry gets that answer
// back, and replayed says so. A run that wrote nothing (refused input) keeps nothing, so that
// a corrected request may use the key.
func (s *Service) RunOnce(ctx context.Context, caller Caller, k Keyed, run func(context.Context) (Answer, error)) (a Answer, replayed bool, err error) {
	return s.once(ctx, caller, k, nil, run)
}

// once reserves k for caller, runs run with the reservation in its context, and settles the key
// by what the create did.
func (s *Service) once(ctx context.Context, caller Caller, k Keyed, render func(Post) Answer, run func(context.Context) (Answer, error)) (Answer, bool, error) {
	if err := s.Allow(caller, Write); err != nil {
		return Answer{}, false, err
	}
	if s.keys == nil {
		return Answer{}, false, errors.New("the store keeps no idempotency keys")
	}
	r, kept, err := s.reserve(ctx, caller, k)
	if err != nil || kept != nil {
		return fromResponse(kept), kept != nil, err
	}
	r.render = render
	a, err := run(context.WithValue(ctx, reservationKey{}, r))
	return s.settle(ctx, r, a, err), r.outcome == found, err
}

// reserve reserves k for caller, or takes it over from an attempt that no longer holds it; or
// returns the response kept under it, or the error that refuses the request.
func (s *Service) reserve(ctx context.Context, caller Caller, k Keyed) (*reservation, *store.Response, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	t := now()
	rec := store.IdempotencyRecord{UserID: caller.UserID, Key: k.Key, Fingerprint: k.Fingerprint, PostID: store.NewID(t),
		Attempt: 1, LockedUntil: t.Add(s.lease()), CreatedAt: t, ExpiresAt: t.Add(s.keyTTL)}
	stored, reserved, err := s.keys.ReserveKey(ctx, rec, t)
	switch {
	case err != nil:
		return nil, nil, fromStore(err)
	case reserved:
		return &reservation{record: stored}, nil, nil
	case stored.Fingerprint != k.Fingerprint:
		return nil, nil, ErrKeyReused
	case stored.Response != nil:
		return nil, stored.Response, nil
	case stored.LockedUntil.After(t):
		return nil, nil, &KeyInUseError{RetryAfter: stored.LockedUntil.Sub(t)}
	}
	until := t.Add(s.lease())
	took, err := s.keys.TakeOverKey(ctx, caller.UserID, k.Key, stored.Attempt, t, until)
	switch {
	case err != nil:
		return nil, nil, fromStore(err)
	case !took: // another retry took it over first, and holds it now
		return nil, nil, &KeyInUseError{RetryAfter: s.lease()}
	}
	stored.Attempt, stored.LockedUntil = stored.Attempt+1, until
	return &reservation{record: stored}, nil, nil
}

// lease is how long an attempt holds its key: long enough for the few store calls of a create
// and its answer, each bounded by the timeout.
func (s *Service) lease() time.Duration {
	if s.timeout <= 0 {
		return time.Minute
	}
	return 4 * s.timeout
}

// settle keeps a's answer under the key if the create wrote its post (unless the store kept it
// with the post), releases the key if the create may have written, and deletes it if nothing
// was written. It returns the answer the client gets: the one kept, if it was kept with the post.
// It runs even if the client went away, as a retry would wait for a key left held.
func (s *Service) settle(ctx context.Context, r *reservation, a Answer, err error) Answer {
	ctx, cancel := s.bounded(context.WithoutCancel(ctx))
	defer cancel()
	rec := r.record
	var what string
	var failed error
	switch {
	case r.kept != nil:
		return *r.kept
	case (r.outcome == created || r.outcome == found) && err == nil:
		what, failed = "keeping the answer of", s.keys.CompleteKey(ctx, rec.UserID, rec.Key, toResponse(a))
	case r.outcome == notWritten:
		what, failed = "freeing", s.keys.DeleteKey(ctx, rec.UserID, rec.Key, rec.Attempt)
	default:
		what, failed = "releasing", s.keys.ReleaseKey(ctx, rec.UserID, rec.Key, rec.Attempt)
	}
	if failed != nil {
		// The key stays held until its lease ends; a retry then takes it over.
		s.logger.Error(what+" an idempotency key failed", requestid.Field(ctx), zap.String("user_id", rec.UserID),
			zap.String("post_id", rec.PostID), zap.Error(failed))
	}
	return a
}

// outcome is what the create of a reservation did.
type outcome int

const (
	notWritten outcome = iota // no insert was tried, or the input was refused first
	unknown                   // an insert failed, and may have written
	created                   // the post was inserted
	found                     // the post of the reserved id was stored already: an earlier attempt's
	// deleted is a post of the reserved id stored and deleted since: nothing is written, and the
	// key stays, released, so that every retry until it expires is told so (KeyPostDeletedError).
	deleted
)

// reservation is a key held by the request that runs, as Create finds it in its context.
type reservation struct {
	record store.IdempotencyRecord
	// render, if set, is the answer to the post, kept with it in one write.
	render  func(Post) Answer
	taken   atomic.Bool // by a Create: a reservation makes one post
	outcome outcome
	kept    *Answer // the answer kept with the post, if it was
}

type reservationKey struct{}

// reservationOf takes the reservation of ctx, if it has one that no Create took yet.
func reservationOf(ctx context.Context) *reservation {
	r, _ := ctx.Value(reservationKey{}).(*reservation)
	if r == nil || r.taken.Swap(true) {
		return nil
	}
	return r
}

// createReserved stores post, which has the reserved id, or finds the post an earlier attempt of
// the key stored with that id; only a post inserted now is published.
func (s *Service) createReserved(ctx context.Context, caller Caller, r *reservation, post Post) (Post, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	var (
		e        store.Event
		err      error
		inserted bool
	)
	if r.render != nil {
		a := r.render(post)
		e, inserted, err = s.keys.InsertPostCompletingKey(ctx, toStore(post), r.record.Key, toResponse(a))
		if err == nil {
			r.kept = &a
		}
	} else {
		e, err = s.store.InsertPost(ctx, toStore(post))
		inserted = err == nil
	}
	if inserted { // and if the answer was not kept with it, settle keeps it
		r.outcome = created
		s.written(ctx, caller, e)
		return post, nil
	}
	if errors.Is(err, store.ErrDeleted) { // an earlier attempt's post, deleted since
		r.outcome = deleted
		return Post{}, &KeyPostDeletedError{PostID: post.ID}
	}
	if earlier, getErr := s.store.GetPost(ctx, post.ID); getErr == nil && earlier.UserID == caller.UserID {
		r.outcome = found
		return toPost(earlier), nil
	}
	r.outcome = unknown
	return Post{}, s.failed(err)
}

func toResponse(a Answer) store.Response {
	return store.Response{Status: a.Status, Header: a.Header, Body: a.Body}
}

func fromResponse(res *store.Response) Answer {
	if res == nil {
		return Answer{}
	}
	return Answer{Status: res.Status, Header: res.Header, Body: res.Body}
}
