// Package storetest is the conformance suite of store.Store: one table of behaviours that every
// backend passes, so that a behaviour that differs between backends shows up as a failure of one
// of them. Each backend's tests call Run. It is one file, longer than most, so that the whole
// contract a backend must meet reads in one place; the behaviours that only a copy between
// stores uses (store.CopyTarget) are in copy.go, those of versions in versions.go, those of
// idempotency keys (store.IdempotencyStore) in idempotency.go and idempotency_unavailable.go, and
// those of the event log (store.EventLog) in events.go.
package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// Open returns a new, empty store for one test; the test's cleanup closes it.
type Open func(t *testing.T) store.Store

// base is the createdAt the suite's posts are placed around.
var base = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// Options adapt the suite to a backend that serves tests only and cannot take all of it.
type Options struct {
	// Writers is how many goroutines the concurrent-writers behaviour runs at once; 0 means 32,
	// the load at which the embedded store of earlier releases failed.
	Writers int
	// Updaters is how many goroutines update one post at once, and UpdateRounds how many times
	// each does; 0 means 16 and 20.
	Updaters, UpdateRounds int
	// Reopen returns another store on the database of s, one made by open, as a restart or a
	// second instance would see it; it may close s first, where only one store may have the
	// database open. The behaviours that must outlive a store (the event log's key) need it:
	// nil skips them.
	Reopen func(t *testing.T, s store.Store) store.Store
	// ReadsMayRunAhead says a read may reflect events after the position it notes in a
	// store.Seen (MongoDB's, which notes the position before it reads): then the behaviours of
	// reads beside writers only check that none misses an event up to its position.
	ReadsMayRunAhead bool
}

// Run runs every behaviour against stores made by open, with the default Options.
func Run(t *testing.T, open Open) { RunWith(t, open, Options{}) }

// RunWith runs every behaviour against stores made by open, as opts say.
func RunWith(t *testing.T, open Open, opts Options) {
	writers := cmp.Or(opts.Writers, 32)
	for _, tc := range append([]struct {
		name string
		test func(*testing.T, Open)
	}{
		{"posts come back as stored", testRoundTrip},
		{"ids that name no post are not found", testNotFound},
		{"an id in use is refused", testDuplicateID},
		{"lists come newest first", testList},
		{"keyset pages have no gap or duplicate while others insert", testPagingWhileInserting},
		{"time ranges and both orders page as the model does", testTimeRangesAndOrders},
		{"200 searches of a mixed-script corpus find what the model finds", testSearchMatchesTheModel},
		{"posts of any time are searched in order", testSearchOfAnyTime},
		{"updates are owner-checked", testUpdate},
		{"concurrent updates of one post lose none", func(t *testing.T, open Open) {
			testConcurrentUpdates(t, open, cmp.Or(opts.Updaters, 16), cmp.Or(opts.UpdateRounds, 20))
		}},
		{"deletes are owner-checked", testDelete},
		{fmt.Sprintf("%d concurrent writers all succeed", writers), func(t *testing.T, open Open) { testConcurrentWriters(t, open, writers) }},
		{"versions start at 1 and grow by one with each update", testVersionsGrow},
		{"a write given a version happens only at that version", testConditionalWrites},
		{fmt.Sprintf("of %d concurrent writes at one version, exactly one succeeds", writers), func(t *testing.T, open Open) { testConditionalRace(t, open, writers) }},
		{"profiles are saved and read", testUsers},
		{"a context that ended fails the call and changes nothing", testContext},
		{"a closed store is unavailable", testClosed},
		{"a copy reads every post and profile in id order", testAllInIDOrder},
		{"a copy inserts batches, skipping what is stored", testInsertBatches},
		{"a copy's reads and writes fail on an ended context or a closed store", testCopyUnavailable},
		{"an idempotency key is reserved once per user", testReserveKeys},
		{"an idempotency key under way is taken over once its hold ends", testTakeOverKeys},
		{"an idempotency key keeps its first response", testCompleteKeys},
		{"a post and its idempotency key's response are written together", testInsertPostCompletingKey},
		{"an idempotency key whose create wrote nothing is deleted", testDeleteKeys},
		{"expired idempotency keys count as absent and are swept in batches", testExpiredKeys},
		{"a deleted post's id that an idempotency key reserved is never created again", testDeletedPostIDs},
		{"idempotency keys fail on an ended context or a closed store", testKeysUnavailable},
	}, append(eventTests(opts), seenTests(opts.ReadsMayRunAhead)...)...) {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, open) })
	}
}

