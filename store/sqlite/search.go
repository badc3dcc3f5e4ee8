package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	driver "modernc.org/sqlite"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/words"
)

// The search's index is an FTS5 table, post_words, of each post's words (words.Of) and a token
// of its user (userToken), whose words the transaction that writes the post keeps in
// post_words_due, for a later transaction to index, and never after a search has read (see
// indexWords): a search never lags a write. It indexes the words
// as they are: tokenize='ascii' splits at the spaces between them and leaves the bytes of every
// other script as they are; detail='none' keeps no positions, which a search of words needs
// none of; each prefix a query may have (1 to words.MaxPrefix characters, the most FTS5 takes)
// has an index of its own, so that search as you type reads one list however many words begin
// with it, and stops at LIMIT (FTS5 reads a prefix it has no index of by merging the whole
// lists of every word it begins, before its first row: 625 ms for a word of every post of
// 200,000). It holds no text (contentless), only the lists of rows each word is in.
//
// A row of post_words is a post's place in the order of lists: its row id is its createdAt in
// Unix milliseconds times rowsPerMilli, plus its rank among the posts of that millisecond, kept
// in post_rows with the post's id. FTS5 reads a word's rows in row id order and stops at LIMIT,
// so a page of a search reads about as many rows as it returns, at any size. Within one
// millisecond the order of row ids is that of inserts, not of ids: search reads the whole
// millisecond a page ends in and sorts by (createdAt, id), so that its pages follow the order
// of lists exactly.
const (
	// rowsPerMilli is how many posts one millisecond of createdAt has row ids for.
	rowsPerMilli = 1 << 20
	// earliest and latest are the createdAt times in Unix milliseconds that a row id can hold
	// (from the year 1691 to 2248): a post created before or after them takes its row id in
	// theirs (bucket), and a search's bounds are clamped to them.
	earliest = math.MinInt64 / rowsPerMilli
	latest   = math.MaxInt64/rowsPerMilli - 1
)

// The queries of a search: the posts of the row ids matching ?1, from ?2 (inclusive) to ?3
// (exclusive), in row id order. FTS5 consumes the MATCH, the range and the order (a test checks
// the plan), and reads the rows as they are stepped through: search stops reading at its
// limit. A LIMIT would cost more than it saves: SQLite prepares a query of a virtual table
// again whenever its LIMIT's parameter is bound (a quarter of a search's time).
const (
	searchColumns   = `p.id, p.user_id, p.title, p.body, p.created_at, p.updated_at, p.version`
	searchFrom      = ` FROM post_words w JOIN post_rows r ON r.row = w.rowid JOIN posts p ON p.id = r.id WHERE post_words MATCH ?1 AND w.rowid >= ?2 AND w.rowid < ?3`
	searchSQL       = `SELECT ` + searchColumns + searchFrom + ` ORDER BY w.rowid DESC`
	searchOldestSQL = `SELECT ` + searchColumns + searchFrom + ` ORDER BY w.rowid`
	// searchDueSQL reads the posts whose words wait to be indexed, of the rows from ?1
	// (inclusive) to ?2 (exclusive): at most maxUnindexed writes' and those of the
	// transactions under way (searchAgain).
	searchDueSQL = `SELECT ` + searchColumns + ` FROM post_words_due d JOIN post_rows r ON r.row = d.row JOIN posts p ON p.id = r.id
		WHERE d.words IS NOT NULL AND d.row >= ?1 AND d.row < ?2`
)

// indexWords writes into post_words, in tx, the words of the posts written since it last ran:
// the triggers of the posts table (migration 9, schema.go) keep each post's row id and words in
// post_words_due (its words NULL once deleted; indexed when post_words has its row from an
// earlier transaction), and indexWords's one statement empties post_words_due, the trigger of
// each row writing it into post_words. FTS5 writes what it was given as a new segment of its
// index at each commit, at each savepoint and at each statement that may need undoing, which
// every write of a shared transaction has (commit.go): written from the triggers of posts, the
// index took a segment, and the merges of segments, for every post (a write cost three times as
// much as without the index); written here, it takes one for the words of many transactions
// under load (commitIndexing, which decides when it runs, and Store.ListPosts, which has it run
// before a search if words wait).
func indexWords(ctx context.Context, tx *sql.Tx, c *conns) error {
	_, err := tx.StmtContext(ctx, c.stmt.indexWords).ExecContext(ctx)
	return err
}

