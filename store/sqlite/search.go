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
// of its user (userToken), written in the transaction that writes the post, so a search never
// lags a write (see indexWords). It indexes the words
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
)

// indexWords writes into post_words, in tx, the words of the posts that tx wrote: the triggers
// of the posts table (migration 8, schema.go) keep each post's row id and words in
// post_words_due (its words NULL once deleted; indexed when post_words has its row from an
// earlier transaction), and every transaction that writes posts runs indexWords before its
// commit. FTS5 writes what a transaction gave it as a new segment of its index at each
// savepoint and at each statement that may need undoing, which every write of a shared
// transaction has (commit.go): written from the triggers, the index took a segment, and the
// merges of segments, for every post (a write cost three times as much as without the index);
// written here, it takes one a transaction.
func indexWords(ctx context.Context, tx *sql.Tx, c *conns) error {
	for _, st := range []*sql.Stmt{c.stmt.unindexDue, c.stmt.indexDue, c.stmt.clearDue} {
		if _, err := tx.StmtContext(ctx, st).ExecContext(ctx); err != nil {
			return err
		}
	}
	return nil
}

// The statements of indexWords.
const (
	unindexDueSQL = `DELETE FROM post_words WHERE rowid IN (SELECT row FROM post_words_due WHERE indexed)`
	indexDueSQL   = `INSERT INTO post_words (rowid, words) SELECT row, words FROM post_words_due WHERE words IS NOT NULL`
	clearDueSQL   = `DELETE FROM post_words_due`
)

// wordsFunction is the SQL function that gives the text post_words indexes for a post, from its
// user_id, title and body: the triggers of migration 8 call it.
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

// search reads a page of f, whose Search is not empty, from post_words.
func search(ctx context.Context, c *conns, f store.Filter) ([]store.Post, error) {
	q := match(f)
	since, until := bound(f.Since, earliest), bound(f.Until, latest+1)
	lo, hi := rowOf(bucket(since)), rowOf(until)
	if until <= earliest || until > latest {
		hi = rowOf(bucket(until) + 1) // in the first or last millisecond of row ids: read whole
	}
	stmt := c.stmt.search[0]
	if f.Oldest {
		stmt = c.stmt.search[1]
	}
	// read returns the first limit posts q matches in the rows [lo, hi), in row order (all of
	// them, for a limit of -1).
	read := func(lo, hi int64, limit int) ([]store.Post, error) {
		rows, err := stmt.QueryContext(ctx, q, lo, hi)
		if err != nil {
			return nil, err
		}
		defer rows.Close() // which ends the statement, read to its end or not
		var found []store.Post
		for (limit < 0 || len(found) < limit) && rows.Next() {
			p, err := scanPost(rows)
			if err != nil {
				return nil, err
			}
			found = append(found, p)
		}
		return found, rows.Err()
	}
	// within reads every post of the row ids of the millisecond ms in [lo, hi).
	within := func(ms int64) ([]store.Post, error) {
		return read(max(lo, rowOf(bucket(ms))), min(hi, rowOf(bucket(ms)+1)), -1)
	}
	// follows says whether p, read from the row ids of a millisecond that may hold others, is
	// in f's range and after After.
	follows := func(p store.Post) bool {
		return (f.Since.IsZero() || !p.CreatedAt.Before(f.Since)) && (f.Until.IsZero() || p.CreatedAt.Before(f.Until)) &&
			(f.After == nil || f.Follows(p, *f.After))
	}
	var page []store.Post
	// The first and the last millisecond of row ids hold the posts created before and after
	// them (bucket): one that a bound falls in is read whole, its posts kept by their times,
	// and then left out of the range.
	for _, edge := range []int64{earliest, latest} {
		if (f.Since.IsZero() || bucket(since) != edge) && (f.Until.IsZero() || bucket(until) != edge) {
			continue
		}
		all, err := within(edge)
		if err != nil {
			return nil, err
		}
		page = append(page, slices.DeleteFunc(all, func(p store.Post) bool { return !follows(p) })...)
		if edge == earliest {
			lo = max(lo, rowOf(earliest+1))
		} else {
			hi = min(hi, rowOf(latest))
		}
	}
	if f.After != nil {
		// The millisecond of After: its posts that follow After, and then the range past it.
		ms := millis(f.After.CreatedAt)
		same, err := within(ms)
		if err != nil {
			return nil, err
		}
		page = append(page, slices.DeleteFunc(same, func(p store.Post) bool { return !follows(p) })...)
		if f.Oldest {
			lo = max(lo, rowOf(bucket(ms)+1))
		} else {
			hi = min(hi, rowOf(bucket(ms)))
		}
	}
	if lo < hi {
		rest, err := read(lo, hi, f.Limit)
		if err != nil {
			return nil, err
		}
		if len(rest) == f.Limit {
			// The last millisecond read may have more posts, which come before some of those
			// read in the order of lists: read all of them.
			ms := bucket(millis(rest[len(rest)-1].CreatedAt))
			rest = slices.DeleteFunc(rest, func(p store.Post) bool { return bucket(millis(p.CreatedAt)) == ms })
			last, err := within(ms)
			if err != nil {
				return nil, err
			}
			rest = append(rest, last...)
		}
		page = append(page, rest...)
	}
	slices.SortFunc(page, func(a, b store.Post) int {
		c := cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
		if f.Oldest {
			return c
		}
		return -c
	})
	return page[:min(len(page), f.Limit)], nil
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
		WHERE r.row > ?1 AND r.row <= ?2`
	last, done := int64(math.MinInt64), 0
	for done < total {
		var upTo int64
		err := tx.QueryRowContext(ctx, `SELECT max(row) FROM (SELECT row FROM post_rows WHERE row > ?1 ORDER BY row LIMIT ?2)`, last, fillWordsBatch).Scan(&upTo)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, fill, last, upTo)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return cmp.Or(err, fmt.Errorf("indexing the posts after row %d indexed none", last))
		}
		last, done = upTo, done+int(n)
		log.Info("building the search index", zap.Int("indexed", done), zap.Int("posts", total))
	}
	log.Info("built the search index", zap.Int("posts", total), zap.Duration("took", time.Since(began)))
	return nil
}
