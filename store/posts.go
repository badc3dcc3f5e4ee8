// Package store reads and writes posts in MongoDB with mongo-driver v2, and runs the embedded
// MongoDB-compatible server used when no MongoDB URI is configured.
package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Post is a post as stored in the posts collection.
type Post struct {
	ID        bson.ObjectID `bson:"_id"`
	UserID    string        `bson:"userId"`
	Title     string        `bson:"title"`
	Body      *string       `bson:"body,omitempty"`
	CreatedAt time.Time     `bson:"createdAt"`
	UpdatedAt time.Time     `bson:"updatedAt"`
}

// Key is a post's place in the newest-first order of lists: createdAt, then _id, both descending.
type Key struct {
	CreatedAt time.Time
	ID        bson.ObjectID
}

// Filter selects a page of posts, newest first.
type Filter struct {
	// UserID, when not empty, keeps only that user's posts.
	UserID string
	// After, when set, keeps only the posts that come after it in the order.
	After *Key
	// Limit is the largest number of posts returned.
	Limit int
}

// Update is a change to a post. Nil fields are left as they are.
type Update struct {
	Title     *string
	Body      *string
	UnsetBody bool
	UpdatedAt time.Time
}

// CollectionName is the collection that holds the posts.
const CollectionName = "posts"

// indexes serve the list queries: newest first, and newest first for one user.
var indexes = []mongo.IndexModel{
	{Keys: bson.D{{Key: "userId", Value: 1}, {Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}},
	{Keys: bson.D{{Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}},
}

// newestFirst is the order of every list.
var newestFirst = bson.D{{Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}

// Posts is the posts collection of one database. Every call runs under the configured timeout.
type Posts struct {
	client   *Client
	database string
	timeout  time.Duration

	ready   atomic.Pointer[mongo.Collection] // set once connected and indexed
	readyMu sync.Mutex
}

// NewPosts returns the posts collection of database, reached through client.
func NewPosts(client *Client, database string, timeout time.Duration) *Posts {
	return &Posts{client: client, database: database, timeout: timeout}
}

// do runs op on the collection under the configured timeout, connecting and ensuring the
// indexes first when this is the first use.
func (p *Posts) do(ctx context.Context, op func(context.Context, *mongo.Collection) error) error {
	return run(ctx, p.timeout, p.collection, op)
}

// run runs op on the collection that collection returns, all under timeout, and maps the
// driver's errors to this package's. Every call of the store goes through it.
func run(ctx context.Context, timeout time.Duration, collection func(context.Context) (*mongo.Collection, error),
	op func(context.Context, *mongo.Collection) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	coll, err := collection(ctx)
	if err == nil {
		err = op(ctx, coll)
	}
	return classify(err)
}

// collection connects on first use and ensures the indexes once, retrying on later calls
// until that succeeds. It keeps the collection: the driver allocates a new Database and
// Collection on every lookup, which no request should pay for.
func (p *Posts) collection(ctx context.Context) (*mongo.Collection, error) {
	if coll := p.ready.Load(); coll != nil {
		return coll, nil
	}
	p.readyMu.Lock()
	defer p.readyMu.Unlock()
	if coll := p.ready.Load(); coll != nil {
		return coll, nil
	}
	mc, err := p.client.mongo(ctx)
	if err != nil {
		return nil, err
	}
	coll := mc.Database(p.database).Collection(CollectionName)
	// One index per command: FerretDB 1.24 drops the connection when one createIndexes names
	// two indexes that both exist already. MongoDB treats an existing index as done.
	for _, index := range indexes {
		if _, err := coll.Indexes().CreateOne(ctx, index); err != nil {
			return nil, fmt.Errorf("ensuring indexes: %w", err)
		}
	}
	p.ready.Store(coll)
	return coll, nil
}

// Insert stores a new post.
func (p *Posts) Insert(ctx context.Context, post Post) error {
	return p.do(ctx, func(ctx context.Context, c *mongo.Collection) error {
		_, err := c.InsertOne(ctx, post)
		return err
	})
}

// FindByID returns the post with the id, or ErrNotFound.
func (p *Posts) FindByID(ctx context.Context, id bson.ObjectID) (post Post, err error) {
	err = p.do(ctx, func(ctx context.Context, c *mongo.Collection) error {
		return c.FindOne(ctx, idFilter{id}).Decode(&post)
	})
	return post, err
}

// idFilter selects the post with the ID. It is a struct rather than a bson.D, which would box
// both the slice and the id: two allocations more on every read.
type idFilter struct {
	ID bson.ObjectID `bson:"_id"`
}

// List returns the posts that f selects, newest first.
func (p *Posts) List(ctx context.Context, f Filter) (posts []Post, err error) {
	query := bson.D{}
	if f.UserID != "" {
		query = append(query, bson.E{Key: "userId", Value: f.UserID})
	}
	if f.After != nil {
		// Keyset pagination: strictly older, or as old with a smaller _id. Posts inserted
		// meanwhile are newer than the key and so never shift the pages that follow it.
		query = append(query, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: "createdAt", Value: bson.D{{Key: "$lt", Value: f.After.CreatedAt}}}},
			bson.D{{Key: "createdAt", Value: f.After.CreatedAt}, {Key: "_id", Value: bson.D{{Key: "$lt", Value: f.After.ID}}}},
		}})
	}
	posts = make([]Post, 0, f.Limit)
	err = p.do(ctx, func(ctx context.Context, c *mongo.Collection) error {
		cursor, err := c.Find(ctx, query, options.Find().SetSort(newestFirst).SetLimit(int64(f.Limit)))
		if err != nil {
			return err
		}
		return cursor.All(ctx, &posts)
	})
	return posts, err
}

// UpdateOwned applies u to the post with the id if it belongs to owner, in one atomic call, and
// returns the post as it is afterwards. ErrNotFound means no post has both that id and owner.
func (p *Posts) UpdateOwned(ctx context.Context, id bson.ObjectID, owner string, u Update) (post Post, err error) {
	set := bson.D{{Key: "updatedAt", Value: u.UpdatedAt}}
	if u.Title != nil {
		set = append(set, bson.E{Key: "title", Value: *u.Title})
	}
	if u.Body != nil {
		set = append(set, bson.E{Key: "body", Value: *u.Body})
	}
	update := bson.D{{Key: "$set", Value: set}}
	if u.UnsetBody {
		update = append(update, bson.E{Key: "$unset", Value: bson.D{{Key: "body", Value: ""}}})
	}
	err = p.do(ctx, func(ctx context.Context, c *mongo.Collection) error {
		return c.FindOneAndUpdate(ctx, owned(id, owner), update,
			options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&post)
	})
	return post, err
}

// DeleteOwned deletes the post with the id if it belongs to owner. ErrNotFound means no post has
// both that id and owner.
func (p *Posts) DeleteOwned(ctx context.Context, id bson.ObjectID, owner string) error {
	return p.do(ctx, func(ctx context.Context, c *mongo.Collection) error {
		res, err := c.DeleteOne(ctx, owned(id, owner))
		if err == nil && res.DeletedCount == 0 {
			err = mongo.ErrNoDocuments
		}
		return err
	})
}

// owned puts ownership into the filter, so a write can never touch someone else's post.
func owned(id bson.ObjectID, owner string) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: "userId", Value: owner}}
}
