package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/postsedge/caddy-posts/internal/race"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
	"github.com/postsedge/caddy-posts/store/storetest"
)

var databases atomic.Int64

// opener returns stores on new databases of the deployment at uri; each is dropped and closed
// when its test ends.
func opener(uri string) storetest.Open {
	return func(t *testing.T) store.Store {
		t.Helper()
		name := fmt.Sprintf("caddyposts_test_%d_%d", time.Now().UnixNano()%1e9, databases.Add(1))
		s, err := mongo.Open(uri, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			dropDatabase(t, uri, name)
			s.Close()
		})
		return s
	}
}

// reopener returns another store on the database of a store that opener(uri) made, as a
// second instance would have.
func reopener(uri string) func(*testing.T, store.Store) store.Store {
	return func(t *testing.T, s store.Store) store.Store {
		t.Helper()
		again, err := mongo.Open(uri, s.(*mongo.Store).Database())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { again.Close() })
		return again
	}
}

func dropDatabase(t *testing.T, uri, name string) {
	client, err := mongo.Connect(uri)
	if err != nil {
		t.Error(err)
		return
	}
	defer mongo.Disconnect(client)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Database(name).Drop(ctx); err != nil {
		t.Errorf("dropping %s: %v", name, err)
	}
}

func TestConformanceOnMongoDB(t *testing.T) {
	uri := mongotest.MongoDBURI()
	if uri == "" {
		t.Skip("needs a real mongod: set MONGODB_URI (for instance mongodb://localhost:27017) to run the suite against it")
	}
	storetest.RunWith(t, opener(uri), storetest.Options{Reopen: reopener(uri), ReadsMayRunAhead: true})
}

