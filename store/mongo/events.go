package mongo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/postsedge/caddy-posts/store"
)

// The event log on MongoDB, on every deployment, a standalone server included: no transaction
// across documents is needed.
//
// A write and its event cannot be separated, because the write itself records its event in the
// post's document (the field ev: the kind and time of a change not logged yet) in the one atomic
// update or insert that makes it, and a post with a pending event takes no other write (every
// write's filter asks for no ev) until that event is logged: so while it is pending, the document
// is the event's post. A deletion is such an update too (gone: true, a tombstone that reads skip),
// and the document goes once its event is logged. The writer then logs the event (a position
// from the counter, then the event inserted at it), clears ev (or deletes the tombstone), and only
// then acknowledges the write. A crash, or a store that fails, at any step after the write leaves
// the pending event in the document, from which the next write of that post (which must first
// log it) or RecoverEvents (every few seconds, on every instance) logs it: so every write that
// reached the database reaches the log, once (the unique key of an event, its post, version and
// kind, refuses a second copy), whether or not its writer answered. A write that did not reach
// the database logs nothing. A post's events are logged in the order of its versions, since each
// waits for the one before.
//
// Positions come from one counter document, so they are given in one order; their events are
// inserted just after, and may become visible out of that order. A reader stops at a position
// still empty (a hole) while later ones are filled, until the hole is filled, or until the event
// after it is older than holeWait: then it fills the hole with a marker that every reader skips.
// The insert that comes later finds its position taken and logs at a new one. A hole is decided
// once, in the database, so every reader reads the same events in the same order.

// The collections of the event log.
const (
	EventsCollection   = "events"
	CountersCollection = "counters"
)

// holeWait is how long a reader waits for the event of a position given out before the events it
// can read already: longer than a write takes between its position and its insert (two commands).
var holeWait = 2 * time.Second

// event is a store.Event, or the marker of a hole, as a document of the events collection.
type event struct {
	Position int64     `bson:"_id"`
	At       time.Time `bson:"at"`
	// Key is unique: the post, version and kind of the change (see changeKey), or "hole/"
	// and the position.
	Key    string     `bson:"key"`
	Origin string     `bson:"origin,omitempty"`
	Kind   string     `bson:"kind,omitempty"`
	Post   *eventPost `bson:"post,omitempty"`
}

// eventPost is the post of an event; the times are zero for a deleted post.
type eventPost struct {
	ID        string    `bson:"id"`
	UserID    string    `bson:"userId"`
	Title     string    `bson:"title,omitempty"`
	Body      *string   `bson:"body,omitempty"`
	CreatedAt time.Time `bson:"createdAt,omitempty"`
	UpdatedAt time.Time `bson:"updatedAt,omitempty"`
	Version   int64     `bson:"version"`
}

func (e event) toStore() store.Event {
	p := e.Post
	post := store.Post{ID: p.ID, UserID: p.UserID, Title: p.Title, Body: p.Body, Version: p.Version}
	if !p.CreatedAt.IsZero() {
		post.CreatedAt, post.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	}
	return store.Event{Position: e.Position, At: e.At.UTC(), Origin: e.Origin, Kind: e.Kind, Post: post}
}

// changeKey names the change of kind to p: a post has one event per version, and one deletion.
func changeKey(kind string, p store.Post) string {
	return p.ID + "/" + strconv.FormatInt(p.Version, 10) + "/" + kind
}

// SetEventTTL makes the index on at of the events collection, when this store first ensures it,
// a TTL index that lets MongoDB delete an event ttl after its at. Servers without TTL indexes
// (FerretDB v1) get an ordinary index; ExpireEvents deletes there, which the follower of the log
// calls every minute on any server. An index made earlier with another TTL is kept as it is.
// Zero: no TTL.
func (s *Store) SetEventTTL(ttl time.Duration) { s.eventTTL.Store(int64(ttl)) }

