package mongo

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/postsedge/caddy-posts/store"
)

// post is a post as a document of the posts collection. Post ids are ObjectIDs, so the
// documents are the ones earlier releases wrote; those had no version, which reads as 1 (and
// which the first use of a store gives them: see versionMissing).
type post struct {
	ID        bson.ObjectID `bson:"_id"`
	UserID    string        `bson:"userId"`
	Title     string        `bson:"title"`
	Body      *string       `bson:"body,omitempty"`
	CreatedAt time.Time     `bson:"createdAt"`
	UpdatedAt time.Time     `bson:"updatedAt"`
	Version   int64         `bson:"version"`
	// Pending is the change the last write made, until its event is logged (events.go).
	Pending *pendingEvent `bson:"ev,omitempty"`
	// Gone marks a deleted post whose event is not logged yet: reads skip it.
	Gone bool `bson:"gone,omitempty"`
	// Terms are the post's words, which a search finds it by (search.go): never nil in a
	// document written (termsOf), and left out of the reads that do not need them (withoutTerms).
	Terms []string `bson:"terms"`
}

// pendingEvent is the change of a write whose event is not logged yet.
type pendingEvent struct {
	Kind string    `bson:"kind"`
	At   time.Time `bson:"at"`
}

// pending is the pending event of a write of kind made now.
func (s *Store) pending(kind string) *pendingEvent {
	return &pendingEvent{Kind: kind, At: s.now().UTC().Truncate(time.Millisecond)}
}

// absent matches a field that a document does not have.
var absent = bson.D{{Key: "$exists", Value: false}}

func (p post) toStore() store.Post {
	return store.Post{ID: p.ID.Hex(), UserID: p.UserID, Title: p.Title, Body: p.Body, CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC(),
		Version: max(p.Version, 1)}
}

// objectID reads a post id; ok is false for a string that is not one (store.ValidID: lowercase
// only, as the SQLite store compares ids as text).
func objectID(id string) (oid bson.ObjectID, ok bool) {
	if !store.ValidID(id) {
		return oid, false
	}
	oid, err := bson.ObjectIDFromHex(id)
	return oid, err == nil
}

// idFilter selects the post with the ID, unless it is deleted (a tombstone whose event is not
// logged yet). It is a struct rather than a bson.D, which would box both the slice and the id:
// two allocations more on every read.
type idFilter struct {
	ID   bson.ObjectID `bson:"_id"`
	Gone bson.D        `bson:"gone"`
}

// ownedFilter puts ownership into the filter, so a write can never touch someone else's post,
// and asks for no pending event: a post takes its next write once its last one's event is
// logged (events.go).
type ownedFilter struct {
	ID      bson.ObjectID `bson:"_id"`
	UserID  string        `bson:"userId"`
	Pending bson.D        `bson:"ev"`
}

// versionedFilter is ownedFilter with the version the post must be at, so a write can never
// touch a post that changed since its writer read it.
type versionedFilter struct {
	ID      bson.ObjectID `bson:"_id"`
	UserID  string        `bson:"userId"`
	Version int64         `bson:"version"`
	Pending bson.D        `bson:"ev"`
}

// writeFilter selects the post with the id oid if it belongs to owner, is at version (any, for
// store.AnyVersion), and has no pending event.
func writeFilter(oid bson.ObjectID, owner string, version int64) any {
	if version == store.AnyVersion {
		return ownedFilter{oid, owner, absent}
	}
	return versionedFilter{oid, owner, version, absent}
}

// live selects the posts that are not deleted.
var live = bson.E{Key: "gone", Value: absent}

// nextVersion is the part of every update that adds one to the version.
var nextVersion = bson.E{Key: "$inc", Value: bson.D{{Key: "version", Value: int64(1)}}}