// indexWordsSQL is indexWords's statement.
const indexWordsSQL = `DELETE FROM post_words_due`

// mergeWords takes one step of merging the segments of post_words, of at most mergePages pages
// of 4 KB, in a transaction of its own, and says whether it merged any. FTS5 merges as it writes
// too (automerge): once four segments of a level are written, it merges them into one of the
// next, so that a word's list is in a few segments of each level, each of which a search seeks
// it in. Between writes, with usermerge at 2 (migration 9), these steps merge every two of a
// level, so that an index at rest has one segment a level (of 200,000 posts written 3,200 at a
// time by 32 writers, 12 to 21 segments before, 3 after). A search seeks each of its words in
// every segment: before these steps, that was a third of the time of GET /posts?q=dolor at
// 200,000 posts. A step is small, so that a write that comes meanwhile waits little: at 200,000
// posts, 3 to 40 ms, 8 ms for half of them. No context bounds it: a deadline that ended BEGIN
// could leave its transaction open on the writer, for the next write's BEGIN to fail on (the
// driver interrupts a statement at the end of its context, and may answer the context's error
// for a statement that ran); another process that holds the lock (the sqlite3 tool writing) is
// waited for as a write waits for it, busy_timeout at most.
func (s *Store) mergeWords(c *conns) (merged bool, err error) {
	bg := context.Background()
	conn, err := c.write.Conn(bg)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	var before, after int64
	_, err = conn.ExecContext(bg, `BEGIN IMMEDIATE`)
	if err == nil {
		err = conn.QueryRowContext(bg, `SELECT total_changes()`).Scan(&before)
	}
	if err == nil {
		_, err = conn.ExecContext(bg, `INSERT INTO post_words (post_words, rank) VALUES ('merge', ?)`, mergePages)
	}
	if err == nil {
		err = conn.QueryRowContext(bg, `SELECT total_changes()`).Scan(&after)
	}
	if err == nil {
		_, err = conn.ExecContext(bg, `COMMIT`)
	}
	if err != nil {
		_, _ = conn.ExecContext(bg, `ROLLBACK`) // if a transaction is open
		return false, err
	}
	s.wrote(c)
	return after-before >= 2, nil // FTS5's sign of a merge that wrote
}

const (
	// mergePages is how many pages one step of mergeWords writes at most.
	mergePages = 16
	// mergePause is how long the writes pause before mergeWords runs.
	mergePause = 50 * time.Millisecond
	// mergeRetry is how long the committer waits after a step of mergeWords, or the indexing of
	// its idle turn, that failed.
	mergeRetry = time.Second
	// mergeRest is how many times as long as a step took the committer waits before the next.
	mergeRest = 4
)

// wordsFunction is the SQL function that gives the text post_words indexes for a post, from its
// user_id, title and body: the triggers of migration 9 call it.
const wordsFunction = "caddy_posts_words"

func init() {
	driver.MustRegisterDeterministicScalarFunction(wordsFunction, 3, func(_ *driver.FunctionContext, args []sqldriver.Value) (sqldriver.Value, error) {
		user, _ := args[0].(string)
		title, _ := args[1].(string)
		body, _ := args[2].(string) // nil for a post without one
		return indexed(user, title, body), nil
	})
}

// indexed is the text post_words indexes for a post of user: userToken, then the words of its
// title and body, separated by spaces.
func indexed(user, title, body string) string {
	var b strings.Builder
	b.WriteString(userToken(user))
	for _, w := range words.Of(title, body) {
		b.WriteByte(' ')
		b.WriteString(w)
	}
	return b.String()
}

