package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/postsedge/caddy-posts/store"
)

// KeysCollection holds the records of idempotency keys, one document per user and key.
const KeysCollection = "idempotency"

// keyID is the _id of a record: the user and the key, so that the one unique index every
// collection has makes a record per user and key, with no separator two ids could share.
type keyID struct {
	UserID string `bson:"userId"`
	Key    string `bson:"key"`
}

// keyRecord is a record as a document of the keys collection. Status is 0 while the create is
// under way.
type keyRecord struct {
	ID          keyID               `bson:"_id"`
	Fingerprint string              `bson:"fingerprint"`
	PostID      string              `bson:"postId"`
	Attempt     int                 `bson:"attempt"`
	LockedUntil time.Time           `bson:"lockedUntil"`
	CreatedAt   time.Time           `bson:"createdAt"`
	ExpiresAt   time.Time           `bson:"expiresAt"`
	Status      int                 `bson:"status"`
	Header      map[string][]string `bson:"header"`
	Body        []byte              `bson:"body"`
}

func (k keyRecord) toStore() store.IdempotencyRecord {
	r := store.IdempotencyRecord{UserID: k.ID.UserID, Key: k.ID.Key, Fingerprint: k.Fingerprint, PostID: k.PostID,
		Attempt: k.Attempt, LockedUntil: k.LockedUntil.UTC(), CreatedAt: k.CreatedAt.UTC(), ExpiresAt: k.ExpiresAt.UTC()}
	if k.Status != 0 {
		r.Response = &store.Response{Status: k.Status, Header: k.Header, Body: k.Body}
	}
	return r
}

// expiryIndex lets MongoDB delete a record once its expiresAt has passed (a TTL index); a
// server without TTL indexes (FerretDB) gets the same index without expireAfterSeconds, which
// the sweeps of DeleteExpiredKeys read.
var expiryIndex = driver.IndexModel{Keys: bson.D{{Key: "expiresAt", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(0)}

// postIDIndex finds the records of a post id, which a deleted post's id is kept for (deleted.go).
var postIDIndex = driver.IndexModel{Keys: bson.D{{Key: "postId", Value: 1}}}

// keys returns the keys collection, ensuring its indexes on first use.
func (s *Store) keys(ctx context.Context) (*driver.Collection, error) {
	return s.ensured(ctx, &s.keyRecords, KeysCollection, func(ctx context.Context, coll *driver.Collection) error {
		err := createExpiryIndex(ctx, coll, expiryIndex)
		if err == nil {
			err = createIndex(ctx, coll, postIDIndex)
		}
		if err != nil {
			return fmt.Errorf("ensuring the indexes of %s: %w", KeysCollection, err)
		}
		return nil
	})
}

// ReserveKey stores r unless a record of its user and key that has not expired is stored: one
// upsert whose filter matches only an expired record, so that a live one makes it fail on the
// unique _id, and is then read.
func (s *Store) ReserveKey(ctx context.Context, r store.IdempotencyRecord, now time.Time) (store.IdempotencyRecord, bool, error) {
	c, err := s.keys(ctx)
	if err != nil {
		return store.IdempotencyRecord{}, false, s.classify(err)
	}
	id := keyID{r.UserID, r.Key}
	set := bson.D{
		{Key: "fingerprint", Value: r.Fingerprint}, {Key: "postId", Value: r.PostID}, {Key: "attempt", Value: r.Attempt},
		{Key: "lockedUntil", Value: r.LockedUntil}, {Key: "createdAt", Value: r.CreatedAt}, {Key: "expiresAt", Value: r.ExpiresAt},
		{Key: "status", Value: 0}, {Key: "header", Value: nil}, {Key: "body", Value: nil},
	}
	// The live record may expire or be swept between the failed upsert and the read: then the
	// upsert is tried again, a few times at most.
	for range 3 {
		_, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "expiresAt", Value: bson.D{{Key: "$lte", Value: now}}}},
			bson.D{{Key: "$set", Value: set}}, options.UpdateOne().SetUpsert(true))
		if err == nil {
			return asStored(r), true, nil
		}
		if !driver.IsDuplicateKeyError(err) {
			return store.IdempotencyRecord{}, false, s.classify(err)
		}
		var k keyRecord
		err = c.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&k)
		switch {
		case err == nil && k.ExpiresAt.After(now):
			return k.toStore(), false, nil
		case err != nil && !errors.Is(err, driver.ErrNoDocuments):
			return store.IdempotencyRecord{}, false, s.classify(err)
		}
	}
	return store.IdempotencyRecord{}, false, fmt.Errorf("%w: idempotency key %q of %q changed under three reservations in a row", store.ErrUnavailable, r.Key, r.UserID)
}

// asStored is r as it reads back: times in UTC, to the millisecond.
func asStored(r store.IdempotencyRecord) store.IdempotencyRecord {
	for _, t := range []*time.Time{&r.LockedUntil, &r.CreatedAt, &r.ExpiresAt} {
		*t = t.UTC().Truncate(time.Millisecond)
	}
	return r
}