// newestFirst is the order of lists, and earliestFirst that of store.Filter.Oldest: one index
// serves both, read forwards or backwards.
var (
	newestFirst   = bson.D{{Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}
	earliestFirst = bson.D{{Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}}
)

// withoutTerms is the projection of the reads that return posts: a post's terms, as many as its
// distinct words, are read by the server's search alone. findOneWithoutTerms is its options of
// a FindOne, made once (the driver reads them into options of its own on each call).
var (
	withoutTerms        = bson.D{{Key: "terms", Value: 0}}
	findOneWithoutTerms = options.FindOne().SetProjection(withoutTerms)
)

// GetPost returns the post with the id, or store.ErrNotFound.
func (s *Store) GetPost(ctx context.Context, id string) (store.Post, error) {
	oid, ok := objectID(id)
	if !ok {
		return store.Post{}, store.ErrNotFound
	}
	c, err := s.collection(ctx)
	if err != nil {
		return store.Post{}, s.classify(err)
	}
	seen := s.seenBefore(ctx)
	var p post
	if err := c.FindOne(ctx, idFilter{oid, absent}, findOneWithoutTerms).Decode(&p); err != nil {
		if errors.Is(err, driver.ErrNoDocuments) {
			seen() // the read shows the post absent
		}
		return store.Post{}, s.classify(err)
	}
	seen()
	return p.toStore(), nil
}

// seenBefore reads, for a caller that asked for the position of its read (store.Seen), the last
// position the log gave, before the read, and returns what notes it once the read has
// succeeded. Each position is given after the write of its post's document (events.go), so a
// read that starts later reflects every event up to it; it may reflect later ones too, which come
// again to a subscription from there, each at a version the read gave or below. A counter that
// cannot be read fails the position (Seen.Lose), not the read.
func (s *Store) seenBefore(ctx context.Context) func() {
	seen := store.SeenIn(ctx)
	if seen == nil {
		return func() {}
	}
	position, err := s.LastPosition(ctx)
	if err != nil {
		seen.Lose()
		return func() {}
	}
	return func() { seen.Note(position) }
}

// ListPosts returns the posts that f selects, in its order. A search (f.Search) answers
// store.ErrIndexing until every post has its terms (search.go).
func (s *Store) ListPosts(ctx context.Context, f store.Filter) ([]store.Post, error) {
	c, err := s.collection(ctx)
	if err != nil {
		return nil, s.classify(err)
	}
	query := bson.D{live}
	if f.UserID != "" {
		query = append(query, bson.E{Key: "userId", Value: f.UserID})
	}
	if !f.Search.Empty() {
		if !s.searchable.Load() {
			return nil, errIndexing
		}
		query = append(query, searchTerms(f.Search))
	}
	if created := createdRange(f.Since, f.Until); created != nil {
		query = append(query, bson.E{Key: "createdAt", Value: created})
	}
	order := newestFirst
	if f.Oldest {
		order = earliestFirst
	}
	if f.After != nil {
		query = append(query, keysetAfter(*f.After, f.Oldest))
	}
	seen := s.seenBefore(ctx)
	cursor, err := c.Find(ctx, query, options.Find().SetSort(order).SetLimit(int64(f.Limit)).SetProjection(withoutTerms))
	if err != nil {
		return nil, s.classify(err)
	}
	docs := make([]post, 0, f.Limit)
	if err := cursor.All(ctx, &docs); err != nil {
		return nil, s.classify(err)
	}
	seen()
	posts := make([]store.Post, len(docs))
	for i, d := range docs {
		posts[i] = d.toStore()
	}
	return posts, nil
}

// keysetAfter selects the posts that come after k in the order of lists (keyset paging):
// strictly older, or as old with a smaller _id; with oldest, strictly newer, or as old with a
// larger _id. An id that is not an ObjectID still has its place: above every ObjectID, as the
// largest one is.
func keysetAfter(k store.Key, oldest bool) bson.E {
	after, ok := objectID(k.ID)
	if !ok {
		after = bson.ObjectID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	beyond := "$lt"
	if oldest {
		beyond = "$gt"
	}
	return bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: "createdAt", Value: bson.D{{Key: beyond, Value: k.CreatedAt}}}},
		bson.D{{Key: "createdAt", Value: k.CreatedAt}, {Key: "_id", Value: bson.D{{Key: beyond, Value: after}}}},
	}}
}

