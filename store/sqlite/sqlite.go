// Package sqlite is the embedded store of caddy-posts: one SQLite file, <dir>/posts.db, through
// modernc.org/sqlite (pure Go, no cgo). The file is in WAL mode with one writer connection and a
// pool of read-only connections, so reads never wait for writes and writes never fail on a busy
// database, and the writes waiting for the writer share a transaction (commit.go); both list
// orders have an index, so every query is O(log n) at any size.
//
// One process owns a data directory at a time: Open takes an exclusive lock on <dir>/posts.lock
// and fails when another process holds it.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	driver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/postsedge/caddy-posts/store"
)

// File names inside the data directory.
const (
	DatabaseFile = "posts.db"
	LockFile     = "posts.lock"
)

// Options tune a Store; the zero value is the default.
type Options struct {
	// FullSync makes every commit wait until the write-ahead log is on disk (synchronous=FULL),
	// so that a power loss loses no acknowledged write. By default (synchronous=NORMAL) an
	// acknowledged write survives a crash of the process, and a power loss may lose the writes
	// of the last moments.
	FullSync bool
	// Logger receives the store's few events (opened, closed). Default: none.
	Logger *zap.Logger
	// CacheSize bounds the memory of the cache of posts (postCache), in bytes. Default:
	// DefaultCacheSize.
	CacheSize int64
}

// Store is the embedded store of one data directory. New makes one without touching the disk;
// Open opens it (the first request opens it too, if nothing did before).
type Store struct {
	dir    string
	opts   Options
	mu     sync.Mutex // serializes Open and Close
	db     atomic.Pointer[conns]
	closed atomic.Bool
}

// conns are an open store's connections and prepared statements.
type conns struct {
	lock       *os.File
	wal        string        // the write-ahead log's path
	writes     atomic.Uint64 // successful writes, which call for a look at the log's size now and then
	walLimit   atomic.Int64  // the log's size past which it is truncated
	truncating sync.Mutex    // held by the write that truncates the log
	// reading is held shared by every read of the store, and exclusively while the log is
	// truncated, which cannot happen while any read is in the log (see wrote).
	reading sync.RWMutex
	write   *sql.DB // one connection: SQLite has one writer at a time anyway
	read    *sql.DB // query_only connections, as many as can usefully run at once
	stmt    statements
	keys    keyStatements // of idempotency keys (idempotency.go)
	logKey  []byte        // the event log's key (events.go), which never changes
	// committer runs the write transactions (commit.go); nil until the store is open.
	committer *committer
	// state is what the last commit left the file holding (state.go).
	state state
	// cache holds posts as the last commit left them (cache.go); changed are the events that the
	// committer's transaction under way has logged (logEvent), which its commit applies to it:
	// the committer's alone.
	cache   *postCache
	changed []store.Event
}

// New returns the store of dir, not yet open: it does no I/O, so a config can be provisioned
// (and `caddy validate` run) beside a live server on the same directory.
func New(dir string, opts Options) *Store {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Store{dir: dir, opts: opts}
}

// Open returns the store of dir, opened.
func Open(dir string, opts Options) (*Store, error) {
	s := New(dir, opts)
	if err := s.Open(); err != nil {
		return nil, err
	}
	return s, nil
}

// Dir is the store's data directory.
func (s *Store) Dir() string { return s.dir }

// Open creates the directory and the database if need be, locks the directory, and brings the
// schema up to date. It does nothing on an open store.
func (s *Store) Open() error {
	_, err := s.open()
	return err
}

func (s *Store) open() (*conns, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.db.Load(); c != nil {
		return c, nil
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("%w: the store is closed", store.ErrUnavailable)
	}
	c, err := openConns(s.dir, s.opts)
	if err != nil {
		return nil, fmt.Errorf("embedded store: %w", err)
	}
	s.startCommitter(c)
	s.db.Store(c)
	s.opts.Logger.Info("embedded store opened", zap.String("file", filepath.Join(s.dir, DatabaseFile)),
		zap.Int("schema_version", SchemaVersion), zap.Bool("full_sync", s.opts.FullSync))
	return c, nil
}

