//go:build !race

// The search's index against the posts it indexes, written every way the store writes them:
// pages of searches against the lists' pages, rows reused within and across transactions, the
// sqlite3 tool, migrations, and the merges between writes. Seeding and the merges' waits cost
// seconds under the race detector, for no concurrency the race step does not see elsewhere;
// make test runs them in its step without it.

package sqlite_test

import (
	"cmp"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
	"github.com/postsedge/caddy-posts/store/words"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// earliestMilli and latestMilli are search.go's earliest and latest, in Unix milliseconds.
const (
	earliestMilli = math.MinInt64 / (1 << 20)
	latestMilli   = math.MaxInt64/(1<<20) - 1
)

// orderOf sorts posts in f's order.
func orderOf(oldest bool) func(a, b store.Post) int {
	return func(a, b store.Post) int {
		c := cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
		if oldest {
			return c
		}
		return -c
	}
}

// pagesOf pages through f with the store and returns the ids, and whether a page was longer
// than the limit or out of order.
func pagesOf(t *testing.T, s *sqlite.Store, f store.Filter) []string {
	t.Helper()
	var got []string
	for range 10000 {
		page, err := s.ListPosts(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > f.Limit {
			t.Fatalf("a page of %d posts for a limit of %d", len(page), f.Limit)
		}
		for _, p := range page {
			got = append(got, p.ID)
		}
		if len(page) < f.Limit {
			return got
		}
		k := store.KeyOf(page[len(page)-1])
		f.After = &k
	}
	t.Fatal("paging did not end")
	return nil
}

// TestSearchPagesAreTheListsPages compares, for many random filters (time ranges with
// bounds inside a millisecond, in and out of the edge buckets, both orders, a user, small limits),
// the pages of a search that every post matches with the pages of the list without a search
// and with the expected order computed in Go.
func TestSearchPagesAreTheListsPages(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	times := []time.Time{
		time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1600, 6, 1, 0, 0, 0, 0, time.UTC),
		time.UnixMilli(earliestMilli - 1).UTC(),
		time.UnixMilli(earliestMilli).UTC(),
		time.UnixMilli(earliestMilli + 1).UTC(),
		base, base, base, base, base.Add(time.Millisecond), base.Add(2 * time.Millisecond), base.Add(time.Second),
		time.UnixMilli(latestMilli - 1).UTC(),
		time.UnixMilli(latestMilli).UTC(),
		time.UnixMilli(latestMilli + 1).UTC(),
		time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	var all []store.Post
	for i := range 240 {
		at := times[rng.IntN(len(times))]
		body := "common"
		if i%2 == 1 {
			body += " oddword"
		}
		user := fmt.Sprint("u", rng.IntN(3))
		all = append(all, store.Post{ID: store.NewID(at), UserID: user, Title: fmt.Sprint("t", i), Body: &body, CreatedAt: at, UpdatedAt: at, Version: 1})
	}
	// Inserted in a random order, so that within a millisecond the order of rows is not that of
	// ids; some alone, the rest in batches.
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for i := 0; i < len(all); {
		if i%3 == 0 {
			if _, err := s.InsertPost(t.Context(), all[i]); err != nil {
				t.Fatal(err)
			}
			i++
			continue
		}
		n := min(len(all)-i, 1+rng.IntN(20))
		if _, err := s.InsertPosts(t.Context(), all[i:i+n]); err != nil {
			t.Fatal(err)
		}
		i += n
	}
	// Bounds: the times and a microsecond either side of them.
	var bounds []time.Time
	for _, at := range times {
		bounds = append(bounds, at, at.Add(-time.Microsecond), at.Add(time.Microsecond), at.Add(-time.Millisecond))
	}
	for n := range 1000 {
		f := store.Filter{Limit: 1 + rng.IntN(7), Oldest: rng.IntN(2) == 0}
		q := "common"
		if rng.IntN(3) == 0 {
			q = "oddword"
		}
		if rng.IntN(2) == 0 {
			f.Since = bounds[rng.IntN(len(bounds))]
		}
		if rng.IntN(2) == 0 {
			f.Until = bounds[rng.IntN(len(bounds))]
		}
		if rng.IntN(3) == 0 {
			f.UserID = fmt.Sprint("u", rng.IntN(3))
		}
		var want []store.Post
		for _, p := range all {
			if (f.Since.IsZero() || !p.CreatedAt.Before(f.Since)) && (f.Until.IsZero() || p.CreatedAt.Before(f.Until)) &&
				(f.UserID == "" || p.UserID == f.UserID) && strings.Contains(*p.Body, q) {
				want = append(want, p)
			}
		}
		slices.SortFunc(want, orderOf(f.Oldest))
		var wantIDs []string
		for _, p := range want {
			wantIDs = append(wantIDs, p.ID)
		}
		searched := f
		searched.Search = words.Parse(q)
		if rng.IntN(2) == 0 {
			// One page after a key of no stored post, or of one, anywhere.
			k := store.Key{CreatedAt: bounds[rng.IntN(len(bounds))], ID: store.NewID(base)}
			if rng.IntN(2) == 0 {
				k = store.KeyOf(all[rng.IntN(len(all))])
			}
			searched.After, f.After = &k, &k
			var after []string
			for _, id := range wantIDs {
				i := slices.IndexFunc(want, func(p store.Post) bool { return p.ID == id })
				if f.Follows(want[i], k) && len(after) < f.Limit {
					after = append(after, id)
				}
			}
			page, err := s.ListPosts(t.Context(), searched)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range page {
				got = append(got, p.ID)
			}
			if !slices.Equal(got, after) {
				t.Fatalf("filter %d %+v after %v (q %q): %v; want %v", n, f, k, q, got, after)
			}
			continue
		}
		got := pagesOf(t, s, searched)
		if !slices.Equal(got, wantIDs) {
			t.Fatalf("filter %d %+v (q %q): the search's pages hold %d posts\n%v\nwant %d\n%v", n, f, q, len(got), got, len(wantIDs), wantIDs)
		}
		if q == "common" {
			if listed := pagesOf(t, s, f); !slices.Equal(listed, wantIDs) {
				t.Fatalf("filter %d %+v: the list's pages hold %d posts; want %d", n, f, len(listed), len(wantIDs))
			}
		}
	}
}

// readWrite opens the database file as the sqlite3 tool would, read-write.
func readWrite(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.DatabaseFile)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// indexIsThePosts checks post_words itself, not through the join the search makes, once the
// store has indexed the words that wait (post_words_due empty, as the committer's idle turn
// leaves it): for each word of vocabulary, the rows FTS5 matches are exactly those post_rows
// gives the stored posts that hold it.
func indexIsThePosts(t *testing.T, dir string, vocabulary []string) {
	t.Helper()
	db := direct(t, dir)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var due int
		if err := db.QueryRow(`SELECT count(*) FROM post_words_due`).Scan(&due); err != nil {
			t.Fatal(err)
		}
		if due == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("post_words_due holds %d rows 10 s after the writes", due)
		}
	}
	rowOf := map[int64]string{}
	rows, err := db.Query(`SELECT r.row, p.title || ' ' || coalesce(p.body, '') FROM post_rows r JOIN posts p ON p.id = r.id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var row int64
		var text string
		if err := rows.Scan(&row, &text); err != nil {
			t.Fatal(err)
		}
		rowOf[row] = text
	}
	rows.Close()
	var posts, rowCount int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM posts), (SELECT count(*) FROM post_rows)`).Scan(&posts, &rowCount); err != nil {
		t.Fatal(err)
	}
	if posts != rowCount || len(rowOf) != posts {
		t.Errorf("%d posts, %d rows of post_rows, %d joined", posts, rowCount, len(rowOf))
	}
	for _, w := range vocabulary {
		var want, got []int64
		for row, text := range rowOf {
			if slices.Contains(words.Of(text), w) {
				want = append(want, row)
			}
		}
		rows, err := db.Query(`SELECT rowid FROM post_words WHERE post_words MATCH ? ORDER BY rowid`, `"`+w+`"`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var row int64
			if err := rows.Scan(&row); err != nil {
				t.Fatal(err)
			}
			got = append(got, row)
		}
		rows.Close()
		slices.Sort(want)
		if !slices.Equal(got, want) {
			var ghosts []string
			for _, r := range got {
				if !slices.Contains(want, r) {
					text, stored := rowOf[r]
					ghosts = append(ghosts, fmt.Sprintf("%d (stored: %v, %q)", r, stored, text))
				}
			}
			t.Errorf("post_words matches %q at %d rows; want the %d of the posts that hold it; not theirs: %v", w, len(got), len(want), ghosts)
		}
	}
}

