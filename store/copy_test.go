package store_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

var base = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

func ptr(s string) *string { return &s }

// post n of a seeded store: ids ascend with n, as store.NewID's do; bodies and versions vary.
func post(n int) store.Post {
	at := base.Add(time.Duration(n) * time.Second)
	p := store.Post{ID: fmt.Sprintf("67d44600%016x", n), UserID: fmt.Sprint("user", n%7), Title: fmt.Sprint("post ", n), CreatedAt: at, UpdatedAt: at.Add(time.Minute),
		Version: int64(1 + n%5)}
	switch n % 4 {
	case 1:
		p.Body = ptr("")
	case 2:
		p.Body = ptr(fmt.Sprintf("ünïcødé 🙂 %d\n", n))
	case 3:
		p.Body = ptr(strings.Repeat("x", n%500))
	}
	return p
}

func users() []store.User {
	return []store.User{
		{ID: "user0", Name: ptr("Zero"), Email: ptr("zero@example.com"), UpdatedAt: base},
		{ID: "user1", UpdatedAt: base.Add(time.Second)},
		{ID: "user2", Name: ptr(""), UpdatedAt: base.Add(2 * time.Second)},
	}
}

// open opens a store on a directory of its own, closed when the test ends.
func open(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// seed stores posts 1 to n and the users in s.
func seed(t testing.TB, s store.CopyTarget, n int) {
	t.Helper()
	for from := 1; from <= n; from += 1000 {
		var batch []store.Post
		for i := from; i <= n && i < from+1000; i++ {
			batch = append(batch, post(i))
		}
		if _, err := s.InsertPosts(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.InsertUsers(context.Background(), users()); err != nil {
		t.Fatal(err)
	}
}

func copyOK(t *testing.T, from store.CopySource, to store.CopyTarget, opts store.CopyOptions) store.Copied {
	t.Helper()
	done, err := store.Copy(t.Context(), from, to, opts)
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	if !done.OK() {
		t.Errorf("Copy found the stores differ: %+v", done)
	}
	return done
}

func TestCopyRefusesASourceOutOfOrder(t *testing.T) {
	source := listedSource{post(2), post(1)}
	_, err := store.Copy(t.Context(), source, open(t), store.CopyOptions{})
	if err == nil || !strings.Contains(err.Error(), "not in ascending order") {
		t.Errorf("Copy = %v; want a refusal of the order", err)
	}
}

// listedSource yields its posts in the order given, and no profile: a source that breaks the
// order, which no store does.
type listedSource []store.Post

func (l listedSource) AllPosts(context.Context, int) iter.Seq2[store.Post, error] {
	return func(yield func(store.Post, error) bool) {
		for _, p := range l {
			if !yield(p, nil) {
				return
			}
		}
	}
}

func (l listedSource) AllUsers(context.Context, int) iter.Seq2[store.User, error] {
	return func(func(store.User, error) bool) {}
}

// values yields the values of all, failing the test on an error.
func values[T any](t *testing.T, all iter.Seq2[T, error]) iter.Seq[T] {
	return func(yield func(T) bool) {
		for v, err := range all {
			if err != nil {
				t.Fatal(err)
			}
			if !yield(v) {
				return
			}
		}
	}
}

func count[T any](t *testing.T, all iter.Seq2[T, error]) int {
	n := 0
	for range values(t, all) {
		n++
	}
	return n
}

func samePost(a, b store.Post) bool {
	return a.ID == b.ID && a.UserID == b.UserID && a.Title == b.Title && (a.Body == nil) == (b.Body == nil) &&
		(a.Body == nil || *a.Body == *b.Body) && a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt) && a.Version == b.Version
}
