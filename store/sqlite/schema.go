package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"go.uber.org/zap"
)

// migrations take the database from one schema version to the next: migrations[i] from version
// i to i+1. The version is the file's PRAGMA user_version; a new file has 0. Append only: a
// released migration never changes.
var migrations = []string{
	// 1: posts and user profiles. Times are Unix milliseconds; ids are 24 hex characters.
	// WITHOUT ROWID keeps each table in one b-tree keyed by id. The two indexes are the two
	// orders of lists (newest first, and newest first of one user), so a page is an index range
	// scan of limit entries at any size.
	`CREATE TABLE posts (
		id         TEXT    NOT NULL PRIMARY KEY,
		user_id    TEXT    NOT NULL,
		title      TEXT    NOT NULL,
		body       TEXT,
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL
	) STRICT, WITHOUT ROWID;
	CREATE INDEX posts_newest ON posts (created_at DESC, id DESC);
	CREATE INDEX posts_user_newest ON posts (user_id, created_at DESC, id DESC);
	CREATE TABLE users (
		id         TEXT    NOT NULL PRIMARY KEY,
		name       TEXT,
		email      TEXT,
		updated_at INTEGER NOT NULL
	) STRICT, WITHOUT ROWID;`,
	// 2: the version of each post, which every update adds one to (an If-Match, an
	// expectedVersion). The posts stored before it have had no version to match: they start at 1.
	`ALTER TABLE posts ADD COLUMN version INTEGER NOT NULL DEFAULT 1;`,
	// 3: the records of idempotency keys (idempotency.go), one per user and key. A table with
	// rowids, not WITHOUT ROWID, as a record holds a response body that may be large; expiry
	// sweeps read the index on expires_at. status is 0 while the create is under way.
	`CREATE TABLE idempotency_keys (
		user_id         TEXT    NOT NULL,
		idempotency_key TEXT    NOT NULL,
		fingerprint     TEXT    NOT NULL,
		post_id         TEXT    NOT NULL,
		attempt         INTEGER NOT NULL,
		locked_until    INTEGER NOT NULL,
		created_at      INTEGER NOT NULL,
		expires_at      INTEGER NOT NULL,
		status          INTEGER NOT NULL,
		header          TEXT,
		body            BLOB,
		PRIMARY KEY (user_id, idempotency_key)
	) STRICT;
	CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);`,
	// 4: the event log (events.go): each write of a post logs its event in the same
	// transaction, at the next position. AUTOINCREMENT never gives a position twice, even once
	// the newest events have expired, so a reader's position stays valid; expiry reads the index
	// on at. The post's columns are as they are after the write; a deletion has no title.
	`CREATE TABLE events (
		position   INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
		at         INTEGER NOT NULL,
		kind       TEXT    NOT NULL,
		post_id    TEXT    NOT NULL,
		user_id    TEXT    NOT NULL,
		title      TEXT,
		body       TEXT,
		created_at INTEGER,
		updated_at INTEGER,
		version    INTEGER NOT NULL
	) STRICT;
	CREATE INDEX events_at ON events (at);`,
	// 5: the event log's key (events.go, Key): 16 random bytes made once with the log, which
	// sign the cursors of its positions. A file restored from a backup keeps its log, and so its
	// key.
	`CREATE TABLE event_log (key BLOB NOT NULL) STRICT;
	INSERT INTO event_log (key) VALUES (randomblob(16));`,
	// 6: the event log rebuilt with a plain rowid alias and no index on at: AUTOINCREMENT wrote
	// its sqlite_sequence row, and the index its page, at every write's commit, a third of the
	// pages a post and its event wrote (store/sqlite/insert_bench_test.go). A position is still
	// never given twice: event_log.floor is the last position given when this migration ran, and
	// expiry raises it to its cut before it deletes, so the next position (events.go) is after
	// both the last kept and floor, even once every event has expired. Expiry finds its cut by
	// time in the order of positions, which is the order of commits and of times (events.go).
	`ALTER TABLE event_log ADD COLUMN floor INTEGER NOT NULL DEFAULT 0;
	UPDATE event_log SET floor = coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0);
	CREATE TABLE events_rowid (
		position   INTEGER NOT NULL PRIMARY KEY,
		at         INTEGER NOT NULL,
		kind       TEXT    NOT NULL,
		post_id    TEXT    NOT NULL,
		user_id    TEXT    NOT NULL,
		title      TEXT,
		body       TEXT,
		created_at INTEGER,
		updated_at INTEGER,
		version    INTEGER NOT NULL
	) STRICT;
	INSERT INTO events_rowid SELECT position, at, kind, post_id, user_id, title, body, created_at, updated_at, version FROM events;
	DROP TABLE events;
	ALTER TABLE events_rowid RENAME TO events;`,
	// 7: the ids of deleted posts that an idempotency key reserved (posts.go, DeletePost), each
	// kept until the last of those keys expires, refused to an insert meanwhile; the index on
	// idempotency_keys.post_id that a delete finds those keys through, and the one on until that
	// the sweep of expired keys deletes the ids through.
	`CREATE TABLE deleted_posts (
		id    TEXT    NOT NULL PRIMARY KEY,
		until INTEGER NOT NULL
	) STRICT, WITHOUT ROWID;
	CREATE INDEX deleted_posts_until ON deleted_posts (until);
	CREATE INDEX idempotency_keys_post ON idempotency_keys (post_id);`,
	// 8: the search's index (search.go): post_rows gives each post its row id, in the order of
	// lists, and post_words holds the words of each row. A row id's millisecond is created_at
	// clamped to those a row id can hold (search.go, earliest and latest: 8796093022206 is
	// latest). The triggers write both in the
	// statement that writes the post: an insert takes the next row id of its millisecond, an
	// update of the title or body indexes the words again, a delete removes both. The posts
	// stored before get their row ids here, ranked by id within each millisecond, and their
	// words from fillWords, which logs its progress.
	`CREATE TABLE post_rows (
		row INTEGER NOT NULL PRIMARY KEY,
		id  TEXT    NOT NULL
	) STRICT;
	CREATE VIRTUAL TABLE post_words USING fts5(words, tokenize = 'ascii', prefix = '1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31', detail = 'none',
		content = '', contentless_delete = 1);
	INSERT INTO post_rows (row, id)
		SELECT ms * 1048576 + row_number() OVER (PARTITION BY ms ORDER BY created_at, id) - 1, id
		FROM (SELECT max(min(created_at, 8796093022206), -8796093022208) AS ms, created_at, id FROM posts);
	CREATE TRIGGER posts_insert_words AFTER INSERT ON posts BEGIN
		INSERT INTO post_rows (row, id)
			SELECT coalesce(max(row) + 1, max(min(new.created_at, 8796093022206), -8796093022208) * 1048576), new.id FROM post_rows
			WHERE row >= max(min(new.created_at, 8796093022206), -8796093022208) * 1048576 AND row < (max(min(new.created_at, 8796093022206), -8796093022208) + 1) * 1048576;
		INSERT INTO post_words (rowid, words) VALUES (last_insert_rowid(), ` + wordsFunction + `(new.user_id, new.title, new.body));
	END;
	CREATE TRIGGER posts_update_words AFTER UPDATE OF title, body ON posts
		WHEN new.title IS NOT old.title OR new.body IS NOT old.body BEGIN
		UPDATE post_words SET words = ` + wordsFunction + `(new.user_id, new.title, new.body) WHERE rowid = (SELECT row FROM post_rows
			WHERE row >= max(min(new.created_at, 8796093022206), -8796093022208) * 1048576 AND row < (max(min(new.created_at, 8796093022206), -8796093022208) + 1) * 1048576 AND id = new.id);
	END;
	CREATE TRIGGER posts_delete_words AFTER DELETE ON posts BEGIN
		DELETE FROM post_words WHERE rowid = (SELECT row FROM post_rows
			WHERE row >= max(min(old.created_at, 8796093022206), -8796093022208) * 1048576 AND row < (max(min(old.created_at, 8796093022206), -8796093022208) + 1) * 1048576 AND id = old.id);
		DELETE FROM post_rows WHERE row >= max(min(old.created_at, 8796093022206), -8796093022208) * 1048576 AND row < (max(min(old.created_at, 8796093022206), -8796093022208) + 1) * 1048576 AND id = old.id;
	END;`,
	// 9: the search's index is written once a transaction (search.go, indexWords): the
	// triggers of posts write post_rows in the statement that writes the post, and the words it
	// is to have in post_words in post_words_due, which indexWords empties (commit.go,
	// commitIndexing), the trigger of each of its rows writing it into post_words (a row of a post
	// indexed before is deleted first); an insert takes its row id in a VALUES, without the
	// temporary table an INSERT … SELECT from post_rows into itself needs. usermerge 2 lets
	// mergeWords merge every two segments of a level.
	`DROP TRIGGER posts_insert_words;
	DROP TRIGGER posts_update_words;
	DROP TRIGGER posts_delete_words;
	CREATE TABLE post_words_due (
		row     INTEGER NOT NULL PRIMARY KEY,
		words   TEXT,
		indexed INTEGER NOT NULL
	) STRICT;
	CREATE TRIGGER post_words_due_index BEFORE DELETE ON post_words_due BEGIN
		DELETE FROM post_words WHERE old.indexed AND rowid = old.row;
		INSERT INTO post_words (rowid, words) SELECT old.row, old.words WHERE old.words IS NOT NULL;
	END;
	CREATE TRIGGER posts_insert_words AFTER INSERT ON posts BEGIN
		INSERT INTO post_rows (row, id) VALUES (coalesce((SELECT max(row) + 1 FROM post_rows
			WHERE row >= max(min(new.created_at, 8796093022206), -8796093022208) * 1048576 AND row < (max(min(new.created_at, 8796093022206), -8796093022208) + 1) * 1048576),
			max(min(new.created_at, 8796093022206), -8796093022208) * 1048576), new.id);
		INSERT INTO post_words_due (row, words, indexed) VALUES (last_insert_rowid(), ` + wordsFunction + `(new.user_id, new.title, new.body), 0)
			ON CONFLICT (row) DO UPDATE SET words = excluded.words;
	END;
	CREATE TRIGGER posts_update_words AFTER UPDATE OF title, body ON posts
		WHEN new.title IS NOT old.title OR new.body IS NOT old.body BEGIN
		INSERT INTO post_words_due (row, words, indexed) SELECT row, ` + wordsFunction + `(new.user_id, new.title, new.body), 1 FROM post_rows
			WHERE row >= max(min(new.created_at, 8796093022206), -8796093022208) * 1048576 AND row < (max(min(new.created_at, 8796093022206), -8796093022208) + 1) * 1048576 AND id = new.id
			ON CONFLICT (row) DO UPDATE SET words = excluded.words;
	END;
	CREATE TRIGGER posts_delete_words AFTER DELETE ON posts BEGIN
		INSERT INTO post_words_due (row, words, indexed) SELECT row, NULL, 1 FROM post_rows
			WHERE row >= max(min(old.created_at, 8796093022206), -8796093022208) * 1048576 AND row < (max(min(old.created_at, 8796093022206), -8796093022208) + 1) * 1048576 AND id = old.id
			ON CONFLICT (row) DO UPDATE SET words = NULL;
		DELETE FROM post_rows WHERE row >= max(min(old.created_at, 8796093022206), -8796093022208) * 1048576 AND row < (max(min(old.created_at, 8796093022206), -8796093022208) + 1) * 1048576 AND id = old.id;
	END;
	INSERT INTO post_words (post_words, rank) VALUES ('usermerge', 2);`,
	// 10: the span of the write that logged an event, a W3C traceparent, when the write was
	// traced (store.Event.Trace); NULL otherwise. Adding a column rewrites no row.
	`ALTER TABLE events ADD COLUMN trace TEXT;`,
}

