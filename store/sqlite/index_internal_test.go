package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/words"
)

// TestSearchesFindWritesLeftUnindexed has 32 writers insert posts, each with a word of its
// own, and search for it as soon as its insert returns: every search finds its post alone,
// though the writes share transactions and many of them leave their words for a later one to
// index (commitIndexing), which the test counts, so that it can fail. Once the writes end, the
// committer's idle turn indexes every word left.
func TestSearchesFindWritesLeftUnindexed(t *testing.T) {
	dir := t.TempDir()
	s, c := opened(t, dir)
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 40 {
				word := fmt.Sprintf("w%dx%d", g, i)
				at := base.Add(time.Duration(g*40+i) * time.Millisecond)
				body := "a post of " + word
				p := store.Post{ID: store.NewID(at), UserID: fmt.Sprint("user", g%4), Title: "post", Body: &body, CreatedAt: at, UpdatedAt: at, Version: 1}
				if _, err := s.InsertPost(t.Context(), p); err != nil {
					t.Error(err)
					return
				}
				for _, q := range []string{word + " ", word[:len(word)-1]} { // the word, and a prefix of it
					found, err := s.ListPosts(t.Context(), store.Filter{Search: words.Parse(q), UserID: p.UserID, Limit: 5})
					if err != nil {
						t.Error(err)
						return
					}
					if !slices.ContainsFunc(found, func(f store.Post) bool { return f.ID == p.ID }) {
						t.Errorf("a search of %q as soon as its post was written found %d posts, not it", q, len(found))
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if c.committer.deferred.Load() == 0 {
		t.Error("no transaction left its words unindexed: the test shows nothing")
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, DatabaseFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var due int
		if err := db.QueryRow(`SELECT count(*) FROM post_words_due`).Scan(&due); err != nil || due == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d rows in post_words_due 10 s after the writes ended; want none", due)
		}
	}
}

// TestWordsLeftUnindexedByAnEarlierProcess opens a file whose posts' words wait in
// post_words_due, as a process that ended before indexing them leaves it (here the sqlite3
// tool's insert, whose triggers put them there), and searches at once: the search finds them.
func TestWordsLeftUnindexedByAnEarlierProcess(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	id := store.NewID(at)
	_, err = db.Exec(`INSERT INTO posts (id, user_id, title, body, created_at, updated_at, version) VALUES (?, 'alice', 'left behind', NULL, ?, ?, 1)`, id, at.UnixMilli(), at.UnixMilli())
	if err == nil {
		err = db.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	s, _ = opened(t, dir)
	found, err := s.ListPosts(t.Context(), store.Filter{Search: words.Parse("behind "), Limit: 5})
	if err != nil || len(found) != 1 || found[0].ID != id {
		t.Errorf("a search at once found %+v, %v; want the post whose words waited", found, err)
	}
}

// TestSearchIndexingWhileTheLogIsTruncated has a search find words waiting to be indexed while
// the write before its indexing truncates the log (Store.wrote), which waits for every read to
// end: the search waits for the committer outside its read, so both end.
func TestSearchIndexingWhileTheLogIsTruncated(t *testing.T) {
	s, _ := opened(t, t.TempDir())
	insert := func(body string) error {
		at := time.Now()
		_, err := s.InsertPost(t.Context(), store.Post{ID: store.NewID(at), UserID: "alice", Title: "post", Body: &body, CreatedAt: at, UpdatedAt: at, Version: 1})
		return err
	}
	if err := insert("first"); err != nil {
		t.Fatal(err)
	}
	c, release := holdWriter(t, s)
	defer release()
	inserted := make(chan error, 1)
	go func() { inserted <- insert("second") }()
	waitQueued(t, c, 1)
	c.committer.behind.Store(true)
	searched := make(chan error, 1)
	go func() {
		_, err := s.ListPosts(t.Context(), store.Filter{Search: words.Parse("second "), Limit: 5})
		searched <- err
	}()
	waitQueued(t, c, 2)
	c.walLimit.Store(1)
	c.writes.Store(checkpointEvery - 2) // the insert's write truncates the log
	release()
	for _, done := range []chan error{inserted, searched} {
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the search and the truncation of the log wait for each other")
		}
	}
}

// waitQueued waits until n writes wait for the committer of c.
func waitQueued(t *testing.T, c *conns, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); len(c.committer.queue) < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued; want %d", len(c.committer.queue), n)
		}
	}
}

// TestSearchBesideWordsLeftUnindexed searches alice's posts for a word while a transaction that
// left its words unindexed has committed, after the search looked for words to index: alice's
// post that held the word is deleted, and bob's, created in the same millisecond, takes its row
// id, which the index still gives alice's words. The search finds no post of bob's, nor one
// without the word; the index alone, read as it is, gives bob's.
func TestSearchBesideWordsLeftUnindexed(t *testing.T) {
	s, _ := opened(t, t.TempDir())
	at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	secret, plain := "secret", "plain"
	p := store.Post{ID: store.NewID(at), UserID: "alice", Title: "post", Body: &secret, CreatedAt: at, UpdatedAt: at, Version: 1}
	if _, err := s.InsertPost(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	// A search has its words indexed.
	if found, err := s.ListPosts(t.Context(), store.Filter{Search: words.Parse("secret "), Limit: 5}); err != nil || len(found) != 1 {
		t.Fatalf("a search of alice's post found %d posts, %v", len(found), err)
	}
	c, release := holdWriter(t, s)
	defer release()
	seen := c.committer.deferred.Load()
	q := store.Post{ID: store.NewID(at), UserID: "bob", Title: "post", Body: &plain, CreatedAt: at, UpdatedAt: at, Version: 1}
	// The delete and the insert share a transaction that leaves their words unindexed, as a
	// write waits behind them; that write holds the committer until the searches are done.
	searched := make(chan struct{})
	blocker := &write{ctx: t.Context(), do: func(context.Context, *sql.Tx, *conns) error { <-searched; return nil }, done: make(chan struct{})}
	writes := []*write{
		{ctx: t.Context(), do: func(ctx context.Context, tx *sql.Tx, c *conns) error {
			_, err := tx.ExecContext(ctx, `DELETE FROM posts WHERE id = ?`, p.ID)
			return err
		}, done: make(chan struct{})},
		{ctx: t.Context(), do: func(ctx context.Context, tx *sql.Tx, c *conns) error {
			c.committer.queue <- blocker
			return insertPost(ctx, tx, c, q)
		}, done: make(chan struct{})},
	}
	for _, w := range writes {
		c.committer.queue <- w
	}
	release()
	for _, w := range writes {
		if <-w.done; w.err != nil {
			t.Fatal(w.err)
		}
	}
	if c.committer.deferred.Load() == seen {
		t.Fatal("the writes indexed their words: the test shows nothing")
	}
	for _, f := range []store.Filter{{Search: words.Parse("secret "), UserID: "alice", Limit: 5}, {Search: words.Parse("secret "), Limit: 5}} {
		found, _, err := s.searchRead(t.Context(), f)
		if err != nil || len(found) != 0 {
			t.Errorf("a search of %+v found %d posts (%v); want none", f, len(found), err)
		}
		r, done, err := s.reading()
		if err != nil {
			t.Fatal(err)
		}
		stale, err := search(t.Context(), r.stmt.search[0], f, false)
		done()
		if err != nil || len(stale) != 1 || stale[0].ID != q.ID || !c.state.due.Load() {
			t.Errorf("the index read as it is gave %d posts (%v), words due %v; want bob's, due, to show the test can fail", len(stale), err, c.state.due.Load())
		}
	}
	close(searched)
	<-blocker.done
}
