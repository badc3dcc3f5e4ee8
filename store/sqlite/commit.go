package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/spans"
	"github.com/postsedge/caddy-posts/store"
)

// Group commit: the store's write transactions (a post and its event, an update and its event,
// a deletion and its event, an idempotency key's) go to one goroutine, the committer, which runs
// the writes waiting together in one SQLite transaction. The writer is one connection, so the
// writes are serial anyway, and what the profile of POST /posts shows in an insert with its
// event is mostly what a transaction pays once: the pages of the write-ahead log written at its
// commit (one pwrite each, 6.4 pages for a post and its event), BEGIN and COMMIT, and the
// goroutines that take turns while the writer is held (under load, a turn waits for a core).
// Writes that arrive while a transaction commits share the next one; a write alone is a
// transaction of its own, as before, so a lone client waits no longer. Each write still commits
// with its event or not at all, and the writes of a transaction are run in the order they came.
//
// Each write of a shared transaction runs in a SAVEPOINT of its own (together): a write that
// fails on its own (no post to update, someone else's, another version, an id taken) is rolled
// back to it, answers its own error and leaves the others to commit, so that no caller's failing
// writes can make the others run again one transaction each. Its event's position, taken in the
// savepoint, is rolled back with it and given to the next write: the log stays one run of
// positions. Only a failure of the transaction itself (BEGIN, COMMIT, a savepoint's statement,
// or an error of the database's, store.ErrUnavailable's kind, which may have rolled back the
// whole transaction) makes each of its writes run again alone.
const (
	// maxBatch bounds the writes of one transaction: its time, and the work run again when
	// the transaction fails.
	maxBatch = 64
	// queued is how many writes may wait for the committer; past it, a write waits to be
	// queued (within its context).
	queued = 1024
)

// write is one transaction's work, waiting for the committer (Store.commitLoop).
type write struct {
	ctx context.Context
	do  func(context.Context, *sql.Tx, *conns) error
	// index, set on a search's write and on the committer's idle turn's, makes its transaction
	// index every word that waits (commitIndexing).
	index bool
	state atomic.Int32 // waiting, then taken by the committer or abandoned by its caller
	err   error        // set before done is closed
	done  chan struct{}
}

// The states of a write.
const (
	waiting int32 = iota
	taken
	abandoned
)

// committer is the goroutine that runs the writes, and its queue.
type committer struct {
	queue   chan *write
	stop    chan struct{} // closed to end the committer
	stopped chan struct{} // closed once it has ended; every write it took is done by then
	// transactions counts the transactions begun, for the tests that measure how many writes
	// share one.
	transactions atomic.Uint64
	// unindexed counts the writes committed since the last transaction that indexed the words
	// of posts (indexWords), by the committer alone; behind is set, before the commit of a
	// transaction that leaves its words unindexed, until one that indexed them all has
	// committed: a search that finds it set has them indexed first (Store.ListPosts).
	unindexed int
	behind    atomic.Bool
	// deferred counts the commits that left words unindexed, and merges the steps of
	// mergeWords, for the tests and benchmarks that need them or wait for them.
	deferred, merges atomic.Uint64
}

// errClosed fails the writes of a store closed while they waited.
var errClosed = fmt.Errorf("%w: the store is closed", store.ErrUnavailable)

// startCommitter starts the committer of c, which close stops.
func (s *Store) startCommitter(c *conns) {
	c.committer = &committer{queue: make(chan *write, queued), stop: make(chan struct{}), stopped: make(chan struct{})}
	c.committer.behind.Store(true) // the file may hold words that an earlier process left unindexed
	go s.commitLoop(c)
}

// close ends the committer after the transaction under way, and waits for it.
func (cm *committer) close() {
	close(cm.stop)
	<-cm.stopped
}

