//go:build !race

// TestCopy moves thousands of posts through the embedded store several times, and
// TestCopyBatchesStayUnderMaxBatchBytes 10 MB: a quarter of a minute under the race detector, for
// a copy that runs on one goroutine. make test runs them in its step without the race detector.

package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

func TestCopy(t *testing.T) {
	const n = 2345
	source := open(t)
	seed(t, source, n)

	t.Run("into an empty store every post and profile arrives unchanged, batch after batch", func(t *testing.T) {
		target := open(t)
		var progress []store.CopyProgress
		done := copyOK(t, source, target, store.CopyOptions{Batch: 100, Progress: func(p store.CopyProgress) { progress = append(progress, p) }})
		if got := done.Posts; got.Source != n || got.Target != n || got.Inserted != n || got.Extra != 0 || got.SourceSum != got.TargetSum {
			t.Errorf("posts: %+v", got)
		}
		if got := done.Users; got.Source != 3 || got.Target != 3 || got.Inserted != 3 || got.SourceSum != got.TargetSum {
			t.Errorf("profiles: %+v", got)
		}
		want := slices.Collect(values(t, source.AllPosts(t.Context(), 1000)))
		got := slices.Collect(values(t, target.AllPosts(t.Context(), 1000)))
		if len(got) != n || !slices.EqualFunc(got, want, samePost) {
			t.Errorf("the target holds %d posts, not equal to the source's %d", len(got), len(want))
		}
		copies := 0
		for _, p := range progress {
			if p.Stage == "copying posts" {
				copies++
			}
		}
		if copies != (n+99)/100 {
			t.Errorf("%d batches of posts reported; want %d", copies, (n+99)/100)
		}
		if last := progress[len(progress)-1]; last.Stage != "comparing profiles" || last.Done != 3 {
			t.Errorf("the last progress is %+v", last)
		}
	})

	t.Run("a copy again stores nothing and still finds the stores equal", func(t *testing.T) {
		target := open(t)
		copyOK(t, source, target, store.CopyOptions{})
		if done := copyOK(t, source, target, store.CopyOptions{}); done.Posts.Inserted != 0 || done.Users.Inserted != 0 {
			t.Errorf("the second copy stored %d posts and %d profiles", done.Posts.Inserted, done.Users.Inserted)
		}
	})

	t.Run("posts the target holds already are skipped", func(t *testing.T) {
		target := open(t)
		seed(t, target, 1000)
		if done := copyOK(t, source, target, store.CopyOptions{Batch: 333}); done.Posts.Inserted != n-1000 || done.Users.Inserted != 0 {
			t.Errorf("stored %d posts and %d profiles; want %d and 0", done.Posts.Inserted, done.Users.Inserted, n-1000)
		}
	})

	t.Run("a copy stopped half-way completes when run again", func(t *testing.T) {
		target := open(t)
		ctx, cancel := context.WithCancel(t.Context())
		_, err := store.Copy(ctx, source, target, store.CopyOptions{Batch: 500, Progress: func(p store.CopyProgress) {
			if p.Done >= 1000 {
				cancel()
			}
		}})
		if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Copy = %v; want ErrUnavailable from a cancelled context", err)
		}
		if got := count(t, target.AllPosts(t.Context(), 1000)); got != 1000 {
			t.Errorf("the stopped copy stored %d posts; want 1000", got)
		}
		if done := copyOK(t, source, target, store.CopyOptions{Batch: 500}); done.Posts.Inserted != n-1000 {
			t.Errorf("the second copy stored %d posts; want %d", done.Posts.Inserted, n-1000)
		}
	})

	t.Run("a post that differs on the target is reported and left as it is", func(t *testing.T) {
		target := open(t)
		changed := post(7)
		changed.Body = nil // the source's has an empty body
		if _, err := target.InsertPost(t.Context(), changed); err != nil {
			t.Fatal(err)
		}
		done, err := store.Copy(t.Context(), source, target, store.CopyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := done.Posts; got.OK() || got.Differing != 1 || !slices.Equal(got.DifferingIDs, []string{changed.ID}) || got.Missing != 0 || got.SourceSum != got.TargetSum {
			t.Errorf("posts: %+v; want one differing, %s", got, changed.ID)
		}
		if stored, _ := target.GetPost(t.Context(), changed.ID); stored.Body != nil {
			t.Errorf("the target's post was overwritten: body %q", *stored.Body)
		}
	})

	t.Run("a post at another version on the target is reported and left as it is", func(t *testing.T) {
		target := open(t)
		changed := post(8)
		changed.Version++
		if _, err := target.InsertPost(t.Context(), changed); err != nil {
			t.Fatal(err)
		}
		done, err := store.Copy(t.Context(), source, target, store.CopyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := done.Posts; got.OK() || got.Differing != 1 || !slices.Equal(got.DifferingIDs, []string{changed.ID}) {
			t.Errorf("posts: %+v; want one differing, %s", got, changed.ID)
		}
		if stored, _ := target.GetPost(t.Context(), changed.ID); stored.Version != changed.Version {
			t.Errorf("the target's post was overwritten: version %d; want %d", stored.Version, changed.Version)
		}
	})

	t.Run("posts of the target's own are counted apart and are no failure", func(t *testing.T) {
		target := open(t)
		own := post(n + 10)
		if _, err := target.InsertPost(t.Context(), own); err != nil {
			t.Fatal(err)
		}
		done := copyOK(t, source, target, store.CopyOptions{})
		if got := done.Posts; got.Extra != 1 || got.Target != n+1 || got.SourceSum == got.TargetSum {
			t.Errorf("posts: %+v; want one extra and different sums", got)
		}
	})

	t.Run("a post written to the source after its posts were copied is reported missing", func(t *testing.T) {
		from, target := open(t), open(t)
		seed(t, from, 10)
		late := post(5000)
		done, err := store.Copy(t.Context(), from, target, store.CopyOptions{Progress: func(p store.CopyProgress) {
			if p.Stage == "copying profiles" {
				from.InsertPost(context.Background(), late)
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		if got := done.Posts; got.OK() || got.Missing != 1 || !slices.Equal(got.MissingIDs, []string{late.ID}) || got.SourceSum == got.TargetSum {
			t.Errorf("posts: %+v; want %s missing", got, late.ID)
		}
	})
}

func TestCopyBatchesStayUnderMaxBatchBytes(t *testing.T) {
	source := open(t)
	var big []store.Post
	for i := 1; i <= 100; i++ {
		p := post(i)
		p.Body = ptr(strings.Repeat("é", 50_000)) // 100 KB each, 10 MB in all
		big = append(big, p)
	}
	if _, err := source.InsertPosts(t.Context(), big); err != nil {
		t.Fatal(err)
	}
	target := &recordingTarget{Store: open(t)}
	copyOK(t, source, target, store.CopyOptions{Batch: 1000})
	if len(target.batches) < 2 {
		t.Errorf("%d batch(es) of 10 MB; want them cut at %d bytes", len(target.batches), store.MaxBatchBytes)
	}
	for _, size := range target.batches {
		if size > store.MaxBatchBytes+big[0].Size() {
			t.Errorf("a batch of %d bytes", size)
		}
	}
}

// recordingTarget records the size of each batch of posts inserted into a real store.
type recordingTarget struct {
	*sqlite.Store
	batches []int
}

func (r *recordingTarget) InsertPosts(ctx context.Context, posts []store.Post) (int, error) {
	size := 0
	for _, p := range posts {
		size += p.Size()
	}
	r.batches = append(r.batches, size)
	return r.Store.InsertPosts(ctx, posts)
}