// id returns a post id that sorts by n, so tests can name posts by number.
func id(n int) string { return fmt.Sprintf("67d44600%016x", n) }

func newPost(n int, user string, created time.Time) store.Post {
	return store.Post{ID: id(n), UserID: user, Title: fmt.Sprintf("post %d", n), CreatedAt: created, UpdatedAt: created}
}

func ptr(s string) *string { return &s }

func insert(t *testing.T, s store.Store, posts ...store.Post) {
	t.Helper()
	for _, p := range posts {
		if _, err := s.InsertPost(t.Context(), p); err != nil {
			t.Fatalf("InsertPost(%s): %v", p.ID, err)
		}
	}
}

func get(t *testing.T, s store.Store, id string) store.Post {
	t.Helper()
	p, err := s.GetPost(t.Context(), id)
	if err != nil {
		t.Fatalf("GetPost(%s): %v", id, err)
	}
	return p
}

func list(t *testing.T, s store.Store, f store.Filter) []store.Post {
	t.Helper()
	posts, err := s.ListPosts(t.Context(), f)
	if err != nil {
		t.Fatalf("ListPosts(%+v): %v", f, err)
	}
	return posts
}

// ids lists the ids of posts, in order.
func ids(posts []store.Post) []string {
	out := make([]string, len(posts))
	for i, p := range posts {
		out[i] = p.ID
	}
	return out
}

// diff describes how got differs from want, or is "" when they are the same post.
func diff(got, want store.Post) string {
	var d []string
	if got.ID != want.ID || got.UserID != want.UserID || got.Title != want.Title {
		d = append(d, fmt.Sprintf("id/user/title %s/%q/%q, want %s/%q/%q", got.ID, got.UserID, got.Title, want.ID, want.UserID, want.Title))
	}
	if show(got.Body) != show(want.Body) {
		d = append(d, fmt.Sprintf("body %s, want %s", show(got.Body), show(want.Body)))
	}
	if want := max(want.Version, 1); got.Version != want { // InsertPost stores no version as 1
		d = append(d, fmt.Sprintf("version %d, want %d", got.Version, want))
	}
	for _, tm := range []struct {
		name      string
		got, want time.Time
	}{{"createdAt", got.CreatedAt, want.CreatedAt}, {"updatedAt", got.UpdatedAt, want.UpdatedAt}} {
		if !tm.got.Equal(tm.want) || tm.got.Location() != time.UTC {
			d = append(d, fmt.Sprintf("%s %v, want %v in UTC", tm.name, tm.got, tm.want))
		}
	}
	return strings.Join(d, "; ")
}

func show(s *string) string {
	if s == nil {
		return "<nil>"
	}
	if len(*s) > 40 {
		return fmt.Sprintf("%q… (%d bytes)", (*s)[:40], len(*s))
	}
	return fmt.Sprintf("%q", *s)
}

