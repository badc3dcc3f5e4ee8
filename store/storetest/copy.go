package storetest

// The behaviours of store.CopyTarget, which `caddy posts-copy` reads and writes through.

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// copyStore is a store that a copy can write.
type copyStore interface {
	store.Store
	store.CopyTarget
}

// copyTarget is the store of open as a store.CopyTarget.
func copyTarget(t *testing.T, open Open) copyStore {
	t.Helper()
	s, ok := open(t).(copyStore)
	if !ok {
		t.Fatal("the store is not a store.CopyTarget")
	}
	return s
}

// collect reads all of values.
func collect[T any](t *testing.T, values func(context.Context, int) iter.Seq2[T, error], batch int) []T {
	t.Helper()
	var all []T
	for v, err := range values(t.Context(), batch) {
		if err != nil {
			t.Fatalf("after %d values: %v", len(all), err)
		}
		all = append(all, v)
	}
	return all
}

// copyUserIDs sort in this order by bytes, not by letters: upper case before lower case, and a
// letter with an accent after z.
var copyUserIDs = []string{"0", "Bob", "_x", "alice", "alice2", "zoë", "émile"}

func describeUser(u store.User) string {
	return fmt.Sprintf("%s name %s email %s at %s", u.ID, show(u.Name), show(u.Email), u.UpdatedAt.Format(time.RFC3339Nano))
}