func openConns(dir string, opts Options) (_ *conns, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := refuseFerretDBFiles(dir); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	c := &conns{lock: lock, wal: filepath.Join(dir, DatabaseFile+"-wal"), cache: newPostCache(cacheSize(opts))}
	c.walLimit.Store(walLimit)
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	path := filepath.Join(dir, DatabaseFile)
	// The writer sets WAL mode (which the file keeps) before any reader opens it.
	if c.write, err = openDB(dsn(path, "immediate", "synchronous("+synchronous(opts.FullSync)+")", "journal_mode(WAL)",
		"journal_size_limit(16777216)")); err != nil {
		return nil, err
	}
	c.write.SetMaxOpenConns(1)
	c.write.SetMaxIdleConns(1)
	if err := migrate(context.Background(), c.write, opts.Logger); err != nil {
		return nil, err
	}
	if err := c.write.QueryRow(logKeySQL).Scan(&c.logKey); err != nil {
		return nil, fmt.Errorf("reading the event log's key: %w", err)
	}
	if err := c.state.load(context.Background(), c.write); err != nil {
		return nil, fmt.Errorf("reading the event log's last position: %w", err)
	}
	if c.read, err = openDB(dsn(path, "deferred", "query_only(1)")); err != nil {
		return nil, err
	}
	readers := max(4, 2*runtime.GOMAXPROCS(0))
	c.read.SetMaxOpenConns(readers)
	c.read.SetMaxIdleConns(readers)
	if err := c.stmt.prepare(c.read, c.write); err != nil {
		return nil, err
	}
	if err := c.keys.prepare(c.write); err != nil {
		return nil, err
	}
	return c, nil
}

// The write-ahead log is checkpointed into the database on every commit that finds it over 1,000
// pages (SQLite's wal_autocheckpoint), but it only starts over from its beginning when no read is
// under way at the moment a write starts: under steady reads it grows without end (244 MB after
// 50,000 inserts beside four readers that never stop, in a test). So every
// checkpointEvery writes its size is looked at, and past walLimit it is truncated: a passive
// checkpoint first copies what it can into the database, with its fsyncs, while the reads go on
// (it waits for no reader, and an interrupted one would lose its copy, so it has no deadline);
// then the store's own reads are held back for the truncation, which needs a moment when no read
// is in the log, as SQLite alone would wait for a gap that a busy server never leaves. A reader
// in another process (a backup, the sqlite3 tool) can still hold it up: the truncation gives up
// after checkpointWait, and the next try waits until the log has grown by walLimit again, so
// reads are held once per walLimit of log at most.
const (
	checkpointEvery = 256
	checkpointWait  = 250 * time.Millisecond
)

// walLimit is the log's size past which it is truncated; a variable for the gate's short test of
// the bound (SetWALLimit).
var walLimit int64 = 32 << 20

// wrote counts a successful write and keeps the log bounded.
func (s *Store) wrote(c *conns) {
	if c.writes.Add(1)%checkpointEvery != 0 {
		return
	}
	fi, err := os.Stat(c.wal)
	if err != nil || fi.Size() < c.walLimit.Load() || !c.truncating.TryLock() {
		return
	}
	defer c.truncating.Unlock()
	var busy, logged, checkpointed int
	// Its failure leaves the truncation more to copy, and nothing else.
	_ = c.write.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logged, &checkpointed)
	c.reading.Lock()
	defer c.reading.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), checkpointWait)
	defer cancel()
	err = c.write.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &checkpointed)
	if truncated(c.wal) {
		// Done, though a truncation that ends past the deadline answers its error all the
		// same (the driver looks at the context once the statement is done): taken for a
		// failure, it would let the log grow by walLimit more before the next try.
		err, busy = nil, 0
	}
	if err != nil || busy != 0 {
		c.walLimit.Store(fi.Size() + walLimit)
		s.opts.Logger.Debug("the write-ahead log could not be truncated yet", zap.Int64("bytes", fi.Size()), zap.Error(err))
		return
	}
	c.walLimit.Store(walLimit)
}

