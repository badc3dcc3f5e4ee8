package mongo

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/postsedge/caddy-posts/spans"
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
// log it) or RecoverEvents (on every instance, events.Follower) logs it: so every write that
// reached the database reaches the log, once (the unique key of an event, its post, version and
// kind, refuses a second copy; an event of another write at that key is an error, never handed
// back as this write's: sameWrite, deleted.go), whether or not its writer answered. A write that did not reach
// the database logs nothing. A post's events are logged in the order of its versions, since each
// waits for the one before.
//
// Positions come from one counter document, so they are given in one order; their events are
// inserted just after, and may become visible out of that order. A reader stops at a position
// still empty (a hole) while later ones are filled, until the hole is filled, or until it has
// seen it empty for holeWait, timed on its own clock from its first sight (waits.go: never from
// a time another instance wrote): then it fills the hole with a marker that every reader skips.
// The insert that comes later finds its position taken and logs at a new one. A hole is decided
// once, in the database, so every reader reads the same events in the same order.
//
// Expiry deletes the oldest positions, every one up to a cut and in their order, so that a
// position still kept has every later one kept too (store.EventLog.Kept). Nothing may land
// below the cut afterwards, in front of positions already gone. So the counter records the cut
// (expired) before the events go, and a reader that meets a gap at or below it skips it, where
// it would fill a hole: expired positions are decided. And expiry cuts past a gap only once the
// expiring instance has seen it empty for settleWait, a minute or twice the request's deadline
// (timeout, 5 s by default), whichever is longer (waits.go): the gap's writer took its position
// before that first sight, and a write runs under that deadline, so it will never insert there.
// A gap seen for less is a hole still to be decided, and holds the cut back until a reader
// decides it (holeWait, 2 s by default: mongodb_hole_wait). However small the
// cap, then, expiry takes no position that a writer or a reader may still fill.

// The collections of the event log.
const (
	EventsCollection   = "events"
	CountersCollection = "counters"
)

// DefaultHoleWait is the default of Waits.Hole (caddymodule's mongodb_hole_wait): over the
// slowest of FerretDB's round trips on a loaded host (16 writers of two stores beside a full
// test run on 2 cores: 133 ms at p50, 1.44 s at p99, 1.7 s at p99.9 and 1.75 s at most of 2776).
// On a database slower than that, the wait grows with the round trips a reader sees
// (latencyFactor); a writer slower still finds its position a hole and logs at a new one.
const DefaultHoleWait = 2 * time.Second

// holeWait is how long a reader waits for the event of a position given out before the events it
// can read already, from its first sight of the position empty, unless the store's Waits.Hole
// says otherwise: longer than a write takes between its position and its insert (two commands).
var holeWait = DefaultHoleWait

// event is a store.Event, or the marker of a hole, as a document of the events collection.
type event struct {
	Position int64     `bson:"_id"`
	At       time.Time `bson:"at"`
	// Key is unique: the post, version and kind of the change (see changeKey), or "hole/"
	// and the position.
	Key string `bson:"key"`
	// Wrote is when the write made the change (its pending event's time): with the post, it
	// tells the write an event is of from another write of the same key (see sameWrite).
	Wrote  time.Time  `bson:"wrote,omitempty"`
	Origin string     `bson:"origin,omitempty"`
	Kind   string     `bson:"kind,omitempty"`
	Post   *eventPost `bson:"post,omitempty"`
	// Trace is store.Event.Trace: the span of the writer that logged it, when traced. An event
	// that another writer or instance logs for it (RecoverEvents) has none.
	Trace string `bson:"trace,omitempty"`
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
	return store.Event{Position: e.Position, At: e.At.UTC(), Origin: e.Origin, Kind: e.Kind, Post: post, Trace: e.Trace}
}

// changeKey names the change of kind to p: a post has one event per version, and one deletion.
func changeKey(kind string, p store.Post) string {
	return p.ID + "/" + strconv.FormatInt(p.Version, 10) + "/" + kind
}

// eventIndexes are the indexes of the events collection: at, which the cut of expiry by time
// is found through, and the unique key of a change.
var eventIndexes = []driver.IndexModel{
	{Keys: bson.D{{Key: "at", Value: 1}}},
	{Keys: bson.D{{Key: "key", Value: 1}}, Options: options.Index().SetUnique(true)},
}

