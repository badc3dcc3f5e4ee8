package mongo

import (
	"context"
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
}

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

// idFilter selects the post with the ID. It is a struct rather than a bson.D, which would box
// both the slice and the id: two allocations more on every read.
type idFilter struct {
	ID bson.ObjectID `bson:"_id"`
}

// ownedFilter puts ownership into the filter, so a write can never touch someone else's post.
type ownedFilter struct {
	ID     bson.ObjectID `bson:"_id"`
	UserID string        `bson:"userId"`
}

// versionedFilter is ownedFilter with the version the post must be at, so a write can never
// touch a post that changed since its writer read it.
type versionedFilter struct {
	ID      bson.ObjectID `bson:"_id"`
	UserID  string        `bson:"userId"`
	Version int64         `bson:"version"`
}

// writeFilter selects the post with the id oid if it belongs to owner and is at version (any,
// for store.AnyVersion).
func writeFilter(oid bson.ObjectID, owner string, version int64) any {
	if version == store.AnyVersion {
		return ownedFilter{oid, owner}
	}
	return versionedFilter{oid, owner, version}
}

// nextVersion is the part of every update that adds one to the version.
var nextVersion = bson.E{Key: "$inc", Value: bson.D{{Key: "version", Value: int64(1)}}}

// newestFirst is the order of every list.
var newestFirst = bson.D{{Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}

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
	var p post
	if err := c.FindOne(ctx, idFilter{oid}).Decode(&p); err != nil {
		return store.Post{}, s.classify(err)
	}
	return p.toStore(), nil
}

// ListPosts returns the posts that f selects, newest first.
func (s *Store) ListPosts(ctx context.Context, f store.Filter) ([]store.Post, error) {
	query := bson.D{}
	if f.UserID != "" {
		query = append(query, bson.E{Key: "userId", Value: f.UserID})
	}
	if f.After != nil {
		// Keyset paging: strictly older, or as old with a smaller _id. An after id that is not
		// an ObjectID still has its place: every ObjectID sorts below the largest one.
		after, ok := objectID(f.After.ID)
		if !ok {
			after = bson.ObjectID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		}
		query = append(query, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: "createdAt", Value: bson.D{{Key: "$lt", Value: f.After.CreatedAt}}}},
			bson.D{{Key: "createdAt", Value: f.After.CreatedAt}, {Key: "_id", Value: bson.D{{Key: "$lt", Value: after}}}},
		}})
	}
	c, err := s.collection(ctx)
	if err != nil {
		return nil, s.classify(err)
	}
	cursor, err := c.Find(ctx, query, options.Find().SetSort(newestFirst).SetLimit(int64(f.Limit)))
	if err != nil {
		return nil, s.classify(err)
	}
	docs := make([]post, 0, f.Limit)
	if err := cursor.All(ctx, &docs); err != nil {
		return nil, s.classify(err)
	}
	posts := make([]store.Post, len(docs))
	for i, d := range docs {
		posts[i] = d.toStore()
	}
	return posts, nil
}

// InsertPost stores a new post.
func (s *Store) InsertPost(ctx context.Context, p store.Post) error {
	oid, ok := objectID(p.ID)
	if !ok {
		return &invalidIDError{p.ID}
	}
	c, err := s.collection(ctx)
	if err != nil {
		return s.classify(err)
	}
	_, err = c.InsertOne(ctx, document(oid, p))
	return s.classify(err)
}

// document is p as a document of the posts collection, with the id oid.
func document(oid bson.ObjectID, p store.Post) post {
	return post{ID: oid, UserID: p.UserID, Title: p.Title, Body: p.Body, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt, Version: max(p.Version, 1)}
}

// invalidIDError is an insert of an id that store.NewID did not make.
type invalidIDError struct{ id string }

func (e *invalidIDError) Error() string { return "not a post id: " + e.id }

// UpdatePost applies u to the post with the id if it belongs to owner and is at version (any,
// for store.AnyVersion), in one atomic call.
func (s *Store) UpdatePost(ctx context.Context, id, owner string, version int64, u store.Update) (store.Post, error) {
	oid, ok := objectID(id)
	if !ok {
		return store.Post{}, store.ErrNotFound
	}
	set := bson.D{{Key: "updatedAt", Value: u.UpdatedAt}}
	if u.Title != nil {
		set = append(set, bson.E{Key: "title", Value: *u.Title})
	}
	if u.Body != nil {
		set = append(set, bson.E{Key: "body", Value: *u.Body})
	}
	update := bson.D{{Key: "$set", Value: set}, nextVersion}
	if u.UnsetBody {
		update = append(update, bson.E{Key: "$unset", Value: bson.D{{Key: "body", Value: ""}}})
	}
	c, err := s.collection(ctx)
	if err != nil {
		return store.Post{}, s.classify(err)
	}
	var p post
	err = c.FindOneAndUpdate(ctx, writeFilter(oid, owner, version), update,
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&p)
	if err != nil {
		return store.Post{}, s.classify(err)
	}
	return p.toStore(), nil
}

// DeletePost deletes the post with the id if it belongs to owner and is at version (any, for
// store.AnyVersion).
func (s *Store) DeletePost(ctx context.Context, id, owner string, version int64) error {
	oid, ok := objectID(id)
	if !ok {
		return store.ErrNotFound
	}
	c, err := s.collection(ctx)
	if err != nil {
		return s.classify(err)
	}
	res, err := c.DeleteOne(ctx, writeFilter(oid, owner, version))
	if err == nil && res.DeletedCount == 0 {
		err = driver.ErrNoDocuments
	}
	return s.classify(err)
}
