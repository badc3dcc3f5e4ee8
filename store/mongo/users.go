package mongo

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/postsedge/caddy-posts/store"
)

// user is a profile as a document of the users collection, keyed by the user id.
type user struct {
	ID        string    `bson:"_id"`
	Name      *string   `bson:"name,omitempty"`
	Email     *string   `bson:"email,omitempty"`
	UpdatedAt time.Time `bson:"updatedAt"`
}

func (u user) toStore() store.User {
	return store.User{ID: u.ID, Name: u.Name, Email: u.Email, UpdatedAt: u.UpdatedAt.UTC()}
}

// SaveUser creates the user or refreshes its profile.
func (s *Store) SaveUser(ctx context.Context, u store.User) error {
	set := bson.D{{Key: "updatedAt", Value: u.UpdatedAt}}
	if u.Name != nil {
		set = append(set, bson.E{Key: "name", Value: *u.Name})
	}
	if u.Email != nil {
		set = append(set, bson.E{Key: "email", Value: *u.Email})
	}
	_, err := s.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: u.ID}}, bson.D{{Key: "$set", Value: set}},
		options.UpdateOne().SetUpsert(true))
	return s.classify(err)
}

// GetUser returns the user with the id, or store.ErrNotFound.
func (s *Store) GetUser(ctx context.Context, id string) (store.User, error) {
	var u user
	if err := s.users.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&u); err != nil {
		return store.User{}, s.classify(err)
	}
	return u.toStore(), nil
}

// GetUsers returns the users with the ids that have a profile, in one query.
func (s *Store) GetUsers(ctx context.Context, ids []string) ([]store.User, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	cursor, err := s.users.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
	if err != nil {
		return nil, s.classify(err)
	}
	var docs []user
	if err := cursor.All(ctx, &docs); err != nil {
		return nil, s.classify(err)
	}
	users := make([]store.User, len(docs))
	for i, d := range docs {
		users[i] = d.toStore()
	}
	return users, nil
}
