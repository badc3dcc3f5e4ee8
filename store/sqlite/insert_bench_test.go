//go:build !race && unix

// What an insert with its event costs, and where: the store's InsertPost against a bare INSERT
// (what bench/bare does) and against variants of the schema and of the calls, each on a fresh
// file with the store's settings, one insert at a time and from 16 goroutines at once. Run with
//
//	go test -run '^$' -bench InsertPost -benchtime 1000x -count 20 ./store/sqlite/ | tee new.txt; benchstat new.txt
//
// and add -cpuprofile to see where a variant's time goes (go tool pprof -top).

package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// The event log's table as variants of the schema: migration 4's, with AUTOINCREMENT and the
// index on at, and without either (a plain rowid alias, as migration 6's, whose store gives the
// position itself, after event_log.floor, where the variants leave it to SQLite).
const (
	autoincrement = " AUTOINCREMENT"
	eventsAtIndex = "CREATE INDEX events_at ON events (at);"
	// The event's INSERT of the variants: its position is SQLite's, AUTOINCREMENT's or the one
	// after the largest (the store's logEventSQL, migration 4's before migration 6).
	variantEventSQL = `INSERT INTO events (at, kind, post_id, user_id, title, body, created_at, updated_at, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING position`
	// A trigger that logs a created post's event in the INSERT of the post itself.
	eventsTrigger = `CREATE TRIGGER posts_log AFTER INSERT ON posts BEGIN
		INSERT INTO events (at, kind, post_id, user_id, title, body, created_at, updated_at, version)
		VALUES (NEW.created_at, 'created', NEW.id, NEW.user_id, NEW.title, NEW.body, NEW.created_at, NEW.updated_at, NEW.version);
	END;`
	// The trigger's INSERT returns the position it logged: RETURNING is evaluated before the AFTER
	// trigger, so it reads the last position before it (a rowid alias gives the next one).
	insertLoggedSQL = insertPostSQL + ` RETURNING coalesce((SELECT max(position) FROM events), 0) + 1`
)

// insertSchema is the schema of a variant: the posts of migrations 1 and 2, and the events of
// migration 4 with or without its AUTOINCREMENT and its index.
func insertSchema(withAutoincrement, withAtIndex, trigger bool) string {
	events := migrations[3]
	if !withAutoincrement {
		events = strings.Replace(events, autoincrement, "", 1)
	}
	if !withAtIndex {
		events = strings.Replace(events, eventsAtIndex, "", 1)
	}
	s := migrations[0] + migrations[1] + events
	if trigger {
		s += eventsTrigger
	}
	return s
}

// benchFile opens a fresh file of the schema with the store's writer settings; txlock is the
// driver's BEGIN (immediate, as the store's, or deferred).
func benchFile(b *testing.B, schema, txlock string) *sql.DB {
	b.Helper()
	db, err := sql.Open("sqlite", dsn(filepath.Join(b.TempDir(), DatabaseFile), txlock, "synchronous(NORMAL)", "journal_mode(WAL)",
		"journal_size_limit(16777216)"))
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	b.Cleanup(func() { db.Close() })
	if _, err := db.Exec(schema); err != nil {
		b.Fatal(err)
	}
	return db
}