// createdRange is the condition on createdAt of since and until (nil for neither). A bound is
// rounded up to the millisecond, as createdAt is stored: a post at 10 ms is not before 10.5 ms,
// which a bound sent as is, cut to 10 ms by BSON, would let in.
func createdRange(since, until time.Time) bson.D {
	var r bson.D
	if !since.IsZero() {
		r = append(r, bson.E{Key: "$gte", Value: ceilMillisecond(since)})
	}
	if !until.IsZero() {
		r = append(r, bson.E{Key: "$lt", Value: ceilMillisecond(until)})
	}
	return r
}

// ceilMillisecond is t rounded up to the millisecond.
func ceilMillisecond(t time.Time) time.Time {
	if c := t.Truncate(time.Millisecond); !c.Equal(t) {
		return c.Add(time.Millisecond)
	}
	return t
}

// InsertPost stores a new post with its pending event, then logs it (events.go).
func (s *Store) InsertPost(ctx context.Context, p store.Post) (store.Event, error) {
	oid, ok := objectID(p.ID)
	if !ok {
		return store.Event{}, &invalidIDError{p.ID}
	}
	c, err := s.collection(ctx)
	if err != nil {
		return store.Event{}, s.classify(err)
	}
	doc := document(oid, p)
	doc.Pending = s.pending(store.EventCreated)
	if _, err := c.InsertOne(ctx, doc); err != nil {
		if driver.IsDuplicateKeyError(err) {
			// Maybe this post, inserted by an earlier attempt under the same idempotency key
			// that stopped before its event: logged now, so its retry need not wait for it.
			_ = s.logPending(ctx, c, oid)
			if s.deletedPost(ctx, c, oid) { // and deleted since (deleted.go)
				return store.Event{}, store.ErrDeleted
			}
		}
		return store.Event{}, s.classify(err)
	}
	e, err := s.logged(ctx, c, doc, false)
	return e, s.classify(err)
}

// document is p as a document of the posts collection, with the id oid.
func document(oid bson.ObjectID, p store.Post) post {
	return post{ID: oid, UserID: p.UserID, Title: p.Title, Body: p.Body, CreatedAt: p.CreatedAt.UTC().Truncate(time.Millisecond),
		UpdatedAt: p.UpdatedAt.UTC().Truncate(time.Millisecond), Version: max(p.Version, 1), Terms: termsOf(p.Title, p.Body)}
}

// invalidIDError is an insert of an id that store.NewID did not make.
type invalidIDError struct{ id string }

func (e *invalidIDError) Error() string { return "not a post id: " + e.id }

// helpAfter is how long a write waits for the writer before it, whose event is pending, to log
// it, from when the write first saw it pending: past it, that writer is taken to have stopped,
// and the write logs the event itself.
var helpAfter = time.Second

// UpdatePost applies u to the post with the id if it belongs to owner and is at version (any,
// for store.AnyVersion), in one atomic call that also sets its terms (search.go) and records its
// pending event, then logs it. The terms of a change of the title alone, or of the body alone,
// are those of the other as stored too: write reads the post first, and conditions its call on
// the version it read.
func (s *Store) UpdatePost(ctx context.Context, id, owner string, version int64, u store.Update) (store.Event, error) {
	oid, ok := objectID(id)
	if !ok {
		return store.Event{}, store.ErrNotFound
	}
	set := bson.D{{Key: "updatedAt", Value: u.UpdatedAt}}
	if u.Title != nil {
		set = append(set, bson.E{Key: "title", Value: *u.Title})
	}
	if u.Body != nil {
		set = append(set, bson.E{Key: "body", Value: *u.Body})
	}
	var also bson.D
	if u.UnsetBody {
		also = bson.D{{Key: "$unset", Value: bson.D{{Key: "body", Value: ""}}}}
	}
	title, body := u.Title != nil, u.Body != nil || u.UnsetBody
	var terms func(stored post) []string
	switch {
	case title && body:
		set = append(set, bson.E{Key: "terms", Value: termsOf(*u.Title, u.Body)})
	case title || body:
		terms = func(p post) []string {
			if title {
				p.Title = *u.Title
			}
			if body {
				p.Body = u.Body
			}
			return termsOf(p.Title, p.Body)
		}
	}
	return s.write(ctx, oid, owner, version, store.EventUpdated, set, append(also, nextVersion), terms)
}