func testRoundTrip(t *testing.T, open Open) {
	s := open(t)
	// Not UTC and finer than a millisecond: both are normalized on the way through.
	created := time.Date(2025, 3, 14, 17, 9, 26, 535_897_932, time.FixedZone("UTC+2", 2*60*60))
	stored := time.Date(2025, 3, 14, 15, 9, 26, 535_000_000, time.UTC)
	long := strings.Repeat("é<\"\\\n", 10_000) // 50,000 characters that JSON and SQL both escape
	tests := []struct {
		name       string
		post, want store.Post
	}{
		{"times come back in UTC, to the millisecond",
			store.Post{ID: id(1), UserID: "alice", Title: "Hello", Body: ptr("First."), CreatedAt: created, UpdatedAt: created.Add(time.Second)},
			store.Post{ID: id(1), UserID: "alice", Title: "Hello", Body: ptr("First."), CreatedAt: stored, UpdatedAt: stored.Add(time.Second)}},
		{"no body stays no body",
			newPost(2, "bob", base), newPost(2, "bob", base)},
		{"an empty body stays apart from no body",
			store.Post{ID: id(3), UserID: "bob", Title: "t", Body: ptr(""), CreatedAt: base, UpdatedAt: base},
			store.Post{ID: id(3), UserID: "bob", Title: "t", Body: ptr(""), CreatedAt: base, UpdatedAt: base}},
		{"unicode comes back byte for byte",
			store.Post{ID: id(4), UserID: "chloé", Title: "Grüße 👋 \u202egnp.exe ﷽ a\u0301", Body: ptr("日本語\x00nul\ttab 🏳️‍🌈"), CreatedAt: base, UpdatedAt: base},
			store.Post{ID: id(4), UserID: "chloé", Title: "Grüße 👋 \u202egnp.exe ﷽ a\u0301", Body: ptr("日本語\x00nul\ttab 🏳️‍🌈"), CreatedAt: base, UpdatedAt: base}},
		{"a body of the largest size comes back whole",
			store.Post{ID: id(5), UserID: "bob", Title: "long", Body: &long, CreatedAt: base, UpdatedAt: base},
			store.Post{ID: id(5), UserID: "bob", Title: "long", Body: &long, CreatedAt: base, UpdatedAt: base}},
		{"a post given no version is at version 1",
			store.Post{ID: id(7), UserID: "bob", Title: "new", CreatedAt: base, UpdatedAt: base},
			store.Post{ID: id(7), UserID: "bob", Title: "new", CreatedAt: base, UpdatedAt: base, Version: 1}},
		{"a post's version is kept, as a copy between stores needs",
			store.Post{ID: id(8), UserID: "bob", Title: "copied", CreatedAt: base, UpdatedAt: base, Version: 42},
			store.Post{ID: id(8), UserID: "bob", Title: "copied", CreatedAt: base, UpdatedAt: base, Version: 42}},
		{"text that looks like SQL or a query operator is only text",
			store.Post{ID: id(6), UserID: `{"$ne": null}`, Title: `'); DROP TABLE posts; --`, Body: ptr(`{"$gt": ""}`), CreatedAt: base, UpdatedAt: base},
			store.Post{ID: id(6), UserID: `{"$ne": null}`, Title: `'); DROP TABLE posts; --`, Body: ptr(`{"$gt": ""}`), CreatedAt: base, UpdatedAt: base}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			insert(t, s, tc.post)
			if d := diff(get(t, s, tc.post.ID), tc.want); d != "" {
				t.Errorf("GetPost: %s", d)
			}
			found := list(t, s, store.Filter{UserID: tc.post.UserID, Limit: 10})
			if i := slices.Index(ids(found), tc.post.ID); i < 0 {
				t.Errorf("ListPosts of its user misses it")
			} else if d := diff(found[i], tc.want); d != "" {
				t.Errorf("ListPosts: %s", d)
			}
		})
	}
}

func testNotFound(t *testing.T, open Open) {
	s := open(t)
	insert(t, s, newPost(1, "alice", base))
	for _, bad := range []string{id(2), "", "zz", strings.ToUpper(id(1)), id(1) + "0", id(1)[:23], "' OR '1'='1", `{"$ne":null}`} {
		t.Run(fmt.Sprintf("GetPost(%q)", bad), func(t *testing.T) {
			if _, err := s.GetPost(t.Context(), bad); !errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrUnavailable) {
				t.Errorf("error = %v; want ErrNotFound", err)
			}
			if _, err := s.UpdatePost(t.Context(), bad, "alice", store.AnyVersion, store.Update{Title: ptr("x"), UpdatedAt: base}); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("UpdatePost error = %v; want ErrNotFound", err)
			}
			if _, err := s.DeletePost(t.Context(), bad, "alice", store.AnyVersion); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("DeletePost error = %v; want ErrNotFound", err)
			}
		})
	}
	if got := get(t, s, id(1)); got.Title != "post 1" {
		t.Errorf("the existing post changed: %+v", got)
	}
}

