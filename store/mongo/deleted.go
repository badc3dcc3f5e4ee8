package mongo

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/postsedge/caddy-posts/store"
)

// A deleted post whose id an idempotency record names keeps its document in the posts collection
// once its event is logged, stripped to a keptDeleted, until the last of those records expires
// (store.Store.DeletePost): its _id refuses the insert of a retry of that record's create, in the
// one atomic insert, where a check before the insert could race with the delete. It has no
// userId and no ev, so no write's filter matches it, and reads skip it as they skip every
// tombstone (gone). A deleted post that no record names leaves nothing, as before.

// errEventTaken is a write whose event's key (changeKey) an event of another write holds: the
// insert of a deleted post's id that no idempotency record named (one a record names is refused
// before, as a keptDeleted). Its event is not logged, logEvent never hands the other's back as
// its own, and logged undoes the insert.
var errEventTaken = errors.New("the key of this write's event is held by the event of an earlier write of the same post id")

// sameWrite says whether logged, the event logged at a change's key, is that of the write that
// left p with its pending event: made at the same moment, and holding the same post. An event of
// an earlier release, which has no Wrote, is taken on its post alone.
func sameWrite(logged event, p post, e store.Event) bool {
	lp := logged.Post
	return (logged.Wrote.IsZero() || logged.Wrote.Equal(p.Pending.At)) && logged.Kind == e.Kind && lp != nil &&
		lp.ID == e.Post.ID && lp.UserID == e.Post.UserID && lp.Title == e.Post.Title && show(lp.Body) == show(e.Post.Body) &&
		lp.CreatedAt.Equal(e.Post.CreatedAt) && lp.UpdatedAt.Equal(e.Post.UpdatedAt) && lp.Version == e.Post.Version
}

// show is a body as it compares: absent and empty differ.
func show(body *string) string {
	if body == nil {
		return "\x00"
	}
	return "=" + *body
}

// keptDeleted is the document a deleted post leaves while an idempotency record names its id.
type keptDeleted struct {
	ID   bson.ObjectID `bson:"_id"`
	Gone bool          `bson:"gone"`
	// Version is the version deleted, so that versionMissing never matches it.
	Version int64 `bson:"version"`
	// Until is when the last record that names the id expires: the sweep of expired keys
	// (DeleteExpiredKeys) deletes the document then.
	Until time.Time `bson:"until"`
}

// clearTombstone ends the tombstone p, a deleted post whose event is logged: it strips it to a
// keptDeleted while an idempotency record names its id, else deletes it. A failure leaves the
// tombstone pending, its event logged: the next write of the id or RecoverEvents clears it.
func (s *Store) clearTombstone(ctx context.Context, c *driver.Collection, p post) {
	pendingTombstone := bson.D{{Key: "_id", Value: p.ID}, {Key: "gone", Value: true}, {Key: "ev", Value: bson.D{{Key: "$exists", Value: true}}}}
	until, named, err := s.keyExpiry(ctx, p.ID.Hex())
	switch {
	case err != nil:
	case named:
		_, _ = c.ReplaceOne(ctx, pendingTombstone, keptDeleted{ID: p.ID, Gone: true, Version: p.Version, Until: until})
	default:
		_, _ = c.DeleteOne(ctx, pendingTombstone)
	}
}

// keyExpiry returns when the last idempotency record that names the post id expires, and whether
// one does: one lookup of the index on postId.
func (s *Store) keyExpiry(ctx context.Context, id string) (time.Time, bool, error) {
	c, err := s.keys(ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	var last keyRecord
	err = c.FindOne(ctx, bson.D{{Key: "postId", Value: id}},
		options.FindOne().SetSort(bson.D{{Key: "expiresAt", Value: -1}}).SetProjection(bson.D{{Key: "expiresAt", Value: 1}})).Decode(&last)
	if errors.Is(err, driver.ErrNoDocuments) {
		return time.Time{}, false, nil
	}
	return last.ExpiresAt, err == nil, err
}

// deletedPost says whether the document of the id oid is a deleted post's: a tombstone, pending or
// kept. An insert refused on the id asks it, to answer store.ErrDeleted.
func (s *Store) deletedPost(ctx context.Context, c *driver.Collection, oid bson.ObjectID) bool {
	err := c.FindOne(ctx, bson.D{{Key: "_id", Value: oid}, {Key: "gone", Value: true}}, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	return err == nil
}

// deleteExpiredIDs deletes at most limit keptDeleted documents whose records have all expired at
// now, found through the index on until.
func (s *Store) deleteExpiredIDs(ctx context.Context, now time.Time, limit int) (int, error) {
	c, err := s.collection(ctx)
	if err != nil {
		return 0, s.classify(err)
	}
	return s.deleteFound(ctx, c, bson.D{{Key: "until", Value: bson.D{{Key: "$lte", Value: now}}}}, limit)
}