// TakeOverKey moves the record from attempt to the next, if attempt's hold has ended.
func (s *Store) TakeOverKey(ctx context.Context, user, key string, attempt int, now, until time.Time) (bool, error) {
	res, err := s.updateKey(ctx, bson.D{{Key: "_id", Value: keyID{user, key}}, {Key: "status", Value: 0}, {Key: "attempt", Value: attempt},
		{Key: "lockedUntil", Value: bson.D{{Key: "$lte", Value: now}}}, {Key: "expiresAt", Value: bson.D{{Key: "$gt", Value: now}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "lockedUntil", Value: until}}}, {Key: "$inc", Value: bson.D{{Key: "attempt", Value: 1}}}})
	return err == nil && res.MatchedCount == 1, err
}

// CompleteKey keeps res as the record's response, if it has none yet.
func (s *Store) CompleteKey(ctx context.Context, user, key string, res store.Response) error {
	_, err := s.updateKey(ctx, bson.D{{Key: "_id", Value: keyID{user, key}}, {Key: "status", Value: 0}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: res.Status}, {Key: "header", Value: res.Header}, {Key: "body", Value: res.Body}}}})
	return err
}

// InsertPostCompletingKey inserts p, then completes the record of its user and key: MongoDB
// has no transaction across documents on a standalone server, so a crash in between leaves the
// post and a record still under way, which the next attempt finds (see posts.Service.CreateOnce).
func (s *Store) InsertPostCompletingKey(ctx context.Context, p store.Post, key string, res store.Response) (store.Event, bool, error) {
	e, err := s.InsertPost(ctx, p)
	if err != nil {
		return store.Event{}, false, err
	}
	return e, true, s.CompleteKey(ctx, p.UserID, key, res)
}

// ReleaseKey ends attempt's hold on the record.
func (s *Store) ReleaseKey(ctx context.Context, user, key string, attempt int) error {
	_, err := s.updateKey(ctx, bson.D{{Key: "_id", Value: keyID{user, key}}, {Key: "status", Value: 0}, {Key: "attempt", Value: attempt}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "lockedUntil", Value: time.UnixMilli(0)}}}})
	return err
}

// DeleteKey deletes the record if attempt holds it.
func (s *Store) DeleteKey(ctx context.Context, user, key string, attempt int) error {
	c, err := s.keys(ctx)
	if err != nil {
		return s.classify(err)
	}
	_, err = c.DeleteOne(ctx, bson.D{{Key: "_id", Value: keyID{user, key}}, {Key: "status", Value: 0}, {Key: "attempt", Value: attempt}})
	return s.classify(err)
}

// deleteExpiredKeys deletes at most limit expired records, found through the index on expiresAt.
func (s *Store) deleteExpiredKeys(ctx context.Context, now time.Time, limit int) (int, error) {
	c, err := s.keys(ctx)
	if err != nil {
		return 0, s.classify(err)
	}
	return s.deleteFound(ctx, c, bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$lte", Value: now}}}}, limit)
}

// deleteFound deletes at most limit documents of c that filter selects: their ids found first,
// then deleted by id (a delete of many documents takes no limit), filter asked again.
func (s *Store) deleteFound(ctx context.Context, c *driver.Collection, filter bson.D, limit int) (int, error) {
	cursor, err := c.Find(ctx, filter, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return 0, s.classify(err)
	}
	var found []struct {
		ID bson.RawValue `bson:"_id"`
	}
	if err := cursor.All(ctx, &found); err != nil {
		return 0, s.classify(err)
	}
	if len(found) == 0 {
		return 0, nil
	}
	ids := make(bson.A, len(found))
	for i, f := range found {
		ids[i] = f.ID
	}
	res, err := c.DeleteMany(ctx, append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}))
	if err != nil {
		return 0, s.classify(err)
	}
	return int(res.DeletedCount), nil
}

// DeleteExpiredKeys deletes at most limit expired records, then, within what is left of limit,
// the ids of deleted posts kept until then (deleted.go).
func (s *Store) DeleteExpiredKeys(ctx context.Context, now time.Time, limit int) (int, error) {
	n, err := s.deleteExpiredKeys(ctx, now, limit)
	if err != nil || n >= limit {
		return n, err
	}
	ids, err := s.deleteExpiredIDs(ctx, now, limit-n)
	return n + ids, err
}

// updateKey applies update to the record that filter selects.
func (s *Store) updateKey(ctx context.Context, filter, update bson.D) (*driver.UpdateResult, error) {
	c, err := s.keys(ctx)
	if err != nil {
		return nil, s.classify(err)
	}
	res, err := c.UpdateOne(ctx, filter, update)
	return res, s.classify(err)
}

var _ store.IdempotencyStore = (*Store)(nil)