// Stores of one process (two sites, or a reload beside the config it replaces) ensure their
// indexes from the package's index models, perhaps at once: the driver adds each index's name to
// the options it is handed, so it must be handed a copy of the models' (createIndex), or they
// are written by every first use (a data race between stores).
func TestAFirstUseLeavesThePackagesIndexModelsAsWritten(t *testing.T) {
	t.Parallel() // on a server of its own, and sets none of the package's waits (SetWaits)
	uri := mongotest.FerretDB(t).URI
	before := mongo.IndexOptions()
	for range 2 {
		s, err := mongo.Open(uri, fmt.Sprintf("models_%d_%d", time.Now().UnixNano()%1e9, databases.Add(1)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		firstUse(t, s)
		if err := s.ReleaseKey(t.Context(), "alice", "k", 1); err != nil { // the keys' collection
			t.Fatal(err)
		}
	}
	if after := mongo.IndexOptions(); !slices.Equal(after, before) {
		t.Errorf("the options of the package's index models number %v after two first uses; want %v, as written", after, before)
	}
}

func TestIndexesExistAfterFirstUse(t *testing.T) {
	uri := mongotest.FerretDB(t).URI
	s, err := mongo.Open(uri, "indexes")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.ListPosts(t.Context(), store.Filter{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	client, err := mongo.Connect(uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mongo.Disconnect(client) })
	specs, err := client.Database("indexes").Collection(mongo.PostsCollection).Indexes().ListSpecifications(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, spec := range specs {
		var keys bson.D
		if err := bson.Unmarshal(spec.KeysDocument, &keys); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s:%v", k.Key, k.Value)
		}
		got = append(got, "{"+strings.Join(parts, ", ")+"}")
	}
	for _, want := range []string{"{userId:1, createdAt:-1, _id:-1}", "{createdAt:-1, _id:-1}", "{terms:1, createdAt:-1, _id:-1}"} {
		if !slices.Contains(got, want) {
			t.Errorf("indexes are %v; want one on %s", got, want)
		}
	}
}

// Documents written by earlier releases (ObjectID _id, BSON dates) read back as posts.
func TestDocumentsOfEarlierReleasesAreRead(t *testing.T) {
	uri := mongotest.FerretDB(t).URI
	client, err := mongo.Connect(uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mongo.Disconnect(client) })
	oid := bson.NewObjectID()
	created := time.Date(2025, 3, 14, 15, 9, 26, 535_000_000, time.UTC)
	if _, err := client.Database("old").Collection("posts").InsertOne(t.Context(), bson.D{
		{Key: "_id", Value: oid}, {Key: "userId", Value: "alice"}, {Key: "title", Value: "from before"},
		{Key: "createdAt", Value: created}, {Key: "updatedAt", Value: created},
	}); err != nil {
		t.Fatal(err)
	}
	s, err := mongo.Open(uri, "old")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	got, err := s.GetPost(t.Context(), oid.Hex())
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != oid.Hex() || got.UserID != "alice" || got.Title != "from before" || got.Body != nil || !got.CreatedAt.Equal(created) {
		t.Errorf("got %+v", got)
	}
}

// Documents of earlier releases have no version: they read as version 1, and the first use of a
// store gives them one (so that an update makes them 2), leaving the others' as they are.
func TestDocumentsOfEarlierReleasesGetVersion1(t *testing.T) {
	uri := mongotest.FerretDB(t).URI
	client, err := mongo.Connect(uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mongo.Disconnect(client) })
	posts := client.Database("unversioned").Collection(mongo.PostsCollection)
	created := time.Date(2025, 3, 14, 15, 9, 26, 535_000_000, time.UTC)
	old, versioned := bson.NewObjectID(), bson.NewObjectID()
	if _, err := posts.InsertMany(t.Context(), []bson.D{
		{{Key: "_id", Value: old}, {Key: "userId", Value: "alice"}, {Key: "title", Value: "from before"}, {Key: "createdAt", Value: created}, {Key: "updatedAt", Value: created}},
		{{Key: "_id", Value: versioned}, {Key: "userId", Value: "alice"}, {Key: "title", Value: "since"}, {Key: "createdAt", Value: created}, {Key: "updatedAt", Value: created}, {Key: "version", Value: int64(5)}},
	}); err != nil {
		t.Fatal(err)
	}
	storedVersion := func(t *testing.T, oid bson.ObjectID) any {
		t.Helper()
		var doc bson.M
		if err := posts.FindOne(t.Context(), bson.D{{Key: "_id", Value: oid}}).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		return doc["version"]
	}
	for round := range 2 { // the second store finds nothing left to do
		s, err := mongo.Open(uri, "unversioned")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		t.Run(fmt.Sprintf("store %d reads the old post at version 1 and the other at its own", round+1), func(t *testing.T) {
			for oid, want := range map[bson.ObjectID]int64{old: 1, versioned: 5} {
				if p, err := s.GetPost(t.Context(), oid.Hex()); err != nil || p.Version != want {
					t.Errorf("GetPost(%s) = %+v, %v; want version %d", oid.Hex(), p, err, want)
				}
			}
		})
		t.Run(fmt.Sprintf("after store %d's first use both documents hold their version", round+1), func(t *testing.T) {
			if got := storedVersion(t, old); got != int64(1) {
				t.Errorf("the old document's version is %v (%T); want 1", got, got)
			}
			if got := storedVersion(t, versioned); got != int64(5) {
				t.Errorf("the other document's version is %v; want 5, untouched", got)
			}
		})
	}
	s, err := mongo.Open(uri, "unversioned")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	t.Run("an update of the old post at version 1 gives it version 2", func(t *testing.T) {
		p, err := s.UpdatePost(t.Context(), old.Hex(), "alice", 1, store.Update{Title: new("after"), UpdatedAt: created.Add(time.Second)})
		if err != nil || p.Post.Version != 2 || storedVersion(t, old) != int64(2) {
			t.Errorf("UpdatePost = %+v, %v; want version 2 returned and stored", p, err)
		}
	})
}

func TestAnUnreachableDeploymentIsUnavailable(t *testing.T) {
	s, err := mongo.Open("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=200", "posts")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.GetPost(t.Context(), store.NewID(time.Now())); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("GetPost: error = %v; want ErrUnavailable", err)
	}
	if _, err := s.InsertPost(t.Context(), store.Post{ID: store.NewID(time.Now()), UserID: "a", Title: "t"}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("InsertPost: error = %v; want ErrUnavailable", err)
	}
	if err := s.Ping(t.Context()); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping: error = %v; want ErrUnavailable", err)
	}
}