// events returns the events collection, ensuring its indexes on first use.
func (s *Store) events(ctx context.Context) (*driver.Collection, error) {
	return s.ensured(ctx, &s.eventRecords, EventsCollection, func(ctx context.Context, coll *driver.Collection) error {
		index := driver.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}}
		if ttl := time.Duration(s.eventTTL.Load()); ttl > 0 {
			index.Options = options.Index().SetExpireAfterSeconds(int32(max(ttl/time.Second, 1)))
		}
		err := createExpiryIndex(ctx, coll, index)
		if cmdErr, ok := errors.AsType[driver.CommandError](err); ok && cmdErr.Code == errIndexOptionsConflict {
			err = nil // an index of another TTL: ExpireEvents deletes what the TTL should
		}
		if err == nil {
			_, err = coll.Indexes().CreateOne(ctx, driver.IndexModel{Keys: bson.D{{Key: "key", Value: 1}}, Options: options.Index().SetUnique(true)})
		}
		if err != nil {
			return fmt.Errorf("ensuring the indexes of %s: %w", EventsCollection, err)
		}
		return nil
	})
}

// errIndexOptionsConflict is the code of createIndexes for an index that exists with other options.
const errIndexOptionsConflict = 85

// Origin names this store in the events it logs: random, made when it was opened.
func (s *Store) Origin() string { return s.origin }

// counter is the document of CountersCollection that gives the log's positions.
type counter struct {
	Last int64 `bson:"last"`
}

// eventsCounter selects the counter of the event log.
var eventsCounter = bson.D{{Key: "_id", Value: EventsCollection}}

// nextPosition takes the next position of the log.
func (s *Store) nextPosition(ctx context.Context) (int64, error) {
	var c counter
	err := s.client.Database(s.database).Collection(CountersCollection).FindOneAndUpdate(ctx, eventsCounter,
		bson.D{{Key: "$inc", Value: bson.D{{Key: "last", Value: int64(1)}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&c)
	return c.Last, err
}

// LastPosition returns the last position the counter gave, 0 before the first.
func (s *Store) LastPosition(ctx context.Context) (int64, error) {
	var c counter
	err := s.client.Database(s.database).Collection(CountersCollection).FindOne(ctx, eventsCounter).Decode(&c)
	if errors.Is(err, driver.ErrNoDocuments) {
		return 0, nil
	}
	return c.Last, s.classify(err)
}

// logEvent logs the pending event of p, a post document as its write left it, and returns it.
// The event may be logged already (by an earlier try, or by another writer or instance that
// found it pending): then it returns that one, and logs nothing. Its writer, which has just
// made the change, logs at once; anyone else (found) looks for the event first.
func (s *Store) logEvent(ctx context.Context, p post, found bool) (store.Event, error) {
	c, err := s.events(ctx)
	if err != nil {
		return store.Event{}, err
	}
	e := store.Event{Origin: s.origin, Kind: p.Pending.Kind, Post: p.toStore()}
	if e.Kind == store.EventDeleted {
		e.Post = store.Post{ID: e.Post.ID, UserID: e.Post.UserID, Version: e.Post.Version}
	}
	key := changeKey(e.Kind, e.Post)
	if found {
		var logged event
		switch err := c.FindOne(ctx, bson.D{{Key: "key", Value: key}}).Decode(&logged); {
		case err == nil:
			return logged.toStore(), nil
		case !errors.Is(err, driver.ErrNoDocuments):
			return store.Event{}, err
		}
	}
	// A position taken by a hole's marker (this writer was slower than holeWait) is given up
	// for the next one; a few times at most.
	for range 3 {
		if e.Position, err = s.nextPosition(ctx); err != nil {
			return store.Event{}, err
		}
		e.At = time.Now().UTC().Truncate(time.Millisecond)
		_, err = c.InsertOne(ctx, event{Position: e.Position, At: e.At, Key: key, Origin: e.Origin, Kind: e.Kind, Post: &eventPost{
			ID: e.Post.ID, UserID: e.Post.UserID, Title: e.Post.Title, Body: e.Post.Body, CreatedAt: e.Post.CreatedAt,
			UpdatedAt: e.Post.UpdatedAt, Version: e.Post.Version,
		}})
		if !driver.IsDuplicateKeyError(err) {
			return e, err
		}
		var logged event
		switch err := c.FindOne(ctx, bson.D{{Key: "key", Value: key}}).Decode(&logged); {
		case err == nil:
			// Logged already: the position taken for it would hold readers up until holeWait.
			s.fillHoles(ctx, c, e.Position, e.Position)
			return logged.toStore(), nil
		case !errors.Is(err, driver.ErrNoDocuments):
			return store.Event{}, err
		}
	}
	return store.Event{}, fmt.Errorf("%w: the position of an event was taken three times in a row", store.ErrUnavailable)
}

// fillHoles puts a marker at each position from first to last that holds nothing, and says
// whether all of them were empty: a position taken meanwhile holds an event that came late.
func (s *Store) fillHoles(ctx context.Context, c *driver.Collection, first, last int64) bool {
	at := time.Now().UTC().Truncate(time.Millisecond)
	markers := make([]any, 0, last-first+1)
	for p := first; p <= last; p++ {
		markers = append(markers, event{Position: p, At: at, Key: "hole/" + strconv.FormatInt(p, 10)})
	}
	_, err := c.InsertMany(ctx, markers, options.InsertMany().SetOrdered(false))
	return err == nil
}

// maxHoles bounds the markers one read puts: a reader far behind (after an outage longer than
// the events' TTL) fills the expired positions a page at a time.
const maxHoles = 1000

// oldestFirst is the order of the log.
var oldestFirst = bson.D{{Key: "_id", Value: 1}}

// ReadEvents returns at most limit events after position after, in order: one query on the _id
// index (FerretDB v1 scans the collection instead: it pushes down no range), and for a hole
// older than holeWait, one insert of its markers.
func (s *Store) ReadEvents(ctx context.Context, after int64, limit int) ([]store.Event, int64, error) {
	c, err := s.events(ctx)
	if err != nil {
		return nil, after, s.classify(err)
	}
	// The whole page in the first batch: one command a read.
	limit = max(limit, 1)
	cur, err := c.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}}},
		options.Find().SetSort(oldestFirst).SetLimit(int64(limit)).SetBatchSize(int32(min(limit, math.MaxInt32))))
	if err != nil {
		return nil, after, s.classify(err)
	}
	var docs []event
	if err := cur.All(ctx, &docs); err != nil {
		return nil, after, s.classify(err)
	}
	var out []store.Event
	upto := after
	for _, d := range docs {
		if d.Position > upto+1 { // upto+1 up to here are holes
			last := min(d.Position-1, upto+maxHoles)
			if time.Since(d.At) < holeWait || !s.fillHoles(ctx, c, upto+1, last) {
				break
			}
			if upto = last; last < d.Position-1 {
				break
			}
		}
		upto = d.Position
		if d.Post != nil {
			out = append(out, d.toStore())
		}
	}
	return out, upto, nil
}