// events returns the events collection, ensuring its indexes on first use.
func (s *Store) events(ctx context.Context) (*driver.Collection, error) {
	return s.ensured(ctx, &s.eventRecords, EventsCollection, func(ctx context.Context, coll *driver.Collection) error {
		err := dropTTLIndex(ctx, coll)
		// One index per command, as for the posts (mongo.go).
		for _, index := range eventIndexes {
			if err == nil {
				err = createIndex(ctx, coll, index)
			}
		}
		if err != nil {
			return fmt.Errorf("ensuring the indexes of %s: %w", EventsCollection, err)
		}
		return nil
	})
}

// dropTTLIndex drops the TTL index on at that earlier releases made: MongoDB's TTL monitor
// deletes by time, one document at a time, and a position's time does not follow its order
// exactly (a hole's marker is younger than the events after it), so it would leave a position
// kept after one deleted. An instance of an earlier release makes it again on its first use
// only: once they are all upgraded, the next first use drops it for good.
func dropTTLIndex(ctx context.Context, coll *driver.Collection) error {
	specs, err := coll.Indexes().ListSpecifications(ctx)
	if err != nil {
		return err
	}
	for _, spec := range specs {
		if spec.ExpireAfterSeconds == nil || spec.KeysDocument.Lookup("at").IsZero() {
			continue
		}
		// Another instance may drop it first.
		if err := coll.Indexes().DropOne(ctx, spec.Name); err != nil && !hasCode(err, errNamespaceNotFound, errIndexNotFound) {
			return err
		}
	}
	return nil
}

// The codes of command errors for a collection, or an index, that does not exist.
const (
	errNamespaceNotFound = 26
	errIndexNotFound     = 27
)

// hasCode says whether err is a server's error of one of codes.
func hasCode(err error, codes ...int) bool {
	serverErr, ok := errors.AsType[driver.ServerError](err)
	return ok && slices.ContainsFunc(codes, serverErr.HasErrorCode)
}

// Origin names this store in the events it logs: random, made when it was opened.
func (s *Store) Origin() string { return s.origin }

// counter is the document of CountersCollection that gives the log's positions. It also holds
// the log's key (see Key), and the cut of its expiry (see ExpireEvents): every position up to
// Expired is gone, or going.
type counter struct {
	Last    int64  `bson:"last"`
	Expired int64  `bson:"expired"`
	Key     []byte `bson:"key,omitempty"`
}

// eventsCounter selects the counter of the event log.
var eventsCounter = bson.D{{Key: "_id", Value: EventsCollection}}

// counters returns the collection of the log's counter.
func (s *Store) counters() *driver.Collection {
	return s.client.Database(s.database).Collection(CountersCollection)
}

// counter returns the log's counter, the zero counter before the log's first use, and notes
// the cut of expiry it holds.
func (s *Store) counter(ctx context.Context) (counter, error) {
	var c counter
	err := s.counters().FindOne(ctx, eventsCounter).Decode(&c)
	if errors.Is(err, driver.ErrNoDocuments) {
		return counter{}, nil
	}
	if err == nil {
		s.expiredUpTo(c.Expired)
	}
	return c, err
}

// expiredUpTo notes that every position up to position has expired.
func (s *Store) expiredUpTo(position int64) {
	for {
		known := s.expired.Load()
		if position <= known || s.expired.CompareAndSwap(known, position) {
			return
		}
	}
}

// nextPosition takes the next position of the log. The first writers of a new log race to
// insert the counter: the upserts that lose are refused as a duplicate key, and tried again,
// when the counter is there to update.
func (s *Store) nextPosition(ctx context.Context) (int64, error) {
	var c counter
	var err error
	for range 2 {
		err = s.counters().FindOneAndUpdate(ctx, eventsCounter,
			bson.D{{Key: "$inc", Value: bson.D{{Key: "last", Value: int64(1)}}}},
			options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&c)
		if !driver.IsDuplicateKeyError(err) {
			break
		}
	}
	return c.Last, err
}

// LastPosition returns the last position the counter gave, 0 before the first.
func (s *Store) LastPosition(ctx context.Context) (int64, error) {
	c, err := s.counter(ctx)
	return c.Last, s.classify(err)
}