// DeletePost deletes the post with the id if it belongs to owner and is at version (any, for
// store.AnyVersion): one atomic call makes it a tombstone with its pending event, which is
// deleted once the event is logged.
func (s *Store) DeletePost(ctx context.Context, id, owner string, version int64) (store.Event, error) {
	oid, ok := objectID(id)
	if !ok {
		return store.Event{}, store.ErrNotFound
	}
	return s.write(ctx, oid, owner, version, store.EventDeleted, bson.D{{Key: "gone", Value: true}}, nil, nil)
}

// write applies the update of $set set and of the operators of also, with the pending event of
// kind, to the post oid if it belongs to owner, is at version and has no pending event, then logs
// the event. A post whose last write's event is still pending takes no write: the write reads
// the post until that writer has logged it (backing off; reads, not writes, so that the waiting
// writers do not hold up the one that logs), logs it itself once it has seen it pending for
// helpAfter, timed from its own first sight (waits.go; that writer stopped), then tries again,
// with its own event stamped anew.
//
// With terms, the update also sets the terms that terms gives of the post as stored: each try
// reads the post first (writable), and its call asks for the version read as well as for
// version, so that it writes the terms of the post it changes, in the same one call; a post
// that another write moved meanwhile does not match, and is read again.
func (s *Store) write(ctx context.Context, oid bson.ObjectID, owner string, version int64, kind string, set, also bson.D,
	terms func(stored post) []string) (store.Event, error) {
	c, err := s.collection(ctx)
	if err != nil {
		return store.Event{}, s.classify(err)
	}
	for {
		filter, fields := writeFilter(oid, owner, version), set[:len(set):len(set)]
		if terms != nil {
			stored, ok, err := s.writable(ctx, c, oid, owner, version)
			if err != nil {
				return store.Event{}, s.classify(err)
			}
			filter = nil // not writable as read: untilFree says why, or waits
			if ok {
				filter, fields = readFilter(oid, owner, stored.Version), append(fields, bson.E{Key: "terms", Value: terms(stored)})
			}
		}
		if filter != nil {
			update := append(bson.D{{Key: "$set", Value: append(fields, bson.E{Key: "ev", Value: s.pending(kind)})}}, also...)
			var p post
			err := c.FindOneAndUpdate(ctx, filter, update, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&p)
			if err == nil {
				e, err := s.logged(ctx, c, p, false)
				return e, s.classify(err)
			}
			if !errors.Is(err, driver.ErrNoDocuments) {
				return store.Event{}, s.classify(err)
			}
		}
		if err := s.untilFree(ctx, c, oid, owner, version); err != nil {
			return store.Event{}, err
		}
	}
}

// writable reads the post oid, and says whether it may take a write of owner at version now:
// it is owner's, at version (any, for store.AnyVersion), not deleted, and has no pending event.
// No such post is driver.ErrNoDocuments.
func (s *Store) writable(ctx context.Context, c *driver.Collection, oid bson.ObjectID, owner string, version int64) (post, bool, error) {
	var p post
	if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: oid}}, findOneWithoutTerms).Decode(&p); err != nil {
		return p, false, err
	}
	return p, p.UserID == owner && !p.Gone && p.Pending == nil && (version == store.AnyVersion || max(p.Version, 1) == version), nil
}