// truncated says whether the write-ahead log at path is empty: a truncating checkpoint's work,
// as no write comes between it and this look (Store.wrote runs between transactions).
func truncated(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() == 0
}

// dsn is the driver's name of the file at path with the pragmas every connection runs. Each
// connection may cache 16 MB of pages (SQLite's default is 2 MB; PocketBase sets 32 MB): the
// connections of a process share one page cache, so a store's random reads would otherwise push
// out the pages its writer keeps using (with 2 MB, a POST cost 18 µs more in re-reading them).
func dsn(path, txlock string, pragmas ...string) string {
	q := url.Values{"_txlock": {txlock}}
	for _, p := range append([]string{"busy_timeout(5000)", "cache_size(-16000)", "foreign_keys(1)", "temp_store(MEMORY)"}, pragmas...) {
		q.Add("_pragma", p)
	}
	return (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String()
}

func (c *conns) close() error {
	var errs []error
	if c.committer != nil {
		c.committer.close() // after the transaction under way
	}
	c.stmt.close()
	c.keys.close()
	c.cache.drop()
	// Readers first: the writer's close then checkpoints the log into the file and removes it.
	for _, db := range []*sql.DB{c.read, c.write} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	if c.lock != nil {
		errs = append(errs, c.lock.Close()) // releases the lock
	}
	return errors.Join(errs...)
}

// SetFullSync changes Options.FullSync of the open store (and of its next opening).
func (s *Store) SetFullSync(full bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.FullSync = full
	c := s.db.Load()
	if c == nil {
		return nil
	}
	_, err := c.write.Exec("PRAGMA synchronous = " + synchronous(full))
	return err
}

// SetCacheSize changes Options.CacheSize of the open store (and of its next opening).
func (s *Store) SetCacheSize(size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.CacheSize = size
	if c := s.db.Load(); c != nil {
		c.cache.setLimit(cacheSize(s.opts))
	}
}

// cacheSize is the bound of the cache of posts that opts set.
func cacheSize(opts Options) int64 {
	if opts.CacheSize > 0 {
		return min(opts.CacheSize, MaxCacheSize)
	}
	return DefaultCacheSize
}

// synchronous is SQLite's synchronous setting for Options.FullSync.
func synchronous(full bool) string {
	if full {
		return "FULL"
	}
	return "NORMAL"
}

// Close closes the connections and releases the directory's lock. Calls in flight and after it
// fail with ErrUnavailable.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed.Store(true)
	c := s.db.Swap(nil)
	if c == nil {
		return nil
	}
	err := c.close()
	s.opts.Logger.Info("embedded store closed", zap.String("data_dir", s.dir))
	return err
}

// conns returns the open store's connections, opening it if nothing did yet.
func (s *Store) conns() (*conns, error) {
	if c := s.db.Load(); c != nil {
		return c, nil
	}
	c, err := s.open()
	if err != nil && !errors.Is(err, store.ErrUnavailable) {
		err = fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return c, err
}

// reading returns the open store's connections for a read, and the function that ends the
// read: every read holds conns.reading, so a truncation of the log can wait for none.
func (s *Store) reading() (*conns, func(), error) {
	c, err := s.conns()
	if err != nil {
		return nil, nil, err
	}
	c.reading.RLock()
	return c, c.reading.RUnlock, nil
}

// classify maps the driver's errors to store.ErrNotFound and store.ErrUnavailable, keeping the
// original in the chain for the log.
func (s *Store) classify(err error) error {
	var sqliteErr *driver.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrNotFound):
		return err
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, sql.ErrConnDone), s.closed.Load():
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	case errors.As(err, &sqliteErr):
		switch sqliteErr.Code() & 0xff {
		case sqlite3.SQLITE_INTERRUPT, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR,
			sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_READONLY:
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
	}
	return err
}

// Ping checks that the database answers a query.
func (s *Store) Ping(ctx context.Context) error {
	c, done, err := s.reading()
	if err != nil {
		return err
	}
	defer done()
	_, err = schemaVersion(ctx, c.read)
	return s.classify(err)
}

var _ store.Store = (*Store)(nil)