// TestIndexAfterRowReuseAcrossAndWithinTransactions writes, through the group commit with
// the lock held by another connection so that the writes share one transaction, a post, its
// deletion, a post of the same millisecond (which takes the same row id), an update of it, and
// across transactions the same again; then checks post_words row by row.
func TestIndexAfterRowReuseAcrossAndWithinTransactions(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.Options{})
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	body := func(s string) *string { return &s }
	post := func(title, b string) store.Post {
		return store.Post{ID: store.NewID(at), UserID: "alice", Title: title, Body: body(b), CreatedAt: at, UpdatedAt: at, Version: 1}
	}
	vocabulary := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"}
	// Across transactions: P1 at row r, deleted; P2 takes r again.
	p1 := post("alpha", "bravo")
	if _, err := s.InsertPost(t.Context(), p1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeletePost(t.Context(), p1.ID, "alice", 0); err != nil {
		t.Fatal(err)
	}
	p2 := post("charlie", "bravo")
	if _, err := s.InsertPost(t.Context(), p2); err != nil {
		t.Fatal(err)
	}
	indexIsThePosts(t, dir, vocabulary)

	// Within one transaction: the writes queue while another connection holds the lock.
	rw := readWrite(t, dir)
	conn, err := rw.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	p3, p4 := post("delta", "echo"), post("foxtrot", "golf")
	steps := []func() error{
		func() error { _, err := s.InsertPost(t.Context(), post("first", "alone")); return err }, // taken alone, waits in BEGIN
		func() error { _, err := s.DeletePost(t.Context(), p2.ID, "alice", 0); return err },      // r: indexed, deleted
		func() error { _, err := s.InsertPost(t.Context(), p3); return err },                     // takes r again
		func() error {
			_, err := s.UpdatePost(t.Context(), p3.ID, "alice", 0, store.Update{Title: body("hotel"), UpdatedAt: at})
			return err
		},
		func() error { _, err := s.InsertPost(t.Context(), p4); return err }, // r+1
		func() error { _, err := s.DeletePost(t.Context(), p4.ID, "alice", 0); return err },
		func() error { _, err := s.InsertPost(t.Context(), post("india", "golf")); return err }, // r+1 again, never indexed
		func() error {
			_, err := s.UpdatePost(t.Context(), p3.ID, "alice", 7, store.Update{Title: body("alpha"), UpdatedAt: at})
			return err
		}, // fails on its own
	}
	var wg sync.WaitGroup
	errs := make([]error, len(steps))
	for i, step := range steps {
		wg.Go(func() { errs[i] = step() })
		time.Sleep(30 * time.Millisecond) // queued in this order
	}
	if _, err := conn.ExecContext(t.Context(), "COMMIT"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	wg.Wait()
	for i, err := range errs {
		if (err != nil) != (i == len(steps)-1) {
			t.Errorf("step %d: %v", i, err)
		}
	}
	vocabulary = append(vocabulary, "first", "alone")
	indexIsThePosts(t, dir, vocabulary)
}

// TestPostDeletedByTheSQLiteTool deletes a post as the sqlite3 tool would (its delete
// trigger needs no function of the module's), then the module writes a post of the same
// millisecond, which takes the same row id.
func TestPostDeletedByTheSQLiteTool(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.Options{})
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	body := "bravo"
	p1 := store.Post{ID: store.NewID(at), UserID: "alice", Title: "alpha", Body: &body, CreatedAt: at, UpdatedAt: at, Version: 1}
	if _, err := s.InsertPost(t.Context(), p1); err != nil {
		t.Fatal(err)
	}
	rw := readWrite(t, dir)
	if _, err := rw.Exec(`DELETE FROM posts WHERE id = ?`, p1.ID); err != nil {
		t.Fatal(err)
	}
	found, err := s.ListPosts(t.Context(), store.Filter{Search: words.Parse("alpha"), Limit: 10})
	if err != nil || len(found) != 0 {
		t.Errorf("a search after the tool's delete: %d posts, %v", len(found), err)
	}
	p2 := store.Post{ID: store.NewID(at), UserID: "alice", Title: "charlie", Body: &body, CreatedAt: at, UpdatedAt: at, Version: 1}
	if _, err := s.InsertPost(t.Context(), p2); err != nil {
		t.Fatal(err)
	}
	found, err = s.ListPosts(t.Context(), store.Filter{Search: words.Parse("alpha"), Limit: 10})
	if err != nil || len(found) != 0 {
		t.Errorf("a search of the deleted post's word after a post took its row: %d posts (%v), %v", len(found), found, err)
	}
	indexIsThePosts(t, dir, []string{"alpha", "bravo", "charlie"})
}