// commitLoop takes the writes waiting, up to maxBatch, and commits them, until stopped. Once
// the writes pause for mergePause, it merges the segments of the search's index a step at a
// time (mergeWords), between writes, until they are merged, resting mergeRest times as long as
// each step took before the next: merging the index of a bulk load or of a burst of writes takes
// a fifth of a core at most, and leaves the rest to the requests (and to the merges' lock, to
// another process that writes the file, as bench/bare does beside Caddy).
func (s *Store) commitLoop(c *conns) {
	cm := c.committer
	defer close(cm.stopped)
	batch := make([]*write, 0, maxBatch)
	merge := time.NewTimer(mergePause) // the store just opened may hold a migration's segments
	defer merge.Stop()
	for {
		select {
		case w := <-cm.queue:
			batch = append(batch[:0], w)
		case <-cm.stop:
			return
		case <-merge.C:
			if len(cm.queue) > 0 {
				continue // the writes first; the timer is set again after them
			}
			if cm.behind.Load() { // words left unindexed: a transaction alone indexes them
				w := indexing(context.Background())
				s.commit(c, []*write{w})
				if w.err != nil {
					s.opts.Logger.Debug("indexing the words of the posts written", zap.Error(w.err))
					merge.Reset(mergeRetry)
				} else {
					merge.Reset(mergePause)
				}
				continue
			}
			began := time.Now()
			cm.merges.Add(1)
			switch merged, err := s.mergeWords(c); {
			case err != nil:
				s.opts.Logger.Debug("merging the search index's segments", zap.Error(err))
				merge.Reset(mergeRetry)
			case merged:
				merge.Reset(mergeRest * time.Since(began)) // more to merge
			}
			continue
		}
	more:
		for len(batch) < maxBatch {
			select {
			case w := <-cm.queue:
				batch = append(batch, w)
			default:
				break more
			}
		}
		s.commit(c, batch)
		clear(batch) // no write is kept alive by the slice
		merge.Reset(mergePause)
	}
}

// commit runs the writes whose callers still wait: together in one transaction, or, if the
// transaction fails and they were more than one, each in its own, as the failure may be one
// write's (a statement that failed with the database's error) and each write must have its own
// outcome.
func (s *Store) commit(c *conns, batch []*write) {
	ws := batch[:0:0]
	for _, w := range batch {
		if w.state.CompareAndSwap(waiting, taken) {
			ws = append(ws, w)
		}
	}
	err := s.together(c, ws)
	for i, w := range ws {
		switch {
		case err == nil:
		case len(ws) == 1:
			w.err = err
		default:
			if err := s.together(c, ws[i:i+1]); err != nil {
				w.err = err
			}
		}
		if err == nil && len(ws) > 1 { // its span shows the transaction it shared, as a batch of writes
			spans.Current(w.ctx).Int("db.operation.batch.size", int64(len(ws)))
		}
		close(w.done) // before wrote, whose truncation of the log its caller need not wait for
		if w.err == nil {
			s.wrote(c)
		}
	}
}

// together runs ws in one transaction, each of several in a savepoint of its own (see above),
// and returns the transaction's error: nil once it has committed, with the error of each write
// that failed on its own (and was rolled back alone) in its err. A write alone needs no
// savepoint: its error is the transaction's, which is rolled back.
//
// A write's caller that gives up once the committer has taken it ends neither the transaction
// nor the write's statements (their contexts keep its values, not its end): the others' work is
// not undone for it, and the statements of a write take microseconds, with no context for the
// driver to watch (a goroutine a statement). BEGIN waits for SQLite's lock only if another
// process holds it (a backup, the sqlite3 tool): that wait, and the transaction, end when the
// last of ws gives up (allDone), so that its callers get their 503 at their deadline, or at
// once when they are cancelled, rather than at busy_timeout's.
func (s *Store) together(c *conns, ws []*write) error {
	if len(ws) == 0 {
		return nil
	}
	for _, w := range ws {
		w.err = nil
	}
	ctx, cancel := allDone(ws)
	defer cancel()
	defer func() {
		clear(c.changed) // no post is kept alive by it
		c.changed = c.changed[:0]
	}()
	c.committer.transactions.Add(1)
	tx, err := c.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// The savepoints' statements, and indexWords's, have no context to watch.
	bg := context.Background()
	if len(ws) == 1 {
		if err := ws[0].do(context.WithoutCancel(ws[0].ctx), tx, c); err != nil {
			return err
		}
		return s.commitIndexing(tx, c, ws)
	}
	savepoint, rollbackTo, release := tx.StmtContext(bg, c.stmt.savepoint), tx.StmtContext(bg, c.stmt.rollbackTo), tx.StmtContext(bg, c.stmt.release)
	for _, w := range ws {
		if _, err := savepoint.ExecContext(bg); err != nil {
			return err
		}
		changed := len(c.changed)
		if w.err = w.do(context.WithoutCancel(w.ctx), tx, c); w.err != nil {
			if s.failsTransaction(w.err) {
				return w.err
			}
			if _, err := rollbackTo.ExecContext(bg); err != nil {
				return err
			}
			c.changed = c.changed[:changed] // its events are rolled back with it
		}
		if _, err := release.ExecContext(bg); err != nil {
			return err
		}
	}
	return s.commitIndexing(tx, c, ws)
}