// logEvent logs the pending event of p, a post document as its write left it, and returns it.
// The event may be logged already (by an earlier try, or by another writer or instance that
// found it pending): then it returns that one, and logs nothing; an event of another write at
// its key (sameWrite) is errEventTaken. Its writer, which has just
// made the change, logs at once; anyone else (found) looks for the event first.
func (s *Store) logEvent(ctx context.Context, p post, found bool) (store.Event, error) {
	c, err := s.events(ctx)
	if err != nil {
		return store.Event{}, err
	}
	e := store.Event{Origin: s.origin, Kind: p.Pending.Kind, Post: p.toStore()}
	if !found {
		e.Trace = spans.Traceparent(ctx) // the write's own span
	}
	if e.Kind == store.EventDeleted {
		e.Post = store.Post{ID: e.Post.ID, UserID: e.Post.UserID, Version: e.Post.Version}
	}
	key := changeKey(e.Kind, e.Post)
	if found {
		var logged event
		switch err := c.FindOne(ctx, bson.D{{Key: "key", Value: key}}).Decode(&logged); {
		case err == nil && !sameWrite(logged, p, e):
			return store.Event{}, fmt.Errorf("%w: %s at position %d", errEventTaken, key, logged.Position)
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
		e.At = s.now().UTC().Truncate(time.Millisecond)
		_, err = c.InsertOne(ctx, event{Position: e.Position, At: e.At, Key: key, Wrote: p.Pending.At, Origin: e.Origin, Kind: e.Kind, Post: &eventPost{
			ID: e.Post.ID, UserID: e.Post.UserID, Title: e.Post.Title, Body: e.Post.Body, CreatedAt: e.Post.CreatedAt,
			UpdatedAt: e.Post.UpdatedAt, Version: e.Post.Version,
		}, Trace: e.Trace})
		if !driver.IsDuplicateKeyError(err) {
			return e, err
		}
		var logged event
		switch err := c.FindOne(ctx, bson.D{{Key: "key", Value: key}}).Decode(&logged); {
		case err == nil:
			// Logged already: the position taken for it would hold readers up until holeWait.
			s.fillHoles(ctx, c, e.Position, e.Position)
			if !sameWrite(logged, p, e) {
				return store.Event{}, fmt.Errorf("%w: %s at position %d", errEventTaken, key, logged.Position)
			}
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
	at := s.now().UTC().Truncate(time.Millisecond)
	markers := make([]any, 0, last-first+1)
	for p := first; p <= last; p++ {
		markers = append(markers, event{Position: p, At: at, Key: "hole/" + strconv.FormatInt(p, 10)})
	}
	_, err := c.InsertMany(ctx, markers, options.InsertMany().SetOrdered(false))
	return err == nil
}

// maxHoles bounds the markers one read puts.
const maxHoles = 1000

// oldestFirst is the order of the log.
var oldestFirst = bson.D{{Key: "_id", Value: 1}}

// ReadEvents returns at most limit events after position after, in order: one query on the _id
// index (FerretDB v1 scans the collection instead: it pushes down no range), and for a gap seen
// for the first time or for holeWait, a read of the counter, to skip what expired, and for the
// latter one insert of the markers of the holes left.
func (s *Store) ReadEvents(ctx context.Context, after int64, limit int) ([]store.Event, int64, error) {
	c, err := s.events(ctx)
	if err != nil {
		return nil, after, s.classify(err)
	}
	// The whole page in the first batch, one larger than the page so that the server ends the
	// cursor with it: one command a read. (A batch of exactly the limit left FerretDB's cursor
	// open, and the driver's getMore then found it gone: CursorNotFound, on pages of one.)
	limit = max(limit, 1)
	cur, err := c.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}}},
		options.Find().SetSort(oldestFirst).SetLimit(int64(limit)).SetBatchSize(int32(min(limit+1, math.MaxInt32))))
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
		if expired := s.expired.Load(); d.Position > upto+1 && expired > upto { // expired, as far as known
			upto = min(expired, d.Position-1)
		}
		if d.Position > upto+1 { // upto+1 up to here expired, or are holes
			var decided bool
			if upto, decided, err = s.decideGap(ctx, c, upto, d.Position); err != nil {
				return nil, after, s.classify(err)
			}
			if !decided {
				break
			}
		}
		upto = d.Position
		if d.Post != nil {
			out = append(out, d.toStore())
		}
	}
	if upto > after {
		s.gaps.forget(upto)
	}
	return out, upto, nil
}