func prepared(b *testing.B, db *sql.DB, query string) *sql.Stmt {
	b.Helper()
	st, err := db.Prepare(query)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

var benchBody = "a body of a post, of a typical length for a short note that someone wrote"

// benchPost is a new post, made now.
func benchPost() store.Post {
	t := time.Now()
	return store.Post{ID: store.NewID(t), UserID: "bench", Title: "a post", Body: &benchBody, CreatedAt: t, UpdatedAt: t, Version: 1}
}

// eventArgs are the values of variantEventSQL for a post's creation.
func eventArgs(p store.Post) []any {
	return []any{millis(time.Now()), store.EventCreated, p.ID, p.UserID, p.Title, orNil(p.Body), millis(p.CreatedAt), millis(p.UpdatedAt), p.Version}
}

// An insertVariant is a way of inserting a post and its event: setup makes its file and returns
// the connection that runs its pragmas and one insert.
type insertVariant struct {
	name  string
	setup func(b *testing.B, ctx context.Context) (pragmas pragmaRunner, insert func() error)
}

// pragmaRunner is a *sql.DB or a *sql.Conn.
type pragmaRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// BenchmarkInsertPost compares the ways of inserting a post and its event, one after the other,
// as a lone client's writes are, each under a context with a deadline, as a request's (the
// driver watches it during each statement). Each reports, besides its time, the pages it writes to the write-ahead log per insert (frames/op),
// counted over 100 inserts before the timed ones (a page is a pwrite(2) of 4 KiB at the commit,
// which the CPU profile shows as the largest part of an insert's time), and the CPU time of
// the process per insert (cpu-ns/op).
func BenchmarkInsertPost(b *testing.B) {
	for _, v := range insertVariants() {
		b.Run(v.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			pragmas, insert := v.setup(b, ctx)
			frames := framesPerInsert(b, ctx, pragmas, insert, 1)
			began := cpuTime()
			for b.Loop() {
				if err := insert(); err != nil {
					b.Fatal(err)
				}
			}
			// After the loop, which resets the metrics.
			b.ReportMetric(frames, "frames/op")
			b.ReportMetric(float64((cpuTime()-began).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkInsertPostConcurrently inserts from 16 goroutines at once, as the 16 connections of
// bench/run's row 4 do, on the variants that may be called concurrently: there the store's
// writes share transactions (commit.go), where the others take turns on the one writer
// (tx-event/autoincrement+at-index is the store's InsertPost before commit.go: a transaction
// per write).
func BenchmarkInsertPostConcurrently(b *testing.B) {
	const writers = 16
	for _, v := range insertVariants() {
		if !slices.Contains([]string{"store", "bare", "tx-post-only", "tx-event/autoincrement+at-index", "tx-event/rowid", "trigger/rowid"}, v.name) {
			continue
		}
		b.Run(v.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			pragmas, insert := v.setup(b, ctx)
			frames := framesPerInsert(b, ctx, pragmas, insert, writers)
			b.SetParallelism(max(1, writers/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			began := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := insert(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(frames, "frames/op")
			b.ReportMetric(float64((cpuTime()-began).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time the process has used, in user and system mode, all threads (getrusage,
// hence unix only): besides
// the wall time of an insert, what it takes from the other work of a server on few cores (the
// goroutines the driver starts to watch a context run on another thread).
func cpuTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// framesPerInsert counts the frames that 400 inserts (100 of one writer) from writers goroutines
// append to the write-ahead log, with the automatic checkpoints off meanwhile (and the log kept
// under the store's walLimit, past which its writes truncate it); then it inserts until the log
// has started over a few times, so that the timed inserts find it at its steady size (a log
// that grows costs more per page than one written over).
func framesPerInsert(b *testing.B, ctx context.Context, db pragmaRunner, insert func() error, writers int) float64 {
	n := 100
	if writers > 1 {
		n = 400 / writers * writers
	}
	var busy, frames, done int
	// A PASSIVE checkpoint tells the frames in the log (a TRUNCATE one tells 0, having emptied it).
	checkpoint := func(mode string) {
		if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &frames, &done); err != nil || busy != 0 {
			b.Fatalf("checkpoint: busy %d, %v", busy, err)
		}
	}
	inserts := func(n int) {
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for range n / writers {
					if err := insert(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}
	}
	if _, err := db.ExecContext(ctx, "PRAGMA wal_autocheckpoint = 0"); err != nil {
		b.Fatal(err)
	}
	checkpoint("TRUNCATE")
	inserts(n)
	checkpoint("PASSIVE")
	perInsert := float64(frames) / float64(n)
	if _, err := db.ExecContext(ctx, "PRAGMA wal_autocheckpoint = 1000"); err != nil {
		b.Fatal(err)
	}
	inserts(int(3000 / perInsert))
	return perInsert
}

// insertVariants are the variants compared: the store's InsertPost, a bare INSERT (what
// bench/bare does), the post alone in the store's kind of transaction, and the post and its
// event by the store's calls on each schema of the events, with BEGIN DEFERRED, with a context
// the driver need not watch, in one INSERT whose trigger logs the event, and on the driver's
// connection without database/sql.
func insertVariants() []insertVariant {
	vs := []insertVariant{
		{"store", storeVariant},
		// One INSERT, its own transaction.
		{"bare", func(b *testing.B, ctx context.Context) (pragmaRunner, func() error) {
			db := benchFile(b, insertSchema(false, false, false), "immediate")
			ins := prepared(b, db, insertPostSQL)
			return db, func() error { _, err := ins.ExecContext(ctx, postArgs(benchPost())...); return err }
		}},
		// The store's calls without the event: what the store would cost without the log.
		{"tx-post-only", func(b *testing.B, ctx context.Context) (pragmaRunner, func() error) {
			db := benchFile(b, insertSchema(false, false, false), "immediate")
			ins := prepared(b, db, insertPostSQL)
			return db, func() error {
				return inTx(ctx, db, func(tx *sql.Tx) error {
					_, err := tx.StmtContext(ctx, ins).ExecContext(ctx, postArgs(benchPost())...)
					return err
				})
			}
		}},
	}
	// The post and its event by the store's calls (BEGIN, INSERT, INSERT … RETURNING, COMMIT).
	txEvent := func(name string, autoincrement, atIndex bool, txlock string, background bool) insertVariant {
		return insertVariant{name, func(b *testing.B, ctx context.Context) (pragmaRunner, func() error) {
			db := benchFile(b, insertSchema(autoincrement, atIndex, false), txlock)
			ins, logged := prepared(b, db, insertPostSQL), prepared(b, db, variantEventSQL)
			if background {
				ctx = context.Background()
			}
			return db, func() error {
				return inTx(ctx, db, func(tx *sql.Tx) error {
					p := benchPost()
					if _, err := tx.StmtContext(ctx, ins).ExecContext(ctx, postArgs(p)...); err != nil {
						return err
					}
					var position int64
					return tx.StmtContext(ctx, logged).QueryRowContext(ctx, eventArgs(p)...).Scan(&position)
				})
			}
		}}
	}
	// One INSERT of the post, its own transaction, whose trigger logs the event.
	trigger := func(name string, autoincrement, atIndex bool) insertVariant {
		return insertVariant{name, func(b *testing.B, ctx context.Context) (pragmaRunner, func() error) {
			db := benchFile(b, insertSchema(autoincrement, atIndex, true), "immediate")
			ins := prepared(b, db, insertLoggedSQL)
			return db, func() error {
				var position int64
				return ins.QueryRowContext(ctx, postArgs(benchPost())...).Scan(&position)
			}
		}}
	}
	// The store's statements on the driver's connection, through database/sql's Conn.Raw only.
	raw := func(name string, autoincrement, atIndex bool) insertVariant {
		return insertVariant{name, func(b *testing.B, ctx context.Context) (pragmaRunner, func() error) {
			db := benchFile(b, insertSchema(autoincrement, atIndex, false), "immediate")
			conn, err := db.Conn(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { conn.Close() })
			var ins, logged driver.Stmt
			err = conn.Raw(func(dc any) (err error) {
				c := dc.(driver.ConnPrepareContext)
				if ins, err = c.PrepareContext(ctx, insertPostSQL); err != nil {
					return err
				}
				logged, err = c.PrepareContext(ctx, variantEventSQL)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			return conn, func() error {
				return conn.Raw(func(dc any) error { return rawInsert(ctx, dc.(driver.ConnBeginTx), ins, logged) })
			}
		}}
	}
	return append(vs,
		txEvent("tx-event/autoincrement+at-index", true, true, "immediate", false), // migration 4's schema
		txEvent("tx-event/autoincrement", true, false, "immediate", false),
		txEvent("tx-event/rowid+at-index", false, true, "immediate", false),
		txEvent("tx-event/rowid", false, false, "immediate", false),
		txEvent("tx-event/autoincrement+at-index+deferred", true, true, "deferred", false),
		txEvent("tx-event/autoincrement+at-index+background-context", true, true, "immediate", true),
		trigger("trigger/autoincrement+at-index", true, true),
		trigger("trigger/rowid", false, false),
		raw("raw-conn/autoincrement+at-index", true, true),
		raw("raw-conn/rowid", false, false),
	)
}

// storeVariant is the store's InsertPost on a new store.
func storeVariant(b *testing.B, ctx context.Context) (pragmaRunner, func() error) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	c, err := s.conns()
	if err != nil {
		b.Fatal(err)
	}
	return c.write, func() error { _, err := s.InsertPost(ctx, benchPost()); return err }
}

// rawInsert is the store's transaction on the driver's connection.
func rawInsert(ctx context.Context, c driver.ConnBeginTx, ins, logged driver.Stmt) error {
	tx, err := c.BeginTx(ctx, driver.TxOptions{})
	if err != nil {
		return err
	}
	p := benchPost()
	if _, err := ins.(driver.StmtExecContext).ExecContext(ctx, driverArgs(postArgs(p))); err != nil {
		tx.Rollback()
		return err
	}
	rows, err := logged.(driver.StmtQueryContext).QueryContext(ctx, driverArgs(eventArgs(p)))
	if err != nil {
		tx.Rollback()
		return err
	}
	row := make([]driver.Value, 1)
	err = rows.Next(row)
	rows.Close()
	if err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// inTx runs do in a transaction of db, committed if it succeeds.
func inTx(ctx context.Context, db *sql.DB, do func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := do(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// driverArgs are args as the driver takes them.
func driverArgs(args []any) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, a := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return out
}
