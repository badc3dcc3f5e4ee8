// Package mongo is the MongoDB store of caddy-posts, through mongo-driver v2: any deployment a
// mongodb:// or mongodb+srv:// URI names (standalone, replica set, sharded cluster), and any
// server that speaks its wire protocol (FerretDB in the tests).
package mongo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	xdriver "go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/store"
)

// The collections of a database.
const (
	PostsCollection = "posts"
	UsersCollection = "users"
)

// indexes serve the list queries: newest first (or, read backwards, oldest first), for one user,
// and for a search.
var indexes = []driver.IndexModel{
	{Keys: bson.D{{Key: "userId", Value: 1}, {Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}},
	{Keys: bson.D{{Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}},
	// The posts whose last write's event is not logged yet (events.go): sparse, so it holds
	// those few alone (FerretDB v1 ignores sparse, and scans).
	{Keys: bson.D{{Key: "ev.at", Value: 1}}, Options: options.Index().SetSparse(true)},
	// The ids of deleted posts kept until their idempotency keys expire (deleted.go), which the
	// sweep of expired keys finds: sparse, as the one above.
	{Keys: bson.D{{Key: "until", Value: 1}}, Options: options.Index().SetSparse(true)},
	termsIndex, // a search (search.go)
}

// Store is one database of a MongoDB deployment, through a pooled client of its own.
type Store struct {
	client   *driver.Client
	database string

	posts atomic.Pointer[driver.Collection] // set once the indexes are ensured
	users *driver.Collection
	// preparing holds a token while ensured prepares one of posts, keyRecords and
	// eventRecords: one prepare at a time.
	preparing chan struct{}
	closed    atomic.Bool

	// keyRecords is the collection of idempotency keys (idempotency.go), set once its index is
	// ensured.
	keyRecords atomic.Pointer[driver.Collection]

	// eventRecords is the events collection (events.go), set once its indexes are ensured.
	eventRecords atomic.Pointer[driver.Collection]
	// logKey is the event log's key once read (events.go, Key), and expired the latest cut of
	// its expiry this store knows of.
	logKey  atomic.Pointer[[]byte]
	expired atomic.Int64
	// origin names this store in the events it logs (events.go).
	origin string
	// now is the clock of the times the store writes: an event's, a marker's, a pending
	// event's. No wait is timed from them (waits.go); gaps times those of the log.
	now  func() time.Time
	gaps sightings
	// health is what the driver's monitors tell of the server (waits.go).
	health health
	// waits are the times of the event log the deployment set (waits.go).
	waits Waits

	// searchable says that every post has its terms, so that a search finds them all
	// (search.go): set by the first use that finds none without, or by the backfill once done.
	searchable atomic.Bool
	// logger logs the backfill's progress (search.go, SetLogger); nil logs nothing.
	logger *zap.Logger
	// life ends when the store closes: the backfill runs under it. background holds what runs
	// under it, which Close waits for.
	life       context.Context
	stop       context.CancelFunc
	background struct {
		sync.Mutex // held while starting one, and by Close, so that none starts after it
		running    sync.WaitGroup
	}
	// backfillRead, in tests, is called with each batch the backfill read, before it writes.
	backfillRead func(context.Context, []post)
}

// Open returns the store of database in the deployment that uri names. It does no I/O: the
// driver connects on first use, so a config can be provisioned without a reachable database.
// opts are applied after the URI and the store's own monitors (waits.go); a test that sets a
// command monitor with them replaces the store's.
func Open(uri, database string, opts ...*options.ClientOptions) (*Store, error) {
	s := &Store{database: database, now: time.Now, preparing: make(chan struct{}, 1)}
	client, err := Connect(uri, append([]*options.ClientOptions{s.health.options()}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("mongodb_uri: %w", err)
	}
	s.life, s.stop = context.WithCancel(context.Background())
	var origin [8]byte
	_, _ = rand.Read(origin[:]) // crypto/rand.Read never fails
	s.client, s.users, s.origin = client, client.Database(database).Collection(UsersCollection), hex.EncodeToString(origin[:])
	return s, nil
}

// driverGlobals guards what mongo-driver keeps in a package variable without a lock: its default
// HTTP client, which options.Client writes and Client.Disconnect reads (the race detector found
// one store opening while another closed, as a reload or two sites can do). Every client of the
// process is made and disconnected under it: through Connect and Disconnect.
var driverGlobals sync.Mutex

// Connect is the driver's Connect with the options of uri, then opts.
func Connect(uri string, opts ...*options.ClientOptions) (*driver.Client, error) {
	driverGlobals.Lock()
	defer driverGlobals.Unlock()
	return driver.Connect(append([]*options.ClientOptions{options.Client().ApplyURI(uri)}, opts...)...)
}

// Disconnect is client's Disconnect.
func Disconnect(client *driver.Client) error {
	driverGlobals.Lock()
	defer driverGlobals.Unlock()
	return client.Disconnect(context.Background())
}

// versionMissing selects the posts of earlier releases, which have no version; the first use of
// a store gives them version 1, which is what they read as (an update adding one to a missing
// version would make it 1 again). Run again, it finds none: it is idempotent, and works on
// FerretDB, which has no update pipelines.
var (
	versionMissing = bson.D{{Key: "version", Value: bson.D{{Key: "$exists", Value: false}}}}
	firstVersion   = bson.D{{Key: "$set", Value: bson.D{{Key: "version", Value: int64(1)}}}}
)

// collection returns the posts collection, ensuring the indexes and the posts' versions
// (versionMissing) on first use, and starting the backfill of their terms if one has none
// (startIndexing).
func (s *Store) collection(ctx context.Context) (*driver.Collection, error) {
	return s.ensured(ctx, &s.posts, PostsCollection, func(ctx context.Context, coll *driver.Collection) error {
		// One index per command: FerretDB 1.24 drops the connection when one createIndexes
		// names two indexes that both exist already. MongoDB treats an existing index as done.
		for _, index := range indexes {
			if err := createIndex(ctx, coll, index); err != nil {
				return fmt.Errorf("ensuring indexes: %w", err)
			}
		}
		if _, err := coll.UpdateMany(ctx, versionMissing, firstVersion); err != nil {
			return fmt.Errorf("giving the posts of earlier releases a version: %w", err)
		}
		return s.startIndexing(ctx, coll)
	})
}

// ensured returns the collection name, kept in ready once prepare (its indexes, a migration)
// has succeeded on it: on first use, and again on later calls until it succeeds. It keeps the
// collection: the driver allocates a Database and a Collection on every lookup, which no
// request should pay for. A call waits for another's prepare (preparing) only until its ctx
// ends, and then fails with ctx's error, which the caller classifies as store.ErrUnavailable:
// on an unreachable database, the first use of posts by events.Follower's RecoverEvents holds
// preparing for that call's timeout, 30 s, which requests with a timeout of 300 ms waited out.
func (s *Store) ensured(ctx context.Context, ready *atomic.Pointer[driver.Collection], name string, prepare func(context.Context, *driver.Collection) error) (*driver.Collection, error) {
	if coll := ready.Load(); coll != nil {
		return coll, nil
	}
	select {
	case s.preparing <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the collection %s to be prepared: %w", name, ctx.Err())
	}
	defer func() { <-s.preparing }()
	if coll := ready.Load(); coll != nil {
		return coll, nil
	}
	coll := s.client.Database(s.database).Collection(name)
	if err := prepare(ctx, coll); err != nil {
		return nil, err
	}
	ready.Store(coll)
	return coll, nil
}

// errNotImplemented is the code of a command error for an option the server lacks.
const errNotImplemented = 238

// createExpiryIndex creates index, a TTL index, or where the server has no TTL indexes
// (FerretDB v1) the same index without its expiry, which the sweeps that delete instead read.
func createExpiryIndex(ctx context.Context, coll *driver.Collection, index driver.IndexModel) error {
	err := createIndex(ctx, coll, index)
	if cmdErr, ok := errors.AsType[driver.CommandError](err); ok && cmdErr.Code == errNotImplemented {
		err = createIndex(ctx, coll, driver.IndexModel{Keys: index.Keys})
	}
	return err
}

// createIndex creates index on coll, handing the driver a copy of its options:
// IndexView.CreateMany adds the index's name to the options it is given, and the models
// (indexes, eventIndexes, expiryIndex) are shared by every store of the process, which first
// use at once (a data race, and options that grew by a name on every first use).
func createIndex(ctx context.Context, coll *driver.Collection, index driver.IndexModel) error {
	if index.Options != nil {
		index.Options = &options.IndexOptionsBuilder{Opts: slices.Clone(index.Options.Opts)}
	}
	_, err := coll.Indexes().CreateOne(ctx, index)
	return err
}

// Ping checks that the deployment answers.
func (s *Store) Ping(ctx context.Context) error {
	return s.classify(s.client.Ping(ctx, readpref.Primary()))
}

// Close stops the backfill (search.go) and disconnects the client. Calls in flight and after it
// fail with store.ErrUnavailable.
func (s *Store) Close() error {
	s.background.Lock()
	if s.closed.Swap(true) {
		s.background.Unlock()
		return nil
	}
	s.background.Unlock()
	s.stop()
	s.background.running.Wait()
	err := Disconnect(s.client)
	if errors.Is(err, driver.ErrClientDisconnected) {
		return nil
	}
	return err
}

// classify maps the driver's errors to store.ErrNotFound and store.ErrUnavailable, keeping the
// original in the chain for the log.
func (s *Store) classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, driver.ErrNoDocuments):
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	case driver.IsTimeout(err), driver.IsNetworkError(err), s.closed.Load(),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, driver.ErrClientDisconnected), errors.As(err, &topology.ServerSelectionError{}),
		// A connection pool cleared by another operation's network error: this operation was
		// not sent (it was a 500 until now: met when a connection drops under load).
		errors.As(err, new(xdriver.RetryablePoolError)):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// Redact returns uri without credentials or options, fit for a log line.
func Redact(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return "(not a URI)"
	}
	// User info first, up to the last @: a password may hold an unescaped / or ?.
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	return scheme + "://" + rest
}

var _ store.Store = (*Store)(nil)