// decideGap decides the positions after upto and before next that this store has seen empty
// for holeWait (sightings, from its first sight): it skips those that expired and fills the
// rest with markers, maxHoles at most. It returns the position decided up to, and whether that
// is next-1; or the error of a command that failed (the counter's read, the delete of markers
// below the cut), which fails the read: a gap it could not tell is not a gap undecided, and a
// reader that took it for one (events.Follower's start) would stop short.
func (s *Store) decideGap(ctx context.Context, c *driver.Collection, upto, next int64) (int64, bool, error) {
	// A gap seen for the first time may have expired: the counter tells at once.
	ready, fresh := s.gaps.seenFor(upto+1, min(next-1, upto+maxHoles), s.holeWait())
	if ready == upto && !fresh {
		return upto, false, nil
	}
	ctr, err := s.counter(ctx)
	if err != nil {
		return upto, false, err
	}
	if upto = max(upto, min(ctr.Expired, next-1)); upto >= ready {
		return upto, upto == next-1, nil
	}
	last := ready
	if !s.fillHoles(ctx, c, upto+1, last) {
		return upto, false, nil
	}
	// An expiry that moved its cut past these positions since the counter was read would leave
	// the markers below it: the counter, read again, tells, and they go. An expiry that moves
	// it later deletes them itself.
	if ctr, err = s.counter(ctx); err != nil {
		return upto, false, err
	}
	if ctr.Expired > upto {
		gone := bson.D{{Key: "$gt", Value: upto}, {Key: "$lte", Value: min(ctr.Expired, last)}}
		if _, err := c.DeleteMany(ctx, bson.D{{Key: "_id", Value: gone}}); err != nil {
			return upto, false, err
		}
	}
	return last, last == next-1, nil
}

// The batches and the pace of expiry (see the opening comment); variables for the tests.
var (
	expireBatch int64 = 1000
	settleWait        = time.Minute
)

// ExpireEvents deletes the events and markers up to a cut, oldest first: the newest logged
// before before, found at the end of the index on at, or the last position less keep,
// whichever is later. It stops short of a gap seen for less than settleWait. Each batch of
// expireBatch positions is a query and a delete of a range of _id (MongoDB deletes it in the
// order of the index), after the counter has the batch's end as its cut.
func (s *Store) ExpireEvents(ctx context.Context, before time.Time, keep int64) (int, error) {
	c, err := s.events(ctx)
	if err != nil {
		return 0, s.classify(err)
	}
	ctr, err := s.counter(ctx)
	if err != nil {
		return 0, s.classify(err)
	}
	var cut int64
	if keep > 0 {
		cut = ctr.Last - keep
	}
	var newest event
	switch err := c.FindOne(ctx, bson.D{{Key: "at", Value: bson.D{{Key: "$lt", Value: before}}}},
		options.FindOne().SetSort(bson.D{{Key: "at", Value: -1}}).SetProjection(bson.D{{Key: "_id", Value: 1}})).Decode(&newest); {
	case err == nil:
		cut = max(cut, newest.Position)
	case !errors.Is(err, driver.ErrNoDocuments):
		return 0, s.classify(err)
	}
	deleted := 0
	for from := ctr.Expired; from < cut; {
		end, err := s.settledUpTo(ctx, c, from, cut)
		if err != nil || end == from {
			return deleted, s.classify(err)
		}
		if _, err := s.counters().UpdateOne(ctx, eventsCounter, bson.D{{Key: "$max", Value: bson.D{{Key: "expired", Value: end}}}}); err != nil {
			return deleted, s.classify(err)
		}
		s.expiredUpTo(end)
		// Up to end, not from from: what a reader put below an earlier cut goes too.
		res, err := c.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$lte", Value: end}}}})
		if err != nil {
			return deleted, s.classify(err)
		}
		deleted += int(res.DeletedCount)
		s.gaps.forget(end)
		from = end
	}
	return deleted, nil
}

// settledUpTo returns the end of the batch of expiry after position from, up to cut: the last
// of at most expireBatch positions the log holds, short of a gap not settled. Positions after
// the last one held, up to cut, wait for the next expiry.
func (s *Store) settledUpTo(ctx context.Context, c *driver.Collection, from, cut int64) (int64, error) {
	cur, err := c.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: from}, {Key: "$lte", Value: cut}}}},
		options.Find().SetSort(oldestFirst).SetLimit(expireBatch).SetBatchSize(int32(expireBatch)).SetProjection(bson.D{{Key: "at", Value: 1}}))
	if err != nil {
		return from, err
	}
	var docs []event
	if err := cur.All(ctx, &docs); err != nil {
		return from, err
	}
	end := from
	for _, d := range docs {
		if d.Position > end+1 && !s.settled(end+1, d.Position-1) {
			break
		}
		end = d.Position
	}
	return end, nil
}