// fills are the steps of migrations that SQL alone cannot take: fills[v], when set, runs after
// migrations[v-1], in its transaction.
var fills = map[int]func(context.Context, *sql.Tx, *zap.Logger) error{8: fillWords}

// SchemaVersion is the schema version this build writes.
var SchemaVersion = len(migrations)

// migrate brings the schema of the database that db writes to SchemaVersion, in one transaction,
// and refuses a database from a newer build, which it could not read correctly.
func migrate(ctx context.Context, db *sql.DB, log *zap.Logger) error {
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: no other writer can start in between
	if err != nil {
		return err
	}
	defer tx.Rollback()
	version, err := schemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	if version > SchemaVersion {
		return fmt.Errorf("%s has schema version %d, and this build of caddy-posts knows versions up to %d: "+
			"run the newer build that wrote it, or restore a backup made by this one", DatabaseFile, version, SchemaVersion)
	}
	if version == SchemaVersion {
		return nil
	}
	for v := version; v < SchemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migrating the schema from version %d to %d: %w", v, v+1, err)
		}
		if fill := fills[v+1]; fill != nil {
			if err := fill(ctx, tx, log); err != nil {
				return fmt.Errorf("migrating the schema from version %d to %d: %w", v, v+1, err)
			}
		}
	}
	// PRAGMA takes no parameters; the version is a number of ours.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
		return err
	}
	return tx.Commit()
}

// querier is what both a pool and a transaction can run a query on.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func schemaVersion(ctx context.Context, q querier) (version int, err error) {
	err = q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version)
	return version, err
}
