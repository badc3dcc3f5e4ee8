package sqlite

import (
	"context"
	"database/sql"
	"os"
	"time"

	"go.uber.org/zap"
)

// The write-ahead log's checkpoints. SQLite copies the log into the database (a checkpoint) in
// the commit that finds the log past 1,000 pages (wal_autocheckpoint), and that commit's writes
// wait for it: 17 to 24 ms once every few writes of large posts, measured beside a hundred
// resuming streams, and longer on a busy disk, as a checkpoint syncs the file twice. So the writer
// runs none (wal_autocheckpoint(0)): the checkpointer does, on a connection of its own, in
// PASSIVE mode, which waits for no writer or reader, at most once every checkpointGap while
// writes come (wrote tells it).
//
// A checkpoint starts the log over from its beginning only when no read is under way at the
// moment a write starts: under steady reads the log grows without end (244 MB after 50,000
// inserts beside four readers that never stop, in a test). So every checkpointEvery writes its
// size is looked at, and past walLimit it is checkpointed whole and truncated, by the write
// that found it so. That needs a moment when no read is in the log: the store's own reads are
// held back meanwhile (a truncation takes milliseconds), as SQLite alone would wait for a gap
// that a busy server never leaves. A reader in another process (a backup, the sqlite3 tool) can
// still hold it up: the truncation gives up after checkpointWait, and the next try waits until
// the log has grown by walLimit again, so writes are held once per walLimit of log at most.
const (
	checkpointGap   = 250 * time.Millisecond
	checkpointEvery = 256
	checkpointWait  = 250 * time.Millisecond
)

// walLimit is the log's size past which it is truncated; a variable for the gate's short test of
// the bound (SetWALLimit).
var walLimit int64 = 32 << 20

// checkpointer runs the log's checkpoints on a connection of its own (checkpointLoop).
type checkpointer struct {
	db      *sql.DB
	due     chan struct{} // holds a token once a write came after the last checkpoint began
	ctx     context.Context
	stop    context.CancelFunc // ends the loop, and the checkpoint under way
	stopped chan struct{}      // closed once the loop has ended; nil before it starts
}

// openCheckpointer opens the checkpointer's connection to the database at path. Its
// synchronous setting is NORMAL whatever Options.FullSync says: a checkpoint syncs the log
// before it and the database after it in both.
func openCheckpointer(path string) (*checkpointer, error) {
	db, err := sql.Open("sqlite", dsn(path, "deferred", "synchronous(NORMAL)"))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	ctx, stop := context.WithCancel(context.Background())
	return &checkpointer{db: db, due: make(chan struct{}, 1), ctx: ctx, stop: stop}, nil
}

// startCheckpointer starts the checkpointer of c, which close stops.
func (s *Store) startCheckpointer(c *conns) {
	c.checkpoints.stopped = make(chan struct{})
	go s.checkpointLoop(c)
}

// checkpointLoop checkpoints the log once a write has come after the last checkpoint, and
// checkpointGap after it at the soonest, until stopped.
func (s *Store) checkpointLoop(c *conns) {
	cp := c.checkpoints
	defer close(cp.stopped)
	gap := time.NewTimer(0)
	defer gap.Stop()
	for {
		select {
		case <-gap.C:
		case <-cp.ctx.Done():
			return
		}
		select {
		case <-cp.due:
		case <-cp.ctx.Done():
			return
		}
		gap.Reset(checkpointGap)
		c.checkpointing.Lock()
		_, err := cp.db.ExecContext(cp.ctx, "PRAGMA wal_checkpoint(PASSIVE)")
		c.checkpointing.Unlock()
		if err != nil && cp.ctx.Err() == nil {
			s.opts.Logger.Debug("the write-ahead log could not be checkpointed", zap.Error(err))
		}
	}
}

// close ends the checkpointer, the checkpoint under way with it, and waits for it.
func (cp *checkpointer) close() {
	cp.stop()
	if cp.stopped != nil {
		<-cp.stopped
	}
}

// connection is the checkpointer's connection, nil for none.
func (cp *checkpointer) connection() *sql.DB {
	if cp == nil {
		return nil
	}
	return cp.db
}

// wrote counts a successful write, tells the checkpointer, and keeps the log bounded.
func (s *Store) wrote(c *conns) {
	select {
	case c.checkpoints.due <- struct{}{}:
	default:
	}
	if c.writes.Add(1)%checkpointEvery != 0 {
		return
	}
	fi, err := os.Stat(c.wal)
	if err != nil || fi.Size() < c.walLimit.Load() || !c.checkpointing.TryLock() {
		return
	}
	defer c.checkpointing.Unlock()
	c.reading.Lock()
	defer c.reading.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), checkpointWait)
	defer cancel()
	var busy, logged, checkpointed int
	err = c.write.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &checkpointed)
	if err != nil || busy != 0 {
		c.walLimit.Store(fi.Size() + walLimit)
		s.opts.Logger.Debug("the write-ahead log could not be truncated yet", zap.Int64("bytes", fi.Size()), zap.Error(err))
		return
	}
	c.walLimit.Store(walLimit)
}