// readFilter is writeFilter at the version a write read (writable), which is absent on a post of
// an earlier release that no first use has given one yet (versionMissing).
func readFilter(oid bson.ObjectID, owner string, read int64) any {
	if read == 0 {
		return bson.D{{Key: "_id", Value: oid}, {Key: "userId", Value: owner}, {Key: "version", Value: absent}, {Key: "ev", Value: absent}}
	}
	return versionedFilter{oid, owner, read, absent}
}

// untilFree finds why a write of the post oid did not match: store.ErrNotFound for no such post,
// another owner or another version; otherwise it returns once the post has no pending event.
func (s *Store) untilFree(ctx context.Context, c *driver.Collection, oid bson.ObjectID, owner string, version int64) error {
	wait := time.Millisecond
	var (
		seen     time.Time // when this call first saw the pending event of the change seenKind
		seenKind string
	)
	for {
		var now post
		if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: oid}}).Decode(&now); err != nil {
			return s.classify(err)
		}
		if now.Pending != nil && (seen.IsZero() || changeKey(now.Pending.Kind, now.toStore()) != seenKind) {
			seen, seenKind = time.Now(), changeKey(now.Pending.Kind, now.toStore())
		}
		stopped := now.Pending != nil && time.Since(seen) >= s.helpAfter()
		switch {
		case stopped:
			if _, err := s.logged(ctx, c, now, true); err != nil {
				return s.classify(err)
			}
			if now.Gone {
				return store.ErrNotFound
			}
			return nil
		case now.UserID != owner, version != store.AnyVersion && now.Version != version:
			return store.ErrNotFound
		case now.Pending == nil: // logged since the write was tried
			if now.Gone {
				return store.ErrNotFound
			}
			return nil
		}
		// A tombstone whose event is pending waits as a post does: its deletion is logged
		// by its writer, or by this write once seen pending for helpAfter, before the answer.
		select {
		case <-ctx.Done():
			return s.classify(ctx.Err())
		case <-time.After(wait/2 + rand.N(wait)):
		}
		wait = min(2*wait, 4*time.Millisecond)
	}
}

// logPending logs the pending event of the post oid, if it has one, and clears it.
func (s *Store) logPending(ctx context.Context, c *driver.Collection, oid bson.ObjectID) error {
	var p post
	err := c.FindOne(ctx, bson.D{{Key: "_id", Value: oid}, {Key: "ev", Value: bson.D{{Key: "$exists", Value: true}}}}).Decode(&p)
	if errors.Is(err, driver.ErrNoDocuments) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = s.logged(ctx, c, p, true)
	return err
}

// logged logs the pending event of p, the post as its write left it, then clears it: unsets ev,
// or ends the tombstone (clearTombstone). found says that p was found pending, not written just
// now. A clear that fails leaves the event pending, logged: the next write or RecoverEvents finds
// it logged, and clears it. An insert whose event's key another write's event holds
// (errEventTaken) is undone.
func (s *Store) logged(ctx context.Context, c *driver.Collection, p post, found bool) (store.Event, error) {
	e, err := s.logEvent(ctx, p, found)
	if errors.Is(err, errEventTaken) && p.Pending.Kind == store.EventCreated {
		_, _ = c.DeleteOne(ctx, bson.D{{Key: "_id", Value: p.ID}, {Key: "ev.kind", Value: store.EventCreated}, {Key: "ev.at", Value: p.Pending.At}})
	}
	if err != nil {
		return store.Event{}, err
	}
	if p.Gone {
		s.clearTombstone(ctx, c, p)
	} else {
		// Only this version's: once cleared, a later write may have set its own.
		_, _ = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: p.ID}, {Key: "version", Value: p.Version}, {Key: "ev.kind", Value: p.Pending.Kind}},
			bson.D{{Key: "$unset", Value: bson.D{{Key: "ev", Value: ""}}}})
	}
	return e, nil
}