func testDuplicateID(t *testing.T, open Open) {
	s := open(t)
	insert(t, s, newPost(1, "alice", base))
	if _, err := s.InsertPost(t.Context(), newPost(1, "mallory", base.Add(time.Hour))); err == nil {
		t.Fatal("a second post with the same id was stored")
	}
	if got := get(t, s, id(1)); got.UserID != "alice" || !got.CreatedAt.Equal(base) {
		t.Errorf("after the refused insert the post is %+v; want alice's, unchanged", got)
	}
}

func testList(t *testing.T, open Open) {
	s := open(t)
	if got := list(t, s, store.Filter{Limit: 10}); got == nil || len(got) != 0 {
		t.Errorf("an empty store lists %#v; want an empty, non-nil slice", got)
	}
	// Inserted out of order, three posts sharing a createdAt and an older post with the largest
	// id: neither insertion order nor id alone gives the expected order.
	insert(t, s,
		newPost(3, "alice", base.Add(time.Second)),
		newPost(1, "alice", base),
		newPost(9, "bob", base.Add(-time.Second)),
		newPost(5, "alice", base.Add(2*time.Second)),
		newPost(2, "bob", base),
		newPost(4, "alice", base),
	)
	after := func(n int, created time.Time) *store.Key { return &store.Key{CreatedAt: created, ID: id(n)} }
	tests := []struct {
		name   string
		filter store.Filter
		want   []int
	}{
		{"newest first, ties broken by the larger id", store.Filter{Limit: 10}, []int{5, 3, 4, 2, 1, 9}},
		{"the limit cuts the list", store.Filter{Limit: 2}, []int{5, 3}},
		{"a user's posts only", store.Filter{UserID: "bob", Limit: 10}, []int{2, 9}},
		{"a user with no posts has none", store.Filter{UserID: "carol", Limit: 10}, nil},
		{"a user id matches exactly, not by prefix or case", store.Filter{UserID: "Alice", Limit: 10}, nil},
		{"after a key, the posts that follow it", store.Filter{After: after(4, base), Limit: 10}, []int{2, 1, 9}},
		{"after a key inside a tie, the rest of the tie", store.Filter{After: after(2, base), Limit: 10}, []int{1, 9}},
		{"after a key and for a user", store.Filter{UserID: "alice", After: after(3, base.Add(time.Second)), Limit: 1}, []int{4}},
		{"after a key of no stored post, by its place", store.Filter{After: after(99, base.Add(1500*time.Millisecond)), Limit: 10}, []int{3, 4, 2, 1, 9}},
		{"after the last post, nothing", store.Filter{After: after(9, base.Add(-time.Second)), Limit: 10}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := make([]string, len(tc.want))
			for i, n := range tc.want {
				want[i] = id(n)
			}
			if got := ids(list(t, s, tc.filter)); !slices.Equal(got, want) {
				t.Errorf("got %v; want %v", got, want)
			}
		})
	}
}

func testPagingWhileInserting(t *testing.T, open Open) {
	s := open(t)
	const n = 60
	var want []string // newest first
	for i := range n {
		p := newPost(i, fmt.Sprint("user", i%3), base.Add(time.Duration(i/2)*time.Millisecond)) // pairs share a time
		insert(t, s, p)
		want = append([]string{p.ID}, want...)
	}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { // newer posts keep arriving while the pages are read
		for i := 1000; ctx.Err() == nil; i++ {
			_, _ = s.InsertPost(ctx, newPost(i, "user0", base.Add(time.Hour+time.Duration(i)*time.Millisecond)))
		}
	})
	var got []string
	var after *store.Key
	for {
		page := list(t, s, store.Filter{After: after, Limit: 7})
		if len(page) == 0 {
			break
		}
		for _, p := range page {
			if p.CreatedAt.Before(base.Add(time.Hour)) {
				got = append(got, p.ID)
			}
		}
		k := store.KeyOf(page[len(page)-1])
		after = &k
	}
	stop()
	wg.Wait()
	if !slices.Equal(got, want) {
		t.Errorf("paged through %d posts %v;\nwant %d %v", len(got), got, len(want), want)
	}
}

