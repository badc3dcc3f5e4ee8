package sqlite

import (
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
// index (commitIndexing), which the test counts, so that it can fail. Once the writes end, no
// word is left unindexed.
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
	var due int
	if err := db.QueryRow(`SELECT count(*) FROM post_words_due`).Scan(&due); err != nil || due != 0 {
		t.Errorf("%d rows, %v, in post_words_due once the writes ended; want none", due, err)
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