// userToken is the token of user in post_words, which a search of one user's posts matches: a
// middle dot, which no word holds (words splits at it, and the 'ascii' tokenizer keeps it), then
// the user id in hexadecimal, which the tokenizer leaves whole.
func userToken(user string) string { return "·" + hex.EncodeToString([]byte(user)) }

// match is the FTS5 query of f: each of its words, and its user's token, quoted, so that FTS5
// reads each as a string, never as its syntax; its prefix, if it has one, followed by *.
func match(f store.Filter) string {
	var b strings.Builder
	term := func(s string) {
		if b.Len() > 0 {
			b.WriteString(" AND ")
		}
		b.WriteByte('"')
		b.WriteString(strings.ReplaceAll(s, `"`, `""`)) // words hold no quote: this is the syntax's rule
		b.WriteByte('"')
	}
	if f.UserID != "" {
		term(userToken(f.UserID))
	}
	for _, w := range f.Search.Whole() {
		term(w)
	}
	if p := f.Search.Prefix(); p != "" {
		term(p)
		b.WriteByte('*')
	}
	return b.String()
}

// bucket is the millisecond of the row id of a post created at ms.
func bucket(ms int64) int64 { return min(max(ms, earliest), latest) }

// rowOf is the first row id of the millisecond ms, clamped to those a row id can hold.
func rowOf(ms int64) int64 { return min(max(ms, earliest), latest+1) * rowsPerMilli }

// rowRange is the row ids of post_words a search of f reads, from lo (inclusive) to hi
// (exclusive): f's range, and from After's millisecond on. ok is false when none can match.
func rowRange(f store.Filter) (lo, hi int64, ok bool) {
	since, until := bound(f.Since, earliest), bound(f.Until, latest+1)
	lo, hi = rowOf(bucket(since)), rowOf(until)
	if until <= earliest || until > latest {
		hi = rowOf(bucket(until) + 1) // in the first or last millisecond of row ids: read whole
	}
	if f.After != nil {
		if ms := bucket(millis(f.After.CreatedAt)); f.Oldest {
			lo = max(lo, rowOf(ms))
		} else {
			hi = min(hi, rowOf(ms+1))
		}
	}
	return lo, hi, lo < hi && f.Limit > 0
}