func testUpdate(t *testing.T, open Open) {
	s := open(t)
	later := base.Add(time.Minute)
	tests := []struct {
		name   string
		start  store.Post
		owner  string
		update store.Update
		want   store.Post // zero: ErrNotFound and the post unchanged
	}{
		{"the title alone changes the title and updatedAt",
			store.Post{Title: "before", Body: ptr("kept")}, "alice", store.Update{Title: ptr("after"), UpdatedAt: later},
			store.Post{Title: "after", Body: ptr("kept")}},
		{"the body alone keeps the title",
			store.Post{Title: "kept", Body: ptr("before")}, "alice", store.Update{Body: ptr("after"), UpdatedAt: later},
			store.Post{Title: "kept", Body: ptr("after")}},
		{"unsetting the body removes it",
			store.Post{Title: "kept", Body: ptr("gone")}, "alice", store.Update{UnsetBody: true, UpdatedAt: later},
			store.Post{Title: "kept"}},
		{"a body can be set to empty",
			store.Post{Title: "kept", Body: ptr("before")}, "alice", store.Update{Body: ptr(""), UpdatedAt: later},
			store.Post{Title: "kept", Body: ptr("")}},
		{"a body is added where there was none",
			store.Post{Title: "kept"}, "alice", store.Update{Title: ptr("both"), Body: ptr("new"), UpdatedAt: later},
			store.Post{Title: "both", Body: ptr("new")}},
		{"someone else's post is not found and unchanged",
			store.Post{Title: "alice's", Body: ptr("hers")}, "mallory", store.Update{Title: ptr("owned"), UnsetBody: true, UpdatedAt: later},
			store.Post{}},
		{"an owner matches exactly, not by case",
			store.Post{Title: "alice's"}, "ALICE", store.Update{Title: ptr("owned"), UpdatedAt: later},
			store.Post{}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := tc.start
			start.ID, start.UserID, start.CreatedAt, start.UpdatedAt = id(i), "alice", base, base
			insert(t, s, start)
			got, err := s.UpdatePost(t.Context(), start.ID, tc.owner, store.AnyVersion, tc.update)
			want := tc.want
			if want.Title == "" {
				if !errors.Is(err, store.ErrNotFound) {
					t.Errorf("error = %v; want ErrNotFound", err)
				}
				if d := diff(get(t, s, start.ID), start); d != "" {
					t.Errorf("the post changed: %s", d)
				}
				return
			}
			if err != nil {
				t.Fatalf("UpdatePost: %v", err)
			}
			want.ID, want.UserID, want.CreatedAt, want.UpdatedAt, want.Version = start.ID, "alice", base, later, 2
			if d := diff(got.Post, want); d != "" {
				t.Errorf("returned: %s", d)
			}
			if d := diff(get(t, s, start.ID), want); d != "" {
				t.Errorf("stored: %s", d)
			}
		})
	}
}