// A call on an unreachable deployment fails within its own deadline even while another call,
// with a longer one, prepares a collection on first use: requests with a timeout of 300 ms
// waited 30 s for events.Follower's RecoverEvents to prepare posts (integration's
// TestHealthThroughCaddy).
func TestAFirstUseHoldsNoCallPastItsOwnDeadline(t *testing.T) {
	s, err := mongo.Open("mongodb://127.0.0.1:1/", "posts")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	long, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := s.ListPosts(long, store.Filter{Limit: 1})
		first <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); !s.Preparing(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first call did not start preparing the posts collection within 10s")
		}
	}
	short, cancelShort := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancelShort()
	if _, err := s.GetPost(short, store.NewID(time.Now())); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("GetPost: error = %v; want ErrUnavailable", err)
	}
	// The first call's server selection gives up after the driver's 30 s, or its cancel: it is
	// still preparing, unless GetPost waited for it.
	if !s.Preparing() {
		t.Error("GetPost with 300 ms answered once the first call had stopped preparing, not before")
	}
	select {
	case err := <-first:
		t.Fatalf("the first call, with a minute, ended (%v) before the one with 300 ms", err)
	default:
	}
	cancel()
	if err := <-first; !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("ListPosts, cancelled: error = %v; want ErrUnavailable", err)
	}
}

// Down is a server gone, not one that is slow: a command that outlasts its caller's deadline
// on a server that answers, late, leaves it up (the breaker's stall would open on a database
// that stalls for less than the operations' timeout: 3 of 330 writes answered 503 through a
// 2 s SIGSTOP in integration's TestTwoCaddiesRefuseNoWriteWhileTheDatabaseAnswers); a server
// that closes its connections is down.
func TestDownIsAServerGoneNotACommandPastItsDeadline(t *testing.T) {
	t.Parallel() // its cases run in parallel, on servers of their own
	for _, tc := range []struct {
		name     string
		gone     bool
		cancel   bool // the ping's caller gives up, rather than its deadline running out
		wantDown bool
	}{
		{"a ping that outlasts its deadline on a server that answers late leaves it up", false, false, false},
		{"a ping its caller gives up on while the server answers late leaves it up", false, true, false},
		{"a ping to a server that closed its connections says it is down", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each on a server of its own, waiting out delays
			server, err := mongotest.Start(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(server.Close)
			// Every command held 500 ms: a hello, then a ping, answered well within 10 s.
			addr := mongotest.ServeTCP(server.Socket, mongotest.DelayCommands(500*time.Millisecond, 500*time.Millisecond))
			s, err := mongo.Open("mongodb://"+addr+"/", fmt.Sprintf("down_%d", databases.Add(1)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			ping := func(d time.Duration) error {
				ctx, cancel := context.WithTimeout(t.Context(), d)
				defer cancel()
				return s.Ping(ctx)
			}
			if err := ping(10 * time.Second); err != nil {
				t.Fatal(err)
			}
			deadline := 100 * time.Millisecond
			if tc.gone {
				server.Close()
				deadline = 10 * time.Second
			}
			if tc.cancel {
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(deadline, cancel)
				if err := s.Ping(ctx); err == nil {
					t.Fatal("the ping its caller gave up on succeeded")
				}
			} else if err := ping(deadline); !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("the ping: %v; want store.ErrUnavailable", err)
			}
			if got := s.Down(); got != tc.wantDown {
				t.Errorf("Down() = %v; want %v", got, tc.wantDown)
			}
		})
	}
}

func TestOpenDoesNoIO(t *testing.T) {
	start := time.Now()
	s, err := mongo.Open("mongodb://db.invalid:27017/?serverSelectionTimeoutMS=60000", "posts")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if d := time.Since(start); !race.Enabled && d > time.Second {
		t.Errorf("Open and Close of an unreachable deployment took %v", d)
	}
	if _, err := mongo.Open("postgres://nope", "posts"); err == nil {
		t.Error("a URI that is not MongoDB's was accepted")
	}
}

func TestRedact(t *testing.T) {
	for uri, want := range map[string]string{
		"mongodb://user:p%40ss@db1:27017,db2:27017/posts?replicaSet=rs0":  "mongodb://db1:27017,db2:27017",
		"mongodb+srv://u:pass/with?odd@cluster0.example.net/?retryWrites": "mongodb+srv://cluster0.example.net",
		"mongodb://localhost": "mongodb://localhost",
		"not a uri":           "(not a URI)",
	} {
		if got := mongo.Redact(uri); got != want {
			t.Errorf("Redact(%q) = %q; want %q", uri, got, want)
		}
	}
}
