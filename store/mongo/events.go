package mongo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/postsedge/caddy-posts/store"
)

// EventsCollection holds the events that instances record for one another (store.EventLog).
const EventsCollection = "events"

// event is a store.Event as a document of the events collection: small, and read in the order
// of its one index, {at: 1}.
type event struct {
	ID     string    `bson:"_id"`
	At     time.Time `bson:"at"`
	Origin string    `bson:"origin"`
	Kind   string    `bson:"kind"`
	Post   eventPost `bson:"post"`
}

// eventPost is the post of an event; the times are zero for a deleted post.
type eventPost struct {
	ID        string    `bson:"id"`
	UserID    string    `bson:"userId"`
	Title     string    `bson:"title,omitempty"`
	Body      *string   `bson:"body,omitempty"`
	CreatedAt time.Time `bson:"createdAt"`
	UpdatedAt time.Time `bson:"updatedAt"`
	Version   int64     `bson:"version,omitempty"`
}

func (e event) toStore() store.Event {
	p := e.Post
	post := store.Post{ID: p.ID, UserID: p.UserID, Title: p.Title, Body: p.Body, Version: p.Version}
	if !p.CreatedAt.IsZero() {
		post.CreatedAt, post.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	}
	return store.Event{ID: e.ID, At: e.At.UTC(), Origin: e.Origin, Kind: e.Kind, Post: post}
}

// SetEventTTL makes the index of the events collection, when this store first ensures it, a TTL
// index that lets MongoDB delete an event ttl after its at. Servers without TTL indexes
// (FerretDB v1) get an ordinary index; ExpireEvents deletes there, and the relay calls it every
// minute on any server. An index made earlier with another TTL is kept as it is. Zero: no TTL.
func (s *Store) SetEventTTL(ttl time.Duration) { s.eventTTL.Store(int64(ttl)) }

// events returns the events collection, ensuring its index on first use.
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
		if err != nil {
			return fmt.Errorf("ensuring the index of %s: %w", EventsCollection, err)
		}
		return nil
	})
}

// errIndexOptionsConflict is the code of createIndexes for an index that exists with other options.
const errIndexOptionsConflict = 85

// RecordEvent stores e.
func (s *Store) RecordEvent(ctx context.Context, e store.Event) error {
	c, err := s.events(ctx)
	if err != nil {
		return s.classify(err)
	}
	p := e.Post
	_, err = c.InsertOne(ctx, event{ID: e.ID, At: e.At, Origin: e.Origin, Kind: e.Kind, Post: eventPost{
		ID: p.ID, UserID: p.UserID, Title: p.Title, Body: p.Body, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt, Version: p.Version,
	}})
	return s.classify(err)
}

// oldestFirst is the order of EventsSince, the order of the index with the id after it.
var oldestFirst = bson.D{{Key: "at", Value: 1}, {Key: "_id", Value: 1}}

// EventsSince returns at most limit events with at from since on, oldest first: one query on
// the index {at: 1} (FerretDB v1 scans instead: it pushes down no other filter than _id's).
func (s *Store) EventsSince(ctx context.Context, since time.Time, limit int) ([]store.Event, error) {
	c, err := s.events(ctx)
	if err != nil {
		return nil, s.classify(err)
	}
	// The whole page in the first batch: one command a read, where the server's first batch of
	// 101 would have the look-back's re-read need getMores.
	limit = max(limit, 1)
	cur, err := c.Find(ctx, bson.D{{Key: "at", Value: bson.D{{Key: "$gte", Value: since}}}},
		options.Find().SetSort(oldestFirst).SetLimit(int64(limit)).SetBatchSize(int32(min(limit, math.MaxInt32))))
	if err != nil {
		return nil, s.classify(err)
	}
	defer cur.Close(ctx)
	var out []store.Event
	for cur.Next(ctx) {
		var e event
		if err := cur.Decode(&e); err != nil {
			return nil, fmt.Errorf("reading an event: %w", err)
		}
		out = append(out, e.toStore())
	}
	return out, s.classify(cur.Err())
}

// ExpireEvents deletes the events with at before before.
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

var _ store.EventLog = (*Store)(nil)
