package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"

	"github.com/postsedge/caddy-posts/store"
)

// state is what the file holds, as the last commit of this process left it, for the reads that
// need to know what their snapshot holds without reading it: the event log's last position,
// which a read notes (store.Seen), and whether words wait in post_words_due, which a search of
// the index alone would miss (searchRead). Only this process writes the file (its lock), and
// every transaction that writes posts commits through commit, so the two are those of the last
// commit, read in its transaction just before it.
//
// It is a sequence lock: seq is odd while a commit is under way. A read that loads an even seq
// before its statement and finds it unchanged after read a snapshot that holds every commit
// published before and none after (exact); one that overlapped a commit, or ran while the
// state is not known (a commit that failed), reads again in a transaction that reads its
// snapshot's state too (readAgain, searchAgain): at most one in a few under a steady stream of
// writes, as a commit takes a fraction of a read's time. Reading the state in every statement
// instead cost a quarter of a GET of one post (the two subqueries of lastPosition, 8 µs).
type state struct {
	// committing is held through a commit: the committer's, and a copy's (insertNew,
	// importFerretDB), which begins its transaction on the one writer as soon as tx.Commit
	// releases it, so that seq is odd exactly while one of them commits.
	committing sync.Mutex
	seq        atomic.Uint64
	known      atomic.Bool
	last       atomic.Int64
	due        atomic.Bool
}

// stateSQL reads the state of a snapshot: the log's last position, and whether words wait.
const stateSQL = `SELECT ` + lastPosition + `, EXISTS (SELECT 1 FROM post_words_due)`

// load sets st from the file that q reads, before any commit of this process.
func (st *state) load(ctx context.Context, q querier) error {
	var last int64
	var due bool
	if err := q.QueryRowContext(ctx, stateSQL).Scan(&last, &due); err != nil {
		return err
	}
	st.last.Store(last)
	st.due.Store(due)
	st.known.Store(true)
	return nil
}

// commit commits tx, a write transaction of c's, and publishes the state it leaves, with the
// posts it wrote, changed (the events it logged: the committer's c.changed), in the cache of posts.
func (st *state) commit(ctx context.Context, tx *sql.Tx, c *conns, changed []store.Event) error {
	var last int64
	var due bool
	if err := tx.StmtContext(ctx, c.stmt.writeState).QueryRowContext(ctx).Scan(&last, &due); err != nil {
		return err
	}
	st.committing.Lock()
	defer st.committing.Unlock()
	st.seq.Add(1)
	defer st.seq.Add(1)
	if err := tx.Commit(); err != nil {
		st.known.Store(false) // committed or not: the next commit tells
		c.cache.forget(changed)
		return err
	}
	c.cache.apply(changed)
	st.last.Store(last)
	st.due.Store(due)
	st.known.Store(true)
	return nil
}

// during runs read, a statement on a reader, and returns the state of the snapshot it read, and
// whether that is certain (no commit overlapped it, and the state was known).
func (st *state) during(read func() error) (last int64, due, exact bool, err error) {
	seq := st.seq.Load()
	exact = seq%2 == 0 && st.known.Load()
	last, due = st.last.Load(), st.due.Load()
	err = read()
	return last, due, exact && st.seq.Load() == seq, err
}

// snapshot begins a read transaction on c's readers whose first statement reads the state of
// its snapshot (stateSQL), which every later statement of the transaction reads too: for the
// reads that could not tell their state from during (readAgain, searchAgain). The caller ends
// tx (a Rollback: it writes nothing).
func snapshot(ctx context.Context, c *conns) (tx *sql.Tx, last int64, due bool, err error) {
	if tx, err = c.read.BeginTx(ctx, nil); err != nil {
		return nil, 0, false, err
	}
	if err = tx.StmtContext(ctx, c.stmt.readState).QueryRowContext(ctx).Scan(&last, &due); err != nil {
		_ = tx.Rollback()
		return nil, 0, false, err
	}
	return tx, last, due, nil
}