// settled says whether this store has seen every position from first to last empty for
// settleWait (sightings): their writers have given up.
func (s *Store) settled(first, last int64) bool {
	ready, _ := s.gaps.seenFor(first, min(last, first+maxHoles-1), s.settleWait())
	return ready == last
}

// Kept says whether the log holds position, an event or a hole's marker: one lookup of _id.
func (s *Store) Kept(ctx context.Context, position int64) (bool, error) {
	c, err := s.events(ctx)
	if err != nil {
		return false, s.classify(err)
	}
	err = c.FindOne(ctx, bson.D{{Key: "_id", Value: position}}, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	if errors.Is(err, driver.ErrNoDocuments) {
		return false, nil
	}
	return err == nil, s.classify(err)
}

// KeepsAfter says whether a reader that resumes after position misses nothing
// (store.EventLog), from one read of the counter: position is given, and expiry has not cut
// past it. A position given whose event is still to be inserted counts as kept: the reader
// reads it once it is.
func (s *Store) KeepsAfter(ctx context.Context, position int64) (bool, error) {
	c, err := s.counter(ctx)
	if err != nil {
		return false, s.classify(err)
	}
	return c.Expired <= position && position <= c.Last, nil
}

// Key returns the log's key, in the counter's document, which every instance reads and the
// first to find none makes: an update whose filter asks for a counter without a key sets one,
// and, where there is no counter yet, inserts it with one. Of instances that race, the first
// update sets its key; each later one matches no counter without a key, so it tries to insert
// one, which the unique _id refuses (a duplicate key, not an error here). Each then reads the
// key that won. $setOnInsert alone would not do: the counter of an earlier release exists,
// without a key. The key never changes, so it is read once.
func (s *Store) Key(ctx context.Context) ([]byte, error) {
	if key := s.logKey.Load(); key != nil {
		return bytes.Clone(*key), nil
	}
	ctr, err := s.counter(ctx)
	if err != nil {
		return nil, s.classify(err)
	}
	if len(ctr.Key) == 0 {
		key := make([]byte, 16)
		_, _ = rand.Read(key) // crypto/rand.Read never fails
		noKey := append(slices.Clone(eventsCounter), bson.E{Key: "key", Value: bson.D{{Key: "$exists", Value: false}}})
		_, err := s.counters().UpdateOne(ctx, noKey, bson.D{{Key: "$set", Value: bson.D{{Key: "key", Value: key}}}}, options.UpdateOne().SetUpsert(true))
		if err != nil && !driver.IsDuplicateKeyError(err) {
			return nil, s.classify(err)
		}
		if ctr, err = s.counter(ctx); err != nil {
			return nil, s.classify(err)
		}
		if len(ctr.Key) == 0 {
			return nil, fmt.Errorf("%w: the event log's counter has no key after it was given one", store.ErrUnavailable)
		}
	}
	s.logKey.Store(&ctr.Key)
	return bytes.Clone(ctr.Key), nil
}

// Stats returns what the log holds: its documents as the collection's metadata counts them,
// markers included, and its oldest by the _id index.
func (s *Store) Stats(ctx context.Context) (store.LogStats, error) {
	c, err := s.events(ctx)
	if err != nil {
		return store.LogStats{}, s.classify(err)
	}
	var st store.LogStats
	if st.Events, err = c.EstimatedDocumentCount(ctx); err != nil {
		return store.LogStats{}, s.classify(err)
	}
	var oldest event
	switch err := c.FindOne(ctx, bson.D{}, options.FindOne().SetSort(oldestFirst).SetProjection(bson.D{{Key: "_id", Value: 1}})).Decode(&oldest); {
	case err == nil:
		st.Oldest = oldest.Position
	case !errors.Is(err, driver.ErrNoDocuments):
		return store.LogStats{}, s.classify(err)
	}
	if st.Last, err = s.LastPosition(ctx); err != nil {
		return store.LogStats{}, err
	}
	return st, nil
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
