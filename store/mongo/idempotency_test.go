package mongo_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// The keys collection has its index on expiresAt after first use: a TTL index where the server
// has them (MongoDB), a plain one where it has not (FerretDB v1), which the sweeps read.
func TestTheKeysCollectionHasAnExpiryIndex(t *testing.T) {
	for _, d := range []struct{ name, uri string }{{"FerretDB", mongotest.FerretDB(t).URI}, {"MongoDB", mongotest.MongoDBURI()}} {
		t.Run("on "+d.name, func(t *testing.T) {
			if d.uri == "" {
				t.Skip("needs a real mongod, whose index is a TTL index: set MONGODB_URI (the FerretDB case above runs here)")
			}
			s, err := mongo.Open(d.uri, "expiry")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			now := time.Now()
			r := store.IdempotencyRecord{UserID: "alice", Key: "k", Fingerprint: "f", PostID: store.NewID(now), Attempt: 1,
				LockedUntil: now, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
			if _, _, err := s.ReserveKey(t.Context(), r, now); err != nil {
				t.Fatal(err)
			}
			client, err := mongo.Connect(d.uri)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				client.Database("expiry").Drop(context.Background())
				mongo.Disconnect(client)
			})
			specs, err := client.Database("expiry").Collection(mongo.KeysCollection).Indexes().ListSpecifications(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, spec := range specs {
				var keys bson.D
				if err := bson.Unmarshal(spec.KeysDocument, &keys); err != nil {
					t.Fatal(err)
				}
				if len(keys) != 1 || keys[0].Key != "expiresAt" {
					continue
				}
				ttl := spec.ExpireAfterSeconds != nil && *spec.ExpireAfterSeconds == 0
				if want := d.name == "MongoDB"; ttl != want {
					t.Errorf("the index on expiresAt is a TTL index: %v; want %v", ttl, want)
				}
				return
			}
			t.Errorf("no index on expiresAt among %d", len(specs))
		})
	}
}