func testAllInIDOrder(t *testing.T, open Open) {
	s := copyTarget(t, open)
	t.Run("an empty store yields nothing", func(t *testing.T) {
		if posts := collect(t, s.AllPosts, 10); len(posts) != 0 {
			t.Errorf("%d posts", len(posts))
		}
		if users := collect(t, s.AllUsers, 10); len(users) != 0 {
			t.Errorf("%d profiles", len(users))
		}
	})
	// Created in an order other than that of their ids, and inserted in a third, so that only
	// the order of ids gives the order of ids.
	var want []store.Post
	for n := 1; n <= 23; n++ {
		p := newPost(n, fmt.Sprint("user", n%3), base.Add(time.Duration(n%5)*time.Minute))
		p.Version = int64(1 + n%4)
		switch n {
		case 3:
			p.Body = ptr("")
		case 4:
			p.Body, p.Title = ptr("ünïcødé 🙂 \"quoted\"\n"), "Grüße"
		}
		want = append(want, p)
	}
	for _, i := range rand.Perm(len(want)) {
		insert(t, s, want[i])
	}
	var wantUsers []store.User
	for i, uid := range copyUserIDs {
		u := store.User{ID: uid, UpdatedAt: base.Add(time.Duration(i) * time.Second)}
		if i%2 == 0 {
			u.Name, u.Email = ptr("Name of "+uid), ptr(uid+"@example.com")
		}
		wantUsers = append(wantUsers, u)
	}
	for _, i := range rand.Perm(len(wantUsers)) {
		if err := s.SaveUser(t.Context(), wantUsers[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, batch := range []int{1, 7, 23, 1000} {
		t.Run(fmt.Sprintf("every post comes once, in ascending id order, in pages of %d", batch), func(t *testing.T) {
			got := collect(t, s.AllPosts, batch)
			if !slices.Equal(ids(got), ids(want)) {
				t.Fatalf("ids %v; want %v", ids(got), ids(want))
			}
			for i := range got {
				if d := diff(got[i], want[i]); d != "" {
					t.Errorf("%s: %s", want[i].ID, d)
				}
			}
		})
		t.Run(fmt.Sprintf("every profile comes once, in byte order of ids, in pages of %d", batch), func(t *testing.T) {
			got := collect(t, s.AllUsers, batch)
			if len(got) != len(wantUsers) {
				t.Fatalf("%d profiles; want %d", len(got), len(wantUsers))
			}
			for i := range got {
				if describeUser(got[i]) != describeUser(wantUsers[i]) {
					t.Errorf("profile %d is %s; want %s", i, describeUser(got[i]), describeUser(wantUsers[i]))
				}
			}
		})
	}
	t.Run("a reader may stop early", func(t *testing.T) {
		read := 0
		for _, err := range s.AllPosts(t.Context(), 5) {
			if err != nil {
				t.Fatal(err)
			}
			if read++; read == 7 {
				break
			}
		}
		if got := len(collect(t, s.AllPosts, 5)); got != len(want) {
			t.Errorf("a later read yields %d posts; want %d", got, len(want))
		}
	})
}

func testInsertBatches(t *testing.T, open Open) {
	s := copyTarget(t, open)
	insertPosts := func(posts ...store.Post) int {
		t.Helper()
		n, err := s.InsertPosts(t.Context(), posts)
		if err != nil {
			t.Fatalf("InsertPosts: %v", err)
		}
		return n
	}
	// Not UTC and finer than a millisecond, as in testRoundTrip.
	created := time.Date(2025, 3, 14, 17, 9, 26, 535_897_932, time.FixedZone("UTC+2", 2*60*60))
	first := []store.Post{
		{ID: id(1), UserID: "alice", Title: "no body", CreatedAt: created, UpdatedAt: created.Add(time.Hour), Version: 12},
		{ID: id(2), UserID: "alice", Title: "an empty body", Body: ptr(""), CreatedAt: created, UpdatedAt: created, Version: 1},
		{ID: id(3), UserID: "émile", Title: "Grüße 🙂", Body: ptr(strings.Repeat("é<\"\\\n", 1000)), CreatedAt: base, UpdatedAt: base},
	}
	normalized := func(p store.Post) store.Post {
		p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC().Truncate(time.Millisecond), p.UpdatedAt.UTC().Truncate(time.Millisecond)
		return p
	}
	t.Run("a batch is stored with its ids, bodies, times and versions", func(t *testing.T) {
		if n := insertPosts(first...); n != len(first) {
			t.Errorf("%d stored; want %d", n, len(first))
		}
		for _, p := range first {
			if d := diff(get(t, s, p.ID), normalized(p)); d != "" {
				t.Errorf("%s: %s", p.ID, d)
			}
		}
		if got := ids(list(t, s, store.Filter{UserID: "alice", Limit: 10})); !slices.Equal(got, []string{id(2), id(1)}) {
			t.Errorf("alice's list: %v", got)
		}
	})
	t.Run("posts stored already are skipped and left as they are", func(t *testing.T) {
		changed := first[0]
		changed.Title, changed.Body, changed.Version = "changed", ptr("changed"), 13
		if n := insertPosts(changed, newPost(4, "bob", base), first[1], newPost(5, "bob", base)); n != 2 {
			t.Errorf("%d stored; want 2", n)
		}
		if d := diff(get(t, s, id(1)), normalized(first[0])); d != "" {
			t.Errorf("the post stored already changed: %s", d)
		}
		if d := diff(get(t, s, id(4)), newPost(4, "bob", base)); d != "" {
			t.Errorf("a new post of the batch: %s", d)
		}
	})
	t.Run("an id twice in a batch is stored once, as it comes first", func(t *testing.T) {
		again := newPost(6, "bob", base)
		again.Title = "second"
		if n := insertPosts(newPost(6, "bob", base), again); n != 1 {
			t.Errorf("%d stored; want 1", n)
		}
		if got := get(t, s, id(6)).Title; got != "post 6" {
			t.Errorf("title %q; want %q", got, "post 6")
		}
	})
	t.Run("an id that is not a post id fails the batch and stores none of it", func(t *testing.T) {
		for _, bad := range []string{"", "not-an-id", strings.ToUpper(id(8))} {
			batch := []store.Post{newPost(7, "bob", base), {ID: bad, UserID: "bob", Title: "bad", CreatedAt: base, UpdatedAt: base}}
			if n, err := s.InsertPosts(t.Context(), batch); err == nil {
				t.Errorf("id %q: %d stored and no error", bad, n)
			}
			if _, err := s.GetPost(t.Context(), id(7)); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("id %q: the valid post of the batch was stored (%v)", bad, err)
			}
		}
	})
	t.Run("an empty batch stores nothing", func(t *testing.T) {
		if n := insertPosts(); n != 0 {
			t.Errorf("%d stored", n)
		}
		if n, err := s.InsertUsers(t.Context(), nil); n != 0 || err != nil {
			t.Errorf("InsertUsers(nil) = %d, %v", n, err)
		}
	})
	t.Run("profiles are stored as they are, and those stored already are left", func(t *testing.T) {
		users := []store.User{
			{ID: "alice", Name: ptr("Alice"), Email: ptr("alice@example.com"), UpdatedAt: base},
			{ID: "bob", UpdatedAt: base.Add(time.Second)},
			{ID: "émile", Name: ptr(""), UpdatedAt: base.Add(2 * time.Second)},
		}
		if n, err := s.InsertUsers(t.Context(), users); n != 3 || err != nil {
			t.Fatalf("InsertUsers = %d, %v; want 3", n, err)
		}
		changed := users[0]
		changed.Name = ptr("Mallory")
		if n, err := s.InsertUsers(t.Context(), []store.User{changed, {ID: "carol", UpdatedAt: base}}); n != 1 || err != nil {
			t.Errorf("InsertUsers = %d, %v; want 1", n, err)
		}
		for _, want := range append(users, store.User{ID: "carol", UpdatedAt: base}) {
			got, err := s.GetUser(t.Context(), want.ID)
			if err != nil || describeUser(got) != describeUser(want) {
				t.Errorf("GetUser(%s) = %s, %v; want %s", want.ID, describeUser(got), err, describeUser(want))
			}
		}
	})
}

func testCopyUnavailable(t *testing.T, open Open) {
	s := copyTarget(t, open)
	insert(t, s, newPost(1, "alice", base))
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	ops := []struct {
		name string
		do   func(context.Context) error
	}{
		{"AllPosts", func(ctx context.Context) error { return firstError(s.AllPosts(ctx, 10)) }},
		{"AllUsers", func(ctx context.Context) error { return firstError(s.AllUsers(ctx, 10)) }},
		{"InsertPosts", func(ctx context.Context) error {
			_, err := s.InsertPosts(ctx, []store.Post{newPost(2, "alice", base)})
			return err
		}},
		{"InsertUsers", func(ctx context.Context) error {
			_, err := s.InsertUsers(ctx, []store.User{{ID: "alice", UpdatedAt: base}})
			return err
		}},
	}
	for _, op := range ops {
		t.Run(op.name+" with a cancelled context fails and changes nothing", func(t *testing.T) {
			if err := op.do(cancelled); !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("error = %v; want ErrUnavailable", err)
			}
		})
	}
	if got := ids(collect(t, s.AllPosts, 10)); !slices.Equal(got, []string{id(1)}) {
		t.Errorf("the store holds %v; want only %s", got, id(1))
	}
	if users := collect(t, s.AllUsers, 10); len(users) != 0 {
		t.Errorf("a profile was stored: %v", users)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		t.Run(op.name+" on a closed store fails", func(t *testing.T) {
			if err := op.do(t.Context()); !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("error = %v; want ErrUnavailable", err)
			}
		})
	}
}

// firstError is the first error values yields, if any.
func firstError[T any](values iter.Seq2[T, error]) error {
	for _, err := range values {
		if err != nil {
			return err
		}
	}
	return nil
}