func testConcurrentUpdates(t *testing.T, open Open, writers, rounds int) {
	s := open(t)
	insert(t, s, store.Post{ID: id(1), UserID: "alice", Title: "title 0", Body: ptr("body 0"), CreatedAt: base, UpdatedAt: base})
	// Half the writers change only the title, half only the body: a write that read the post and
	// wrote it back whole would undo the others' changes.
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := range writers {
		wg.Go(func() {
			for r := 1; r <= rounds; r++ {
				u := store.Update{UpdatedAt: base.Add(time.Duration(r) * time.Second)}
				if w%2 == 0 {
					u.Title = ptr(fmt.Sprintf("title %d", r))
				} else {
					u.Body = ptr(fmt.Sprintf("body %d", r))
				}
				if _, err := s.UpdatePost(t.Context(), id(1), "alice", store.AnyVersion, u); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("UpdatePost: %v", err)
	}
	got := get(t, s, id(1))
	if got.Title == "title 0" || got.Body == nil || *got.Body == "body 0" {
		t.Errorf("after the updates the post is %q / %s: an update was lost", got.Title, show(got.Body))
	}
	if want := int64(1 + writers*rounds); got.Version != want {
		t.Errorf("after %d updates the version is %d; want %d", writers*rounds, got.Version, want)
	}
}

func testDelete(t *testing.T, open Open) {
	s := open(t)
	insert(t, s, newPost(1, "alice", base), newPost(2, "bob", base))
	if _, err := s.DeletePost(t.Context(), id(1), "bob", store.AnyVersion); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting alice's post as bob: error = %v; want ErrNotFound", err)
	}
	get(t, s, id(1))
	if _, err := s.DeletePost(t.Context(), id(1), "alice", store.AnyVersion); err != nil {
		t.Fatalf("DeletePost: %v", err)
	}
	if _, err := s.GetPost(t.Context(), id(1)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetPost after delete: error = %v; want ErrNotFound", err)
	}
	if _, err := s.DeletePost(t.Context(), id(1), "alice", store.AnyVersion); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting it again: error = %v; want ErrNotFound", err)
	}
	if got := ids(list(t, s, store.Filter{Limit: 10})); !slices.Equal(got, []string{id(2)}) {
		t.Errorf("left %v; want bob's post only", got)
	}
}

func testConcurrentWriters(t *testing.T, open Open, writers int) {
	s := open(t)
	const each = 15
	var wg sync.WaitGroup
	errs := make(chan error, writers*each*3)
	for w := range writers {
		wg.Go(func() {
			user := fmt.Sprint("user", w)
			for i := range each {
				p := store.Post{ID: store.NewID(base), UserID: user, Title: "t", CreatedAt: base, UpdatedAt: base}
				if _, err := s.InsertPost(t.Context(), p); err != nil {
					errs <- fmt.Errorf("insert: %w", err)
					continue
				}
				if _, err := s.UpdatePost(t.Context(), p.ID, user, store.AnyVersion, store.Update{Title: ptr("u"), UpdatedAt: base}); err != nil {
					errs <- fmt.Errorf("update: %w", err)
				}
				if i%3 == 0 {
					if _, err := s.DeletePost(t.Context(), p.ID, user, store.AnyVersion); err != nil {
						errs <- fmt.Errorf("delete: %w", err)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got, want := len(list(t, s, store.Filter{Limit: writers * each})), writers*(each-5); got != want {
		t.Errorf("%d posts left; want %d", got, want)
	}
}

func testUsers(t *testing.T, open Open) {
	s := open(t)
	save := func(u store.User) {
		t.Helper()
		if err := s.SaveUser(t.Context(), u); err != nil {
			t.Fatalf("SaveUser: %v", err)
		}
	}
	getUser := func(id string) store.User {
		t.Helper()
		u, err := s.GetUser(t.Context(), id)
		if err != nil {
			t.Fatalf("GetUser(%s): %v", id, err)
		}
		return u
	}
	describe := func(u store.User) string {
		return fmt.Sprintf("%s name %s email %s at %s", u.ID, show(u.Name), show(u.Email), u.UpdatedAt.Format(time.RFC3339Nano))
	}
	t.Run("a new profile is stored", func(t *testing.T) {
		save(store.User{ID: "carol", Name: ptr("Carol"), Email: ptr("carol@example.com"), UpdatedAt: base})
		want := store.User{ID: "carol", Name: ptr("Carol"), Email: ptr("carol@example.com"), UpdatedAt: base}
		if got := getUser("carol"); describe(got) != describe(want) {
			t.Errorf("got %s; want %s", describe(got), describe(want))
		}
	})
	t.Run("a save without name or email keeps them and moves updatedAt", func(t *testing.T) {
		save(store.User{ID: "carol", UpdatedAt: base.Add(time.Minute)})
		want := store.User{ID: "carol", Name: ptr("Carol"), Email: ptr("carol@example.com"), UpdatedAt: base.Add(time.Minute)}
		if got := getUser("carol"); describe(got) != describe(want) {
			t.Errorf("got %s; want %s", describe(got), describe(want))
		}
	})
	t.Run("a new name replaces the old and keeps the email", func(t *testing.T) {
		save(store.User{ID: "carol", Name: ptr("Carol Smith"), UpdatedAt: base.Add(2 * time.Minute)})
		want := store.User{ID: "carol", Name: ptr("Carol Smith"), Email: ptr("carol@example.com"), UpdatedAt: base.Add(2 * time.Minute)}
		if got := getUser("carol"); describe(got) != describe(want) {
			t.Errorf("got %s; want %s", describe(got), describe(want))
		}
	})
	t.Run("a user without a profile is not found", func(t *testing.T) {
		if _, err := s.GetUser(t.Context(), "dave"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("error = %v; want ErrNotFound", err)
		}
	})
	t.Run("many users are read at once, missing ones left out", func(t *testing.T) {
		save(store.User{ID: "erin", UpdatedAt: base})
		users, err := s.GetUsers(t.Context(), []string{"carol", "dave", "erin", `"); --`})
		if err != nil {
			t.Fatalf("GetUsers: %v", err)
		}
		var got []string
		for _, u := range users {
			got = append(got, u.ID)
		}
		slices.Sort(got)
		if !slices.Equal(got, []string{"carol", "erin"}) {
			t.Errorf("got %v; want [carol erin]", got)
		}
		if users, err := s.GetUsers(t.Context(), nil); err != nil || len(users) != 0 {
			t.Errorf("GetUsers(nil) = %v, %v; want none", users, err)
		}
	})
}

func testContext(t *testing.T, open Open) {
	s := open(t)
	insert(t, s, newPost(1, "alice", base))
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"cancelled", cancelled}, {"past its deadline", expired}} {
		for _, op := range ops() {
			t.Run(op.name+" with a context "+c.name, func(t *testing.T) {
				if err := op.do(c.ctx, s); !errors.Is(err, store.ErrUnavailable) {
					t.Errorf("error = %v; want ErrUnavailable", err)
				}
			})
		}
	}
	if got := ids(list(t, s, store.Filter{Limit: 10})); !slices.Equal(got, []string{id(1)}) {
		t.Errorf("after the failed calls the store holds %v; want only %s", got, id(1))
	}
	if d := diff(get(t, s, id(1)), newPost(1, "alice", base)); d != "" {
		t.Errorf("the post changed: %s", d)
	}
	if _, err := s.GetUser(t.Context(), "alice"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a profile was saved: GetUser error = %v", err)
	}
}

func testClosed(t *testing.T, open Open) {
	s := open(t)
	insert(t, s, newPost(1, "alice", base))
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, op := range ops() {
		t.Run(op.name, func(t *testing.T) {
			if err := op.do(t.Context(), s); !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("error = %v; want ErrUnavailable", err)
			}
		})
	}
}

// ops calls each method once with arguments that would succeed on a working store.
func ops() []struct {
	name string
	do   func(context.Context, store.Store) error
} {
	return []struct {
		name string
		do   func(context.Context, store.Store) error
	}{
		{"GetPost", func(ctx context.Context, s store.Store) error { _, err := s.GetPost(ctx, id(1)); return err }},
		{"ListPosts", func(ctx context.Context, s store.Store) error {
			_, err := s.ListPosts(ctx, store.Filter{Limit: 10})
			return err
		}},
		{"ListPosts of a user after a key", func(ctx context.Context, s store.Store) error {
			_, err := s.ListPosts(ctx, store.Filter{UserID: "alice", After: &store.Key{CreatedAt: base.Add(time.Hour), ID: id(9)}, Limit: 10})
			return err
		}},
		{"InsertPost", func(ctx context.Context, s store.Store) error {
			_, err := s.InsertPost(ctx, newPost(2, "alice", base))
			return err
		}},
		{"UpdatePost", func(ctx context.Context, s store.Store) error {
			_, err := s.UpdatePost(ctx, id(1), "alice", store.AnyVersion, store.Update{Title: ptr("changed"), UpdatedAt: base.Add(time.Hour)})
			return err
		}},
		{"DeletePost", func(ctx context.Context, s store.Store) error {
			_, err := s.DeletePost(ctx, id(1), "alice", store.AnyVersion)
			return err
		}},
		{"SaveUser", func(ctx context.Context, s store.Store) error {
			return s.SaveUser(ctx, store.User{ID: "alice", Name: ptr("Alice"), UpdatedAt: base})
		}},
		{"GetUser", func(ctx context.Context, s store.Store) error { _, err := s.GetUser(ctx, "alice"); return err }},
		{"GetUsers", func(ctx context.Context, s store.Store) error {
			_, err := s.GetUsers(ctx, []string{"alice"})
			return err
		}},
		{"Ping", func(ctx context.Context, s store.Store) error { return s.Ping(ctx) }},
	}
}