// settled waits until the store's merges stop committing (PRAGMA data_version of another
// connection stays the same for quiet), and returns how long that took. quiet must outlast the
// rest between two steps (mergeRest times a step: 160 ms for the longest measured, 40 ms) and a
// retry after a failed one (a second): the callers give 2 s.
func settled(t *testing.T, dir string, quiet, limit time.Duration) (time.Duration, int) {
	t.Helper()
	db := direct(t, dir)
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	began := time.Now()
	var last int64 = -1
	changes := 0
	stable := time.Now()
	for time.Since(began) < limit {
		var v int64
		if err := conn.QueryRowContext(t.Context(), "PRAGMA data_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != last {
			last, stable = v, time.Now()
			changes++
		} else if time.Since(stable) >= quiet {
			return stable.Sub(began), changes
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the store still commits %v after the writes ended (%d commits seen)", limit, changes)
	return 0, 0
}

func segmentsOf(t *testing.T, dir string) int {
	var n int
	if err := direct(t, dir).QueryRow(`SELECT count(DISTINCT segid) FROM post_words_idx`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMergesEndAfterUpdatesAndDeletes writes posts in many transactions, then updates and
// deletes many of them (tombstones in a contentless_delete table, which FTS5 also merges for),
// and checks that the merges between writes end, and the index still is the posts.
func TestMergesEndAfterUpdatesAndDeletes(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.Options{})
	rng := rand.New(rand.NewPCG(3, 4))
	vocabulary := []string{"amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heath"}
	text := func() string {
		return vocabulary[rng.IntN(len(vocabulary))] + " " + vocabulary[rng.IntN(len(vocabulary))]
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var all []store.Post
	for b := range 200 {
		var batch []store.Post
		for i := range 10 {
			at := base.Add(time.Duration(b*10+i) * time.Millisecond)
			body := text()
			batch = append(batch, store.Post{ID: store.NewID(at), UserID: "u", Title: text(), Body: &body, CreatedAt: at, UpdatedAt: at, Version: 1})
		}
		if _, err := s.InsertPosts(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
		all = append(all, batch...)
	}
	took, commits := settled(t, dir, 2*time.Second, 60*time.Second)
	t.Logf("after the inserts: merged in %v, %d commits seen, %d segments", took, commits, segmentsOf(t, dir))
	for i, p := range all {
		switch i % 4 {
		case 0:
			title := text()
			if _, err := s.UpdatePost(t.Context(), p.ID, "u", 0, store.Update{Title: &title, UpdatedAt: base}); err != nil {
				t.Fatal(err)
			}
		case 1:
			if _, err := s.DeletePost(t.Context(), p.ID, "u", 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	took, commits = settled(t, dir, 2*time.Second, 60*time.Second)
	t.Logf("after the updates and deletes: merged in %v, %d commits seen, %d segments", took, commits, segmentsOf(t, dir))
	indexIsThePosts(t, dir, vocabulary)
}

// TestIndexFollowsConcurrentWrites writes from many goroutines (shared transactions,
// savepoints rolled back), most posts in a few milliseconds so that deletes free row ids that
// inserts take again, some ids inserted again once deleted, and bulk inserts beside; then checks
// post_words row by row, before and after the merges.
func TestIndexFollowsConcurrentWrites(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.Options{})
	vocabulary := []string{"amber", "birch", "cedar", "delta", "ember", "fjord"}
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for g := range 24 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			text := func() string {
				return vocabulary[rng.IntN(len(vocabulary))] + " " + vocabulary[rng.IntN(len(vocabulary))]
			}
			user := fmt.Sprint("user", g)
			var mine, gone []store.Post
			for range 120 {
				switch r := rng.IntN(10); {
				case r < 3 && len(mine) > 0:
					k := rng.IntN(len(mine))
					title := text()
					version := mine[k].Version
					if rng.IntN(4) == 0 {
						version += 3 // fails on its own
					}
					if _, err := s.UpdatePost(t.Context(), mine[k].ID, user, version, store.Update{Title: &title, UpdatedAt: base}); err == nil {
						mine[k].Version++
						mine[k].Title = title
					}
				case r < 6 && len(mine) > 0:
					k := rng.IntN(len(mine))
					version := mine[k].Version
					if rng.IntN(4) == 0 {
						version += 3
					}
					if _, err := s.DeletePost(t.Context(), mine[k].ID, user, version); err == nil {
						gone = append(gone, mine[k])
						mine = slices.Delete(mine, k, k+1)
					}
				case r == 6 && len(gone) > 0: // the same id again
					k := rng.IntN(len(gone))
					p := gone[k]
					p.Title, p.Version = text(), 1
					if _, err := s.InsertPost(t.Context(), p); err != nil {
						t.Error(err)
						continue
					}
					gone = slices.Delete(gone, k, k+1)
					mine = append(mine, p)
				case r == 7:
					var batch []store.Post
					for range 3 {
						at := base.Add(time.Duration(rng.IntN(4)) * time.Millisecond)
						body := text()
						batch = append(batch, store.Post{ID: store.NewID(at), UserID: user, Title: text(), Body: &body, CreatedAt: at, UpdatedAt: at, Version: 1})
					}
					if _, err := s.InsertPosts(t.Context(), batch); err != nil {
						t.Error(err)
						continue
					}
					mine = append(mine, batch...)
				default:
					at := base.Add(time.Duration(rng.IntN(4)) * time.Millisecond)
					body := text()
					p := store.Post{ID: store.NewID(at), UserID: user, Title: text(), Body: &body, CreatedAt: at, UpdatedAt: at, Version: 1}
					if _, err := s.InsertPost(t.Context(), p); err != nil {
						t.Error(err)
						continue
					}
					mine = append(mine, p)
				}
			}
		})
	}
	wg.Wait()
	indexIsThePosts(t, dir, vocabulary)
	settled(t, dir, 2*time.Second, 60*time.Second)
	indexIsThePosts(t, dir, vocabulary)
}

// TestUpdatesOfOneRowAcrossMerges updates the same posts again and again, with pauses
// that let the merges run between, so that the segments merged hold the same row ids, some
// deleted (tombstones) and some live, with words in common.
func TestUpdatesOfOneRowAcrossMerges(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.Options{})
	vocabulary := []string{"amber", "birch", "cedar", "delta"}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ps []store.Post
	for i := range 5 {
		p := store.Post{ID: store.NewID(at), UserID: "u", Title: "amber birch", CreatedAt: at.Add(time.Duration(i%2) * time.Millisecond), UpdatedAt: at}
		if _, err := s.InsertPost(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for i := range 40 {
		p := ps[i%len(ps)]
		title := "amber " + vocabulary[1+i%3]
		if i%7 == 6 { // deleted and written again: the same row id
			if _, err := s.DeletePost(t.Context(), p.ID, "u", 0); err != nil {
				t.Fatal(err)
			}
			p.Title = title
			if _, err := s.InsertPost(t.Context(), p); err != nil {
				t.Fatal(err)
			}
		} else if _, err := s.UpdatePost(t.Context(), p.ID, "u", 0, store.Update{Title: &title, UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(40+i%3*20) * time.Millisecond)
	}
	settled(t, dir, 2*time.Second, 60*time.Second)
	indexIsThePosts(t, dir, vocabulary)
}

// reviewVersion7 writes a file of schema version 7 in dir holding a post of the title at each
// of times (Unix milliseconds), and returns their ids.
func reviewVersion7(t *testing.T, dir string, times []int64, title func(int) string) []string {
	t.Helper()
	old, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	for _, stmt := range append(append([]string{}, sqlite.Migrations[:7]...), "PRAGMA user_version = 7") {
		if _, err := old.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for n, at := range times {
		id := fmt.Sprintf("67d44600%016x", 1000-n)
		if _, err := old.Exec(`INSERT INTO posts (id, user_id, title, body, created_at, updated_at) VALUES (?, 'alice', ?, NULL, ?, ?)`,
			id, title(n), at, at); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestMigrationOfAPostBefore1691 migrates a file of version 7 that holds a post created
// before the earliest millisecond a row id can hold (the year 1691), beside another. Its row
// id is math.MinInt64 (earliest*2^20 + rank 0), and fillWords, which starts from last =
// math.MinInt64 and reads the rows "> last", never reads it: the first batch indexes one post
// fewer than post_rows holds, the next finds no row (max(row) is NULL), and the migration fails:
// the store does not open.
func TestMigrationOfAPostBefore1691(t *testing.T) {
	for _, tc := range []struct {
		name  string
		times []int64
	}{
		{"alone", []int64{earliestMilli - 1000}},
		{"beside a post of 2026", []int64{earliestMilli - 1000, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()}},
		{"at the earliest millisecond itself", []int64{earliestMilli}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			reviewVersion7(t, dir, tc.times, func(int) string { return "amber" })
			s, err := sqlite.Open(dir, sqlite.Options{})
			if err != nil {
				t.Fatalf("Open of a file of version 7 with a post before 1691: %v", err)
			}
			defer s.Close()
			found, err := s.ListPosts(t.Context(), store.Filter{Search: words.Parse("amber"), Limit: 10})
			if err != nil || len(found) != len(tc.times) {
				t.Errorf("a search of every post found %d, %v; want %d", len(found), err, len(tc.times))
			}
		})
	}
}

// TestMigratedPostsWrittenAfter migrates a file of version 7 (posts in edge buckets and
// sharing milliseconds), then updates, deletes and re-inserts the migrated posts.
func TestMigratedPostsWrittenAfter(t *testing.T) {
	dir := t.TempDir()
	vocabulary := []string{"amber", "birch", "cedar"}
	// Not at the earliest row itself (TestMigrationOfAPostBefore1691).
	edges := []int64{earliestMilli + 1, 0, 0, 1, latestMilli, latestMilli + 7, latestMilli + 7}
	var times []int64
	for n := range 30 {
		times = append(times, edges[n%len(edges)])
	}
	ids := reviewVersion7(t, dir, times, func(n int) string { return vocabulary[n%3] })
	s := open(t, dir, sqlite.Options{})
	indexIsThePosts(t, dir, vocabulary)
	for i, id := range ids {
		switch i % 3 {
		case 0:
			if _, err := s.DeletePost(t.Context(), id, "alice", 0); err != nil {
				t.Fatal(err)
			}
		case 1:
			title := vocabulary[(i+1)%3]
			if _, err := s.UpdatePost(t.Context(), id, "alice", 0, store.Update{Title: &title, UpdatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 6 { // new posts in the same buckets
		at := time.UnixMilli(times[i%len(times)]).UTC()
		if _, err := s.InsertPost(t.Context(), store.Post{ID: store.NewID(at), UserID: "alice", Title: vocabulary[i%3], CreatedAt: at, UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	indexIsThePosts(t, dir, vocabulary)
}

// TestCloseWhileMerging closes the store while the merges between writes run.
func TestCloseWhileMerging(t *testing.T) {
	dir := t.TempDir()
	core, logs := observer.New(zap.DebugLevel)
	s, err := sqlite.Open(dir, sqlite.Options{Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 300 {
		at := base.Add(time.Duration(i) * time.Millisecond)
		body := strings.Repeat(fmt.Sprint(" w", i, " x", i%17), 20)
		insertIndexed(t, s, store.Post{ID: store.NewID(at), UserID: "u", Title: "t", Body: &body, CreatedAt: at, UpdatedAt: at})
	}
	segments := segmentsOf(t, dir)
	time.Sleep(60 * time.Millisecond) // the merges have begun
	began := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %v while merging (%d segments before); merges logged %d times", time.Since(began), segments, len(logs.FilterMessage("merging the search index's segments").All()))
	if took := time.Since(began); took > 5*time.Second { // one merge step, not all of them
		t.Errorf("Close took %v", took)
	}
	s = open(t, dir, sqlite.Options{})
	found, err := s.ListPosts(t.Context(), store.Filter{Search: words.Parse("t"), Limit: 301})
	if err != nil || len(found) != 300 {
		t.Errorf("found %d, %v", len(found), err)
	}
}

// TestMergesResumeAfterALockHeldAtThePause holds SQLite's write lock from another
// connection (the sqlite3 tool, briefly) over the moment the writes pause, so that the first
// step of mergeWords cannot begin within its 50 ms; once the lock is released the store is idle.
// mergeWords then returns false, commitLoop does not set its timer again, and the index stays
// unmerged until the next write, however long that is. The same happens to a step that takes
// longer than 50 ms (the deadline bounds the whole step: database/sql rolls the transaction
// back, and Commit fails with sql.ErrTxDone), which under `go test -race` without the
// Makefile's checkptr=0 is every step: TestTheIndexIsMergedBetweenWrites fails there.
func TestMergesResumeAfterALockHeldAtThePause(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.Options{})
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	rw := readWrite(t, dir)
	conn, err := rw.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range 300 {
		at := base.Add(time.Duration(i) * time.Millisecond)
		insertIndexed(t, s, store.Post{ID: store.NewID(at), UserID: "alice", Title: fmt.Sprint("merged ", i), CreatedAt: at, UpdatedAt: at})
	}
	// The timer of commitLoop fires 50 ms after the last commit; its BEGIN waits up to 50 ms more.
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	if _, err := conn.ExecContext(t.Context(), "COMMIT"); err != nil {
		t.Fatal(err)
	}
	written := segmentsOf(t, dir)
	const merged = 5 // as TestTheIndexIsMergedBetweenWrites
	deadline := time.Now().Add(5 * time.Second)
	for segmentsOf(t, dir) > merged && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := segmentsOf(t, dir); got > merged {
		t.Errorf("the index has %d segments 5 s after the lock was released (%d when it was), the store idle; want at most %d", got, written, merged)
	}
}
