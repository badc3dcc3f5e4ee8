package sqlite_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
	"github.com/postsedge/caddy-posts/store/words"
)

// seeded returns a store holding n posts of 50 users, one millisecond apart, and their ids.
func seeded(b *testing.B, n int) (*sqlite.Store, []string) {
	s, err := sqlite.Open(b.TempDir(), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ids := make([]string, n)
	body := "a body of a post, of a typical length for a short note that someone wrote"
	for i := range n {
		at := base.Add(time.Duration(i) * time.Millisecond)
		p := store.Post{ID: store.NewID(at), UserID: fmt.Sprint("user", i%50), Title: fmt.Sprint("post ", i), Body: &body, CreatedAt: at, UpdatedAt: at}
		if _, err := s.InsertPost(b.Context(), p); err != nil {
			b.Fatal(err)
		}
		ids[i] = p.ID
	}
	return s, ids
}

// BenchmarkStore times each operation at 2,000 and 20,000 posts; the two sizes side by side
// show whether a cost grows with the table.
func BenchmarkStore(b *testing.B) {
	for _, n := range []int{2_000, 20_000} {
		s, ids := seeded(b, n)
		mid := store.Key{CreatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n/2) * time.Millisecond), ID: ids[n/2]}
		b.Run(fmt.Sprintf("get/%d", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, err := s.GetPost(b.Context(), ids[(i*7919)%n]); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("first-page/%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := s.ListPosts(b.Context(), store.Filter{Limit: 21}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("middle-page/%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := s.ListPosts(b.Context(), store.Filter{After: &mid, Limit: 21}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("user-page/%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := s.ListPosts(b.Context(), store.Filter{UserID: "user7", Limit: 21}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("update/%d", n), func(b *testing.B) {
			title := "changed"
			for i := 0; b.Loop(); i++ {
				k := (i * 7919) % n
				if _, err := s.UpdatePost(b.Context(), ids[k], fmt.Sprint("user", k%50), store.AnyVersion, store.Update{Title: &title, UpdatedAt: time.Now()}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("insert/%d", n), func(b *testing.B) {
			for b.Loop() {
				now := time.Now()
				if _, err := s.InsertPost(b.Context(), store.Post{ID: store.NewID(now), UserID: "bench", Title: "t", CreatedAt: now, UpdatedAt: now}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSearchCost times, side by side, the first page of the feed and the worst search of a
// page, at 200,000 posts: two words each in half of the posts and never in one, whose whole
// lists the search reads to find that no post has both (the measurement behind search_cost,
// caddymodule/config.go). It reports the search's time in pages of the feed.
func BenchmarkSearchCost(b *testing.B) {
	const n = 200_000
	s, err := sqlite.Open(b.TempDir(), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	batch := make([]store.Post, 0, 1000)
	for i := range n {
		at := base.Add(time.Duration(i) * time.Millisecond)
		body := []string{"alpha", "beta"}[i%2] + " of a post, of a typical length for a short note that someone wrote"
		batch = append(batch, store.Post{ID: store.NewID(at), UserID: fmt.Sprint("user", i%50), Title: fmt.Sprint("post ", i), Body: &body, CreatedAt: at, UpdatedAt: at, Version: 1})
		if len(batch) == cap(batch) {
			if _, err := s.InsertPosts(b.Context(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	page, search := store.Filter{Limit: 21}, store.Filter{Search: words.Parse("alpha beta"), Limit: 21}
	var pages, searches time.Duration
	for b.Loop() {
		for _, f := range []struct {
			filter store.Filter
			took   *time.Duration
		}{{page, &pages}, {search, &searches}} {
			began := time.Now()
			if _, err := s.ListPosts(b.Context(), f.filter); err != nil {
				b.Fatal(err)
			}
			*f.took += time.Since(began)
		}
	}
	b.ReportMetric(float64(searches)/float64(pages), "pages/search")
	b.ReportMetric(float64(searches.Microseconds())/float64(b.N), "µs/search")
}

// BenchmarkIndexedInserts measures what the search's index costs a write, side by side: two
// stores of 200,000 posts, one with the three triggers of posts that write the index dropped,
// and in each iteration a round of 3,200 InsertPost calls from 32 goroutines on each, in turns,
// each store's merges of the index between writes (mergeWords) done before the other's round.
// It reports the throughput with the index ÷ without it (go test ./store/sqlite -run '^$'
// -bench IndexedInserts -benchtime 16x).
func BenchmarkIndexedInserts(b *testing.B) {
	const n, writers, each = 200_000, 32, 100
	open := func(indexed bool) *sqlite.Store {
		dir := b.TempDir()
		s, err := sqlite.Open(dir, sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		batch := make([]store.Post, 0, 1000)
		for i := range n {
			at := base.Add(time.Duration(i) * time.Millisecond)
			body := "lorem ipsum dolor sit amet, a post of a typical length for a short note"
			batch = append(batch, store.Post{ID: store.NewID(at), UserID: fmt.Sprint("user", i%50), Title: fmt.Sprint("post ", i), Body: &body, CreatedAt: at, UpdatedAt: at, Version: 1})
			if len(batch) == cap(batch) {
				if _, err := s.InsertPosts(b.Context(), batch); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		s.Close()
		// Merged to one segment, so that no store merges its seeding's while the other runs.
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.DatabaseFile))
		if err != nil {
			b.Fatal(err)
		}
		sqls := []string{`INSERT INTO post_words (post_words) VALUES ('optimize')`}
		if !indexed {
			sqls = append(sqls, "DROP TRIGGER posts_insert_words", "DROP TRIGGER posts_update_words", "DROP TRIGGER posts_delete_words")
		}
		for _, q := range sqls {
			if _, err := db.Exec(q); err != nil {
				b.Fatal(err)
			}
		}
		db.Close()
		if s, err = sqlite.Open(dir, sqlite.Options{}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	with, without := open(true), open(false)
	round := func(s *sqlite.Store) time.Duration {
		began := time.Now()
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				body := "a post written over and over"
				for range each {
					now := time.Now()
					if _, err := s.InsertPost(b.Context(), store.Post{ID: store.NewID(now), UserID: "bench", Title: "benchmark", Body: &body, CreatedAt: now, UpdatedAt: now, Version: 1}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		took := time.Since(began)
		sqlite.AwaitMerges(s) // its own, not in the other's round
		return took
	}
	var withTook, withoutTook time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			withTook += round(with)
			withoutTook += round(without)
		} else {
			withoutTook += round(without)
			withTook += round(with)
		}
	}
	b.ReportMetric(float64(withoutTook)/float64(withTook), "indexed/unindexed")
}