// search reads a page of f, whose Search is not empty, from post_words, with stmt, one of the
// statements of searchSQL. It reads the rows of f's range in row order (rowRange), those that
// are not in f's range or do not follow After skipped (a millisecond at a bound, or After's, may
// hold both; so may the first and the last millisecond of row ids, which hold the posts created
// before and after them: see bucket). Past the page's last post it reads the rest of that post's
// millisecond, whose posts may come before it in the order of lists, and stops at the next one.
// With check, it skips the posts that do not hold f's words or are not of f's user, which the
// index may give for rows of writes whose words are still to be indexed.
func search(ctx context.Context, stmt *sql.Stmt, f store.Filter, check bool) ([]store.Post, error) {
	lo, hi, ok := rowRange(f)
	if !ok {
		return nil, nil
	}
	rows, err := stmt.QueryContext(ctx, match(f), lo, hi)
	if err != nil {
		return nil, err
	}
	defer rows.Close() // which ends the statement, read to its end or not
	var page []store.Post
	for rows.Next() {
		p, err := scanPost(rows)
		if err != nil {
			return nil, err
		}
		if len(page) >= f.Limit && bucket(millis(p.CreatedAt)) != bucket(millis(page[len(page)-1].CreatedAt)) {
			break
		}
		if keeps(f, p, check) {
			page = append(page, p)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return pageOf(f, page), nil
}

// keeps says whether a search of f keeps p, a post its index gave: in f's range and after its
// After, and, with check, of its user and holding its words.
func keeps(f store.Filter, p store.Post, check bool) bool {
	return (f.Since.IsZero() || !p.CreatedAt.Before(f.Since)) && (f.Until.IsZero() || p.CreatedAt.Before(f.Until)) &&
		(f.After == nil || f.Follows(p, *f.After)) && (!check || holds(f, p))
}

// pageOf sorts posts, found by a search of f, in f's order and keeps the first f.Limit.
func pageOf(f store.Filter, posts []store.Post) []store.Post {
	slices.SortFunc(posts, func(a, b store.Post) int {
		c := cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
		if f.Oldest {
			return c
		}
		return -c
	})
	return posts[:min(len(posts), f.Limit)]
}

// searchAgain reads a page of f in one transaction that reads the state of its snapshot too
// (stateSQL), for a search that overlapped a commit, or whose snapshot holds words waiting to
// be indexed: then it checks each post the index gives (search) and adds the posts whose words
// wait that hold f's words (searchDueSQL), so that the page is exact for its snapshot whatever
// the index holds. It returns the page and the log's last position in that snapshot.
func searchAgain(ctx context.Context, c *conns, f store.Filter) ([]store.Post, int64, error) {
	tx, last, due, err := snapshot(ctx, c)
	if err != nil {
		return nil, 0, err
	}
	defer tx.Rollback()
	page, err := search(ctx, tx.StmtContext(ctx, c.stmt.search[oldest(f)]), f, due)
	if err != nil || !due {
		return page, last, err
	}
	lo, hi, _ := rowRange(f)
	dueRows, err := tx.StmtContext(ctx, c.stmt.searchDue).QueryContext(ctx, lo, hi)
	waiting, err := collect(dueRows, err, nil, scanPost)
	if err != nil {
		return nil, 0, err
	}
	for _, p := range waiting {
		if keeps(f, p, true) && !slices.ContainsFunc(page, func(q store.Post) bool { return q.ID == p.ID }) {
			page = append(page, p)
		}
	}
	return pageOf(f, page), last, nil
}

// holds says whether p is of f's user, if f has one, and holds f's words.
func holds(f store.Filter, p store.Post) bool {
	var body string
	if p.Body != nil {
		body = *p.Body
	}
	return (f.UserID == "" || p.UserID == f.UserID) && f.Search.Match(words.Of(p.Title, body))
}

// fillWordsBatch is how many posts fillWords indexes in one statement.
const fillWordsBatch = 10000

// fillWords indexes, in tx, the words of every post that post_rows has a row for: migration 8's
// backfill of the posts stored before it, a batch at a time in row order, logging its progress.
func fillWords(ctx context.Context, tx *sql.Tx, log *zap.Logger) error {
	var total int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM post_rows`).Scan(&total); err != nil {
		return err
	}
	if total == 0 {
		return nil
	}
	began := time.Now()
	log.Info("building the search index of the posts stored", zap.Int("posts", total))
	const fill = `INSERT INTO post_words (rowid, words)
		SELECT r.row, ` + wordsFunction + `(p.user_id, p.title, p.body) FROM post_rows r JOIN posts p ON p.id = r.id
		WHERE r.row >= ?1 AND r.row <= ?2`
	// from is the first row of the next batch: math.MinInt64 is a row (the first post of the
	// earliest millisecond), and the last row is below math.MaxInt64, so from never overflows.
	from, done := int64(math.MinInt64), 0
	for done < total {
		var upTo sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT max(row) FROM (SELECT row FROM post_rows WHERE row >= ?1 ORDER BY row LIMIT ?2)`, from, fillWordsBatch).Scan(&upTo)
		if err == nil && !upTo.Valid {
			err = fmt.Errorf("post_rows holds %d rows, and none from row %d after %d indexed", total, from, done)
		}
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, fill, from, upTo.Int64)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return cmp.Or(err, fmt.Errorf("indexing the posts from row %d indexed none", from))
		}
		from, done = upTo.Int64+1, done+int(n)
		log.Info("building the search index", zap.Int("indexed", done), zap.Int("posts", total))
	}
	log.Info("built the search index", zap.Int("posts", total), zap.Duration("took", time.Since(began)))
	return nil
}