// ExpireEvents deletes the events and markers logged before before.
func (s *Store) ExpireEvents(ctx context.Context, before time.Time) (int, error) {
	c, err := s.events(ctx)
	if err != nil {
		return 0, s.classify(err)
	}
	res, err := c.DeleteMany(ctx, bson.D{{Key: "at", Value: bson.D{{Key: "$lt", Value: before}}}})
	if err != nil {
		return 0, s.classify(err)
	}
	return int(res.DeletedCount), nil
}

// recoverBatch bounds the posts one RecoverEvents call logs the pending events of.
const recoverBatch = 100

// RecoverEvents logs the pending events of the posts written before before, found on the
// sparse index on ev.at (FerretDB v1 scans the posts instead), and clears them.
func (s *Store) RecoverEvents(ctx context.Context, before time.Time) (int, error) {
	c, err := s.collection(ctx)
	if err != nil {
		return 0, s.classify(err)
	}
	cur, err := c.Find(ctx, bson.D{{Key: "ev.at", Value: bson.D{{Key: "$lt", Value: before}}}}, options.Find().SetLimit(recoverBatch))
	if err != nil {
		return 0, s.classify(err)
	}
	var pending []post
	if err := cur.All(ctx, &pending); err != nil {
		return 0, s.classify(err)
	}
	logged := 0
	var first error
	for _, p := range pending {
		if _, err := s.logged(ctx, c, p, true); err != nil {
			first = cmp.Or(first, err)
			continue
		}
		logged++
	}
	return logged, s.classify(first)
}

var _ store.EventLog = (*Store)(nil)
