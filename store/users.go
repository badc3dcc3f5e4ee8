package store

import (
	"context"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// User is a user's profile as stored in the users collection, keyed by the user id.
type User struct {
	ID        string    `bson:"_id"`
	Name      *string   `bson:"name,omitempty"`
	Email     *string   `bson:"email,omitempty"`
	UpdatedAt time.Time `bson:"updatedAt"`
}

// UsersCollectionName is the collection that holds the users.
const UsersCollectionName = "users"

// Users is the users collection of one database. Every call runs under the configured timeout.
type Users struct {
	client   *Client
	database string
	timeout  time.Duration
	ready    atomic.Pointer[mongo.Collection] // set on first use
}

// NewUsers returns the users collection of database, reached through client.
func NewUsers(client *Client, database string, timeout time.Duration) *Users {
	return &Users{client: client, database: database, timeout: timeout}
}

// do runs op on the collection under the configured timeout.
func (u *Users) do(ctx context.Context, op func(context.Context, *mongo.Collection) error) error {
	return run(ctx, u.timeout, u.collection, op)
}

// collection connects on first use and keeps the collection, as Posts does.
func (u *Users) collection(ctx context.Context) (*mongo.Collection, error) {
	if coll := u.ready.Load(); coll != nil {
		return coll, nil
	}
	mc, err := u.client.mongo(ctx)
	if err != nil {
		return nil, err
	}
	coll := mc.Database(u.database).Collection(UsersCollectionName)
	u.ready.Store(coll) // first calls that race store equal collections
	return coll, nil
}

// Save creates the user or refreshes its profile. A nil Name or Email leaves the stored one as
// it is, so a credential without a profile never erases one.
func (u *Users) Save(ctx context.Context, user User) error {
	set := bson.D{{Key: "updatedAt", Value: user.UpdatedAt}}
	if user.Name != nil {
		set = append(set, bson.E{Key: "name", Value: *user.Name})
	}
	if user.Email != nil {
		set = append(set, bson.E{Key: "email", Value: *user.Email})
	}
	return u.do(ctx, func(ctx context.Context, c *mongo.Collection) error {
		_, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: user.ID}}, bson.D{{Key: "$set", Value: set}},
			options.UpdateOne().SetUpsert(true))
		return err
	})
}

// FindByID returns the user with the id, or ErrNotFound.
func (u *Users) FindByID(ctx context.Context, id string) (user User, err error) {
	err = u.do(ctx, func(ctx context.Context, c *mongo.Collection) error {
		return c.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&user)
	})
	return user, err
}

// FindByIDs returns the users with the ids that have one, in one query.
func (u *Users) FindByIDs(ctx context.Context, ids []string) (users []User, err error) {
	err = u.do(ctx, func(ctx context.Context, c *mongo.Collection) error {
		cursor, err := c.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
		if err != nil {
			return err
		}
		return cursor.All(ctx, &users)
	})
	return users, err
}