// maxUnindexed bounds the writes whose words may wait to be indexed (commitIndexing): the
// size of the batch that indexes them.
const maxUnindexed = 512

// commitIndexing commits tx, of the writes ws, and indexes in it the words of the posts written
// since the last transaction that did (indexWords) once maxUnindexed writes' words wait, or
// when one of ws asks for it (indexing); until then they wait, for the committer's next idle
// turn (commitLoop, after mergePause) or a search, whichever comes first. FTS5 writes a segment of its index at every commit that gave
// it words, at a cost that is mostly the commit's rather than the words' (at 200,000 posts, 14
// posts' words added 300 µs to their transaction, 100 posts' 700 µs), and the merges of those
// segments follow: so the index takes the words of many transactions at once, as the group
// commit takes many writes. A search never reads the index behind a write that has returned:
// behind is set before the commit of a transaction that leaves words unindexed, and cleared
// after one that indexed them all has committed, and a search that finds it set has them
// indexed before it reads (Store.ListPosts).
func (s *Store) commitIndexing(tx *sql.Tx, c *conns, ws []*write) error {
	cm := c.committer
	cm.unindexed += len(ws)
	if cm.unindexed < maxUnindexed && !slices.ContainsFunc(ws, func(w *write) bool { return w.index }) {
		cm.behind.Store(true)
		cm.deferred.Add(1)
		return c.state.commit(context.Background(), tx, c, c.changed)
	}
	if err := indexWords(context.Background(), tx, c); err != nil {
		return err
	}
	if err := c.state.commit(context.Background(), tx, c, c.changed); err != nil {
		return err
	}
	cm.unindexed = 0
	cm.behind.Store(false)
	return nil
}

// failsTransaction says whether err, a write's, is the failure of the transaction it runs in
// rather than the write's own: the database's error (busy, full, I/O, interrupted, closed), after
// which SQLite may have rolled back the whole transaction, or the transaction already ended
// (its context ended).
func (s *Store) failsTransaction(err error) bool {
	return errors.Is(s.classify(err), store.ErrUnavailable) || errors.Is(err, sql.ErrTxDone)
}

// allDone is a context that ends once the context of every one of ws has ended (by its deadline
// or its cancellation), or never if one of them never ends: a write alone's own.
func allDone(ws []*write) (context.Context, context.CancelFunc) {
	if len(ws) == 1 {
		return ws[0].ctx, func() {}
	}
	for _, w := range ws {
		if w.ctx.Done() == nil {
			return context.Background(), func() {}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var left atomic.Int64
	left.Store(int64(len(ws)))
	stops := make([]func() bool, len(ws))
	for i, w := range ws {
		stops[i] = context.AfterFunc(w.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// indexing is a write that does nothing but have its transaction index every word that waits.
func indexing(ctx context.Context) *write {
	return &write{ctx: ctx, do: func(context.Context, *sql.Tx, *conns) error { return nil }, index: true, done: make(chan struct{})}
}

// inTransaction runs do in a transaction of the writer of the open store, committed if do
// succeeds, possibly with other writes (see above), and undone if it fails: do must read and
// write through tx only, in the context it is given, and set its results anew each time it runs
// (it runs again if the transaction it shared failed). ctx bounds the wait for the committer; once the committer has
// taken the write, it runs to its end.
func (s *Store) inTransaction(ctx context.Context, do func(context.Context, *sql.Tx, *conns) error) error {
	return s.run(ctx, &write{ctx: ctx, do: do, done: make(chan struct{})})
}

// run has the committer run w, as inTransaction says.
func (s *Store) run(ctx context.Context, w *write) error {
	c, err := s.conns()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return s.classify(err)
	}
	cm := c.committer
	select {
	case cm.queue <- w:
	case <-ctx.Done():
		return s.classify(ctx.Err())
	case <-cm.stopped:
		return errClosed
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		if w.state.CompareAndSwap(waiting, abandoned) {
			return s.classify(ctx.Err())
		}
		// Taken: it runs to its end, a moment away, and its outcome is the caller's.
		<-w.done
	case <-cm.stopped:
		// The committer closes done of every write it took before it stops.
		select {
		case <-w.done:
		default:
			return errClosed
		}
	}
	return s.classify(w.err)
}
