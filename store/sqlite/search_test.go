package sqlite_test

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
	"github.com/postsedge/caddy-posts/store/words"
)

// FuzzSearchIsPlainText searches a few posts, whose words include FTS5's operators, for any
// text: FTS5 never reads it as its syntax (no query fails, none is an operator), and each finds
// what words.Query.Match finds.
func FuzzSearchIsPlainText(f *testing.F) {
	for _, seed := range []string{
		`"`, `""`, `"unterminated`, `*`, `edge*`, `-edge`, `^edge`, `title:edge`, `words:edge`, `(edge)`, `edge)`,
		`NEAR(edge caddy)`, `NEAR(edge caddy, 2)`, `edge AND caddy`, `edge OR proxy`, `NOT proxy`, `edge NOT proxy`,
		`and`, `OR`, `not near`, `{words}: edge`, `+edge`, `edge + caddy`, `·`, `·616c696365`, `\x00edge`, `é`, "日本",
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	s, err := sqlite.Open(dir, sqlite.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	texts := []string{"Edge and caddy", "not near the proxy", "OR words title", "日本の edge", "AND NOT NEAR", "alice's edges"}
	var all []store.Post
	for i, text := range texts {
		p := store.Post{ID: store.NewID(base), UserID: "alice", Title: text, CreatedAt: base.Add(time.Duration(i) * time.Second), UpdatedAt: base}
		if _, err := s.InsertPost(f.Context(), p); err != nil {
			f.Fatal(err)
		}
		all = append(all, p)
	}
	slices.Reverse(all) // newest first
	f.Fuzz(func(t *testing.T, q string) {
		query := words.Parse(q)
		if query.Empty() {
			return
		}
		for _, user := range []string{"", "alice", `"bob" OR *`} {
			found, err := s.ListPosts(t.Context(), store.Filter{UserID: user, Search: query, Limit: 10})
			if err != nil {
				t.Fatalf("a search of %q (user %q): %v", q, user, err)
			}
			var want []string
			for _, p := range all {
				if (user == "" || user == p.UserID) && query.Match(words.Of(p.Title)) {
					want = append(want, p.ID)
				}
			}
			var got []string
			for _, p := range found {
				got = append(got, p.ID)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("a search of %q (user %q) found %v; want %v", q, user, got, want)
			}
		}
	})
}

// The index of words keeps every prefix a query may have: 1 to words.MaxPrefix characters.
func TestTheIndexKeepsEveryPrefixAQueryMayHave(t *testing.T) {
	var lengths []string
	for n := 1; n <= words.MaxPrefix; n++ {
		lengths = append(lengths, strconv.Itoa(n))
	}
	if want := "prefix = '" + strings.Join(lengths, " ") + "'"; !strings.Contains(sqlite.Migrations[7], want) {
		t.Errorf("migration 8 does not create post_words with %s", want)
	}
}

// TestTheIndexFollowsWritesCommittedTogether writes posts from many goroutines at once, so that
// the committer runs them in shared transactions, each in its savepoint: inserts, updates and
// deletes of their words, and writes that fail on their own (an update or a delete of another
// version, rolled back to their savepoints) among them. Afterwards a search of each word finds
// exactly the stored posts that hold it, newest first, through every page: the words each
// transaction left in post_words_due went into the index once, as its writes left them.
func TestTheIndexFollowsWritesCommittedTogether(t *testing.T) {
	s, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	vocabulary := []string{"amber", "birch", "cedar", "delta", "ember", "fjord"}
	text := func(r int) string { // two words of the vocabulary, from r
		return vocabulary[r%len(vocabulary)] + " " + vocabulary[(r/len(vocabulary))%len(vocabulary)]
	}
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := "user" + strconv.Itoa(g)
			var mine []store.Post
			for i := range 40 {
				r := g*7919 + i*104729
				switch {
				case i%4 == 3 && len(mine) > 0: // an update, of the right version or not
					p := &mine[r%len(mine)]
					title := text(r / 3)
					version := p.Version
					if i%8 == 3 {
						version++ // fails on its own
					}
					_, err := s.UpdatePost(t.Context(), p.ID, user, version, store.Update{Title: &title, UpdatedAt: base})
					switch {
					case i%8 == 3 && !errors.Is(err, store.ErrNotFound):
						t.Errorf("an update of another version: %v; want store.ErrNotFound", err)
					case i%8 != 3 && err != nil:
						t.Error(err)
					case err == nil:
						p.Version++
					}
				case i%5 == 4 && len(mine) > 0: // a delete, of the right version or not
					k := r % len(mine)
					version := mine[k].Version
					if i%10 == 4 {
						version += 5
					}
					_, err := s.DeletePost(t.Context(), mine[k].ID, user, version)
					switch {
					case i%10 == 4 && !errors.Is(err, store.ErrNotFound):
						t.Errorf("a delete of another version: %v; want store.ErrNotFound", err)
					case i%10 != 4 && err != nil:
						t.Error(err)
					case err == nil:
						mine = slices.Delete(mine, k, k+1)
					}
				default:
					at := base.Add(time.Duration(r%5000) * time.Millisecond) // many posts share a millisecond
					body := text(r / 7)
					p := store.Post{ID: store.NewID(at), UserID: user, Title: text(r), Body: &body, CreatedAt: at, UpdatedAt: at, Version: 1}
					if _, err := s.InsertPost(t.Context(), p); err != nil {
						t.Error(err)
						continue
					}
					mine = append(mine, p)
				}
			}
		}()
	}
	wg.Wait()
	var stored []store.Post
	for p, err := range s.AllPosts(t.Context(), 100) {
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, p)
	}
	slices.SortFunc(stored, func(a, b store.Post) int {
		return -cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	for _, w := range vocabulary {
		var want, got []string
		for _, p := range stored {
			body := ""
			if p.Body != nil {
				body = *p.Body
			}
			if slices.Contains(words.Of(p.Title, body), w) {
				want = append(want, p.ID)
			}
		}
		f := store.Filter{Search: words.Parse(w + " "), Limit: 7}
		for {
			page, err := s.ListPosts(t.Context(), f)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range page {
				got = append(got, p.ID)
			}
			if len(page) < f.Limit {
				break
			}
			last := page[len(page)-1]
			f.After = &store.Key{CreatedAt: last.CreatedAt, ID: last.ID}
		}
		if !slices.Equal(got, want) {
			t.Errorf("a search of %q found %d posts; want the %d stored that hold it", w, len(got), len(want))
		}
	}
}

// insertIndexed inserts p into s and searches, which has its words indexed: a transaction, and
// so a segment of post_words, for each post (the store lets a write's words wait otherwise).
func insertIndexed(t *testing.T, s *sqlite.Store, p store.Post) {
	t.Helper()
	if _, err := s.InsertPost(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListPosts(t.Context(), store.Filter{Search: words.Parse(p.Title), Limit: 1}); err != nil {
		t.Fatal(err)
	}
}

// TestTheIndexIsMergedBetweenWrites writes 300 posts one at a time, each indexed by a search
// after it (insertIndexed) and so its own segment of post_words, which FTS5 merges four at a time as they come: once the
// writes pause, mergeWords merges each level's segments down to one, and every post is still
// found.
func TestTheIndexIsMergedBetweenWrites(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.Options{})
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	const n = 300
	for i := range n {
		at := base.Add(time.Duration(i) * time.Millisecond)
		p := store.Post{ID: store.NewID(at), UserID: "alice", Title: "merged " + strconv.Itoa(i), CreatedAt: at, UpdatedAt: at}
		insertIndexed(t, s, p)
	}
	db := direct(t, dir)
	segments := func() (n int) {
		if err := db.QueryRow(`SELECT count(DISTINCT segid) FROM post_words_idx`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	written := segments()
	// 300 segments merged four at a time leave a level of each power of 4, and up to three
	// segments in each; two at a time, at most one in each of the levels up to 2^9.
	const merged = 5
	deadline := time.Now().Add(20 * time.Second)
	for segments() > merged && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := segments(); got > merged || got >= written {
		t.Errorf("the index has %d segments after the writes paused, %d right after them; want at most %d", got, written, merged)
	}
	found, err := s.ListPosts(t.Context(), store.Filter{Search: words.Parse("merged"), Limit: n + 1})
	if err != nil || len(found) != n {
		t.Errorf("a search of every post found %d posts, %v; want %d", len(found), err, n)
	}
}
