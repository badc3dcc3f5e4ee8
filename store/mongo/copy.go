package mongo

import (
	"context"
	"errors"
	"iter"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/postsedge/caddy-posts/store"
)

// byID is the order of a copy: the _id index, which every collection has.
var byID = bson.D{{Key: "_id", Value: 1}}

// AllPosts yields every post in ascending id order, through one cursor that fetches batch
// documents at a time (the server also ends a batch at 16 MB). It reads the collection as it
// is, without ensuring its indexes: a copy does not write its source. A deleted post whose
// event is not logged yet (a tombstone) is not one.
func (s *Store) AllPosts(ctx context.Context, batch int) iter.Seq2[store.Post, error] {
	return all(ctx, s, s.client.Database(s.database).Collection(PostsCollection), bson.D{live}, withoutTerms, batch, post.toStore)
}

// AllUsers yields every profile in ascending id order, as AllPosts does.
func (s *Store) AllUsers(ctx context.Context, batch int) iter.Seq2[store.User, error] {
	return all(ctx, s, s.users, bson.D{}, nil, batch, user.toStore)
}

// all yields every document of coll that filter selects in ascending _id order, of projection
// (nil for the whole document), decoded as D and converted.
func all[D, T any](ctx context.Context, s *Store, coll *driver.Collection, filter, projection bson.D, batch int, convert func(D) T) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		opts := options.Find().SetSort(byID).SetBatchSize(int32(min(batch, 1<<30)))
		if projection != nil {
			opts.SetProjection(projection)
		}
		cursor, err := coll.Find(ctx, filter, opts)
		if err != nil {
			yield(zero, s.classify(err))
			return
		}
		defer cursor.Close(context.WithoutCancel(ctx))
		for cursor.Next(ctx) {
			var d D
			if err := cursor.Decode(&d); err != nil {
				yield(zero, err)
				return
			}
			if !yield(convert(d), nil) {
				return
			}
		}
		if err := cursor.Err(); err != nil {
			yield(zero, s.classify(err))
		}
	}
}

// HoldsPosts says whether the database has a posts collection, as every database caddy-posts
// has served does: MongoDB answers a misspelled database name with an empty one.
func (s *Store) HoldsPosts(ctx context.Context) (bool, error) {
	names, err := s.client.Database(s.database).ListCollectionNames(ctx, bson.D{{Key: "name", Value: PostsCollection}})
	if err != nil {
		return false, s.classify(err)
	}
	return slices.Contains(names, PostsCollection), nil
}

// InsertPosts stores the posts whose ids are not stored yet, with their terms (search.go), in
// one unordered bulk insert: the server stores every post of the batch it can and refuses those
// whose _id it holds. It is
// not one transaction: a batch that fails half-way may have stored some of its posts, which
// the next copy skips.
func (s *Store) InsertPosts(ctx context.Context, posts []store.Post) (int, error) {
	if len(posts) == 0 {
		return 0, nil
	}
	docs := make([]post, len(posts))
	for i, p := range posts {
		oid, ok := objectID(p.ID)
		if !ok {
			return 0, &invalidIDError{p.ID}
		}
		docs[i] = document(oid, p)
	}
	c, err := s.collection(ctx)
	if err != nil {
		return 0, s.classify(err)
	}
	return s.stored(len(docs), insertMany(ctx, c, docs))
}

// InsertUsers stores the profiles whose ids are not stored yet, as InsertPosts does.
func (s *Store) InsertUsers(ctx context.Context, users []store.User) (int, error) {
	if len(users) == 0 {
		return 0, nil
	}
	docs := make([]user, len(users))
	for i, u := range users {
		docs[i] = user{ID: u.ID, Name: u.Name, Email: u.Email, UpdatedAt: u.UpdatedAt}
	}
	return s.stored(len(docs), insertMany(ctx, s.users, docs))
}

func insertMany[D any](ctx context.Context, c *driver.Collection, docs []D) error {
	_, err := c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	return err
}

// stored is how many of the n documents of an unordered insert were stored: all but those
// refused as duplicates. Any other refusal is an error.
func (s *Store) stored(n int, err error) (int, error) {
	var bulk driver.BulkWriteException
	if err == nil {
		return n, nil
	}
	if !errors.As(err, &bulk) || bulk.WriteConcernError != nil {
		return 0, s.classify(err)
	}
	for _, e := range bulk.WriteErrors {
		if !driver.IsDuplicateKeyError(e.WriteError) {
			return 0, s.classify(err)
		}
	}
	return n - len(bulk.WriteErrors), nil
}

var _ store.CopyTarget = (*Store)(nil)
