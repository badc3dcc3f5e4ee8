package storetest

// The behaviours of store.IdempotencyStore, which posts.Service.CreateOnce keeps the records of
// idempotency keys through.

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// keyStore is a store that keeps idempotency keys.
type keyStore interface {
	store.Store
	store.IdempotencyStore
}

// keysOf is the store of open as a store.IdempotencyStore.
func keysOf(t *testing.T, open Open) keyStore {
	t.Helper()
	s, ok := open(t).(keyStore)
	if !ok {
		t.Fatal("the store is not a store.IdempotencyStore")
	}
	return s
}

// record is a record under way of user and key, reserved at base, held for a minute, expiring
// after a day.
func record(user, key, fingerprint string, n int) store.IdempotencyRecord {
	return store.IdempotencyRecord{UserID: user, Key: key, Fingerprint: fingerprint, PostID: id(n), Attempt: 1,
		LockedUntil: base.Add(time.Minute), CreatedAt: base, ExpiresAt: base.Add(24 * time.Hour)}
}

// describeRecord renders every field of r, its response's body as a length and a digest of it.
func describeRecord(r store.IdempotencyRecord) string {
	s := fmt.Sprintf("%q/%q fingerprint %s post %s attempt %d locked until %s created %s expires %s",
		r.UserID, r.Key, r.Fingerprint, r.PostID, r.Attempt, stamp(r.LockedUntil), stamp(r.CreatedAt), stamp(r.ExpiresAt))
	if r.Response == nil {
		return s + ", under way"
	}
	return s + fmt.Sprintf(", done: %d %v body %s", r.Response.Status, r.Response.Header, showBytes(r.Response.Body))
}

// stamp is t to the millisecond, with its zone, so that a time not in UTC shows.
func stamp(t time.Time) string { return t.Format("2006-01-02T15:04:05.000 MST") }

func showBytes(b []byte) string {
	if len(b) > 40 {
		return fmt.Sprintf("%q… (%d bytes)", b[:40], len(b))
	}
	return fmt.Sprintf("%q", b)
}

func reserve(t *testing.T, s keyStore, r store.IdempotencyRecord, now time.Time) (store.IdempotencyRecord, bool) {
	t.Helper()
	stored, reserved, err := s.ReserveKey(t.Context(), r, now)
	if err != nil {
		t.Fatalf("ReserveKey(%q, %q): %v", r.UserID, r.Key, err)
	}
	return stored, reserved
}

// current is the record of user and key as a reservation at now finds it (which reserves the
// key when there is none, as a record that says so).
func current(t *testing.T, s keyStore, user, key string, now time.Time) store.IdempotencyRecord {
	t.Helper()
	probe := record(user, key, "probe", 999)
	stored, reserved := reserve(t, s, probe, now)
	if reserved {
		return store.IdempotencyRecord{Fingerprint: "none: the key was free"}
	}
	return stored
}

func testReserveKeys(t *testing.T, open Open) {
	s := keysOf(t, open)
	first := record("alice", "k1", "f1", 1)
	// Not UTC and finer than a millisecond: both are normalized on the way through.
	first.LockedUntil = base.Add(time.Minute + 123_456*time.Nanosecond).In(time.FixedZone("UTC+2", 2*60*60))
	want := first
	want.LockedUntil = base.Add(time.Minute)
	t.Run("a free key is reserved and reads back as given, times in UTC to the millisecond", func(t *testing.T) {
		stored, reserved := reserve(t, s, first, base)
		if !reserved || describeRecord(stored) != describeRecord(want) {
			t.Errorf("got %s (reserved %v); want %s", describeRecord(stored), reserved, describeRecord(want))
		}
	})
	t.Run("the same key again finds the first record, whatever the second asks", func(t *testing.T) {
		stored, reserved := reserve(t, s, record("alice", "k1", "f2", 2), base.Add(time.Second))
		if reserved || describeRecord(stored) != describeRecord(want) {
			t.Errorf("got %s (reserved %v); want the first, %s", describeRecord(stored), reserved, describeRecord(want))
		}
	})
	for _, other := range []store.IdempotencyRecord{
		record("bob", "k1", "f1", 3),
		record("alice", "k2", "f1", 4),
		record("alice", "K1", "f1", 5),
		record(`{"$ne": null}`, `'); DROP TABLE idempotency_keys; --`, "f1", 6),
		record("chloé", strings.Repeat("~", 255), "f1", 7),
	} {
		t.Run(fmt.Sprintf("user %q and key %q are a key of their own", other.UserID, other.Key), func(t *testing.T) {
			if stored, reserved := reserve(t, s, other, base); !reserved || describeRecord(stored) != describeRecord(other) {
				t.Errorf("got %s (reserved %v); want %s", describeRecord(stored), reserved, describeRecord(other))
			}
		})
	}
	t.Run("of many reservations of one key at once, one succeeds", func(t *testing.T) {
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			reserved int
			errs     []error
		)
		for n := range 8 {
			wg.Go(func() {
				_, ok, err := s.ReserveKey(t.Context(), record("dave", "race", fmt.Sprint("f", n), 10+n), base)
				mu.Lock()
				defer mu.Unlock()
				if ok {
					reserved++
				}
				if err != nil {
					errs = append(errs, err)
				}
			})
		}
		wg.Wait()
		if reserved != 1 || len(errs) != 0 {
			t.Errorf("%d reserved, errors %v; want 1 and none", reserved, errs)
		}
	})
}

func testTakeOverKeys(t *testing.T, open Open) {
	s := keysOf(t, open)
	r := record("alice", "k", "f", 1)
	reserve(t, s, r, base)
	takeOver := func(attempt int, now, until time.Time) bool {
		t.Helper()
		took, err := s.TakeOverKey(t.Context(), "alice", "k", attempt, now, until)
		if err != nil {
			t.Fatalf("TakeOverKey: %v", err)
		}
		return took
	}
	t.Run("a key still held is not taken over", func(t *testing.T) {
		if takeOver(1, base.Add(59*time.Second), base.Add(2*time.Minute)) {
			t.Error("it was")
		}
	})
	t.Run("a key whose hold has ended is taken over, its post id kept", func(t *testing.T) {
		if !takeOver(1, base.Add(time.Minute), base.Add(3*time.Minute)) {
			t.Fatal("it was not")
		}
		want := r
		want.Attempt, want.LockedUntil = 2, base.Add(3*time.Minute)
		if got := current(t, s, "alice", "k", base.Add(time.Minute)); describeRecord(got) != describeRecord(want) {
			t.Errorf("the record is %s; want %s", describeRecord(got), describeRecord(want))
		}
	})
	t.Run("the attempt taken over from cannot take it again", func(t *testing.T) {
		if takeOver(1, base.Add(time.Hour), base.Add(2*time.Hour)) {
			t.Error("it could")
		}
	})
	t.Run("a released key is taken over at once, by one attempt", func(t *testing.T) {
		if err := s.ReleaseKey(t.Context(), "alice", "k", 1); err != nil {
			t.Fatal(err)
		}
		if takeOver(2, base.Add(2*time.Minute), base.Add(4*time.Minute)) {
			t.Fatal("a release by an attempt that no longer held the key ended the hold of the one that does")
		}
		if err := s.ReleaseKey(t.Context(), "alice", "k", 2); err != nil {
			t.Fatal(err)
		}
		var took int
		for range 3 {
			if takeOver(2, base.Add(2*time.Minute), base.Add(4*time.Minute)) {
				took++
			}
		}
		if took != 1 {
			t.Errorf("taken over %d times; want once", took)
		}
		if got := current(t, s, "alice", "k", base.Add(2*time.Minute)); got.Attempt != 3 || got.PostID != r.PostID {
			t.Errorf("the record is %s; want attempt 3 with post %s", describeRecord(got), r.PostID)
		}
	})
	t.Run("an expired key is not taken over", func(t *testing.T) {
		if takeOver(3, base.Add(25*time.Hour), base.Add(26*time.Hour)) {
			t.Error("it was")
		}
	})
}

// response is a response whose body holds every byte value and whose header repeats a field.
func response(status int, size int) store.Response {
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i)
	}
	return store.Response{Status: status, Body: body,
		Header: map[string][]string{"Content-Type": {"application/json"}, "Location": {"/posts/" + id(1)}, "Vary": {"Accept", "Origin"}}}
}

func testCompleteKeys(t *testing.T, open Open) {
	s := keysOf(t, open)
	r := record("alice", "k", "f", 1)
	reserve(t, s, r, base)
	first := response(201, 300_000)
	t.Run("a completed key reads back with its response byte for byte", func(t *testing.T) {
		if err := s.CompleteKey(t.Context(), "alice", "k", first); err != nil {
			t.Fatal(err)
		}
		want := r
		want.Response = &first
		got := current(t, s, "alice", "k", base.Add(time.Second))
		if describeRecord(got) != describeRecord(want) || !bytes.Equal(got.Response.Body, first.Body) {
			t.Errorf("the record is %s; want %s", describeRecord(got), describeRecord(want))
		}
	})
	t.Run("a completed key keeps its first response, and cannot be taken over, released or deleted", func(t *testing.T) {
		if err := s.CompleteKey(t.Context(), "alice", "k", response(200, 10)); err != nil {
			t.Fatal(err)
		}
		if took, err := s.TakeOverKey(t.Context(), "alice", "k", 1, base.Add(time.Hour), base.Add(2*time.Hour)); took || err != nil {
			t.Errorf("TakeOverKey = %v, %v", took, err)
		}
		for _, err := range []error{s.ReleaseKey(t.Context(), "alice", "k", 1), s.DeleteKey(t.Context(), "alice", "k", 1)} {
			if err != nil {
				t.Error(err)
			}
		}
		got := current(t, s, "alice", "k", base.Add(time.Hour))
		if got.Response == nil || got.Response.Status != 201 || !bytes.Equal(got.Response.Body, first.Body) || got.LockedUntil.Equal(time.UnixMilli(0)) {
			t.Errorf("the record is %s; want it done with the first response", describeRecord(got))
		}
	})
	t.Run("an empty body is kept as empty", func(t *testing.T) {
		reserve(t, s, record("alice", "empty", "f", 2), base)
		if err := s.CompleteKey(t.Context(), "alice", "empty", store.Response{Status: 204}); err != nil {
			t.Fatal(err)
		}
		if got := current(t, s, "alice", "empty", base); got.Response == nil || got.Response.Status != 204 || len(got.Response.Body) != 0 {
			t.Errorf("the record is %s", describeRecord(got))
		}
	})
}

func testInsertPostCompletingKey(t *testing.T, open Open) {
	s := keysOf(t, open)
	r := record("alice", "k", "f", 1)
	reserve(t, s, r, base)
	res := response(201, 100)
	t.Run("the post is stored and the key completed", func(t *testing.T) {
		if _, inserted, err := s.InsertPostCompletingKey(t.Context(), newPost(1, "alice", base), "k", res); !inserted || err != nil {
			t.Fatalf("InsertPostCompletingKey = %v, %v", inserted, err)
		}
		if d := diff(get(t, s, id(1)), newPost(1, "alice", base)); d != "" {
			t.Errorf("the post: %s", d)
		}
		if got := current(t, s, "alice", "k", base); got.Response == nil || !bytes.Equal(got.Response.Body, res.Body) {
			t.Errorf("the record is %s; want it done", describeRecord(got))
		}
	})
	t.Run("a post id in use fails it, and the key stays under way", func(t *testing.T) {
		reserve(t, s, record("alice", "k2", "f", 1), base)
		if _, inserted, err := s.InsertPostCompletingKey(t.Context(), newPost(1, "alice", base.Add(time.Hour)), "k2", res); inserted || err == nil {
			t.Fatalf("a second post with the same id was stored: %v, %v", inserted, err)
		}
		if got := current(t, s, "alice", "k2", base); got.Response != nil {
			t.Errorf("the record is %s; want it under way", describeRecord(got))
		}
		if d := diff(get(t, s, id(1)), newPost(1, "alice", base)); d != "" {
			t.Errorf("the post changed: %s", d)
		}
	})
}

func testDeleteKeys(t *testing.T, open Open) {
	s := keysOf(t, open)
	reserve(t, s, record("alice", "k", "f", 1), base)
	if err := s.DeleteKey(t.Context(), "alice", "k", 2); err != nil {
		t.Fatal(err)
	}
	t.Run("an attempt that does not hold a key cannot delete it", func(t *testing.T) {
		if got := current(t, s, "alice", "k", base); got.Fingerprint != "f" {
			t.Errorf("the record is %s", describeRecord(got))
		}
	})
	if err := s.DeleteKey(t.Context(), "alice", "k", 1); err != nil {
		t.Fatal(err)
	}
	t.Run("a deleted key is free for another request", func(t *testing.T) {
		if _, reserved := reserve(t, s, record("alice", "k", "other", 2), base); !reserved {
			t.Error("it is not")
		}
	})
}

// sweepKeys is how many records (and deleted ids kept) a sweep of s at now deletes, limit at most.
func sweepKeys(t *testing.T, s keyStore, now time.Time, limit int) int {
	t.Helper()
	n, err := s.DeleteExpiredKeys(t.Context(), now, limit)
	if err != nil {
		t.Fatalf("DeleteExpiredKeys: %v", err)
	}
	return n
}

func testExpiredKeys(t *testing.T, open Open) {
	s := keysOf(t, open)
	for n := range 5 {
		r := record("alice", fmt.Sprint("old", n), "f", n)
		r.ExpiresAt = base.Add(time.Duration(n+1) * time.Hour)
		reserve(t, s, r, base)
	}
	done := record("alice", "done", "f", 9)
	done.ExpiresAt = base.Add(time.Hour)
	reserve(t, s, done, base)
	if err := s.CompleteKey(t.Context(), "alice", "done", response(201, 10)); err != nil {
		t.Fatal(err)
	}
	t.Run("an expired key is reserved again as if free, its response gone", func(t *testing.T) {
		again := record("alice", "done", "new", 10)
		again.CreatedAt, again.ExpiresAt = base.Add(time.Hour), base.Add(25*time.Hour)
		stored, reserved := reserve(t, s, again, base.Add(time.Hour))
		if !reserved || describeRecord(stored) != describeRecord(again) {
			t.Errorf("got %s (reserved %v); want %s", describeRecord(stored), reserved, describeRecord(again))
		}
	})
	sweep := func(now time.Time, limit int) int { return sweepKeys(t, s, now, limit) }
	t.Run("a sweep deletes at most its limit of expired keys, and only those", func(t *testing.T) {
		// At base+3h, old0, old1 and old2 have expired.
		if n := sweep(base.Add(3*time.Hour), 2); n != 2 {
			t.Errorf("the first sweep deleted %d; want 2", n)
		}
		if n := sweep(base.Add(3*time.Hour), 2); n != 1 {
			t.Errorf("the second sweep deleted %d; want 1", n)
		}
		if n := sweep(base.Add(3*time.Hour), 2); n != 0 {
			t.Errorf("the third sweep deleted %d; want 0", n)
		}
		for n := range 5 {
			got := current(t, s, "alice", fmt.Sprint("old", n), base.Add(3*time.Hour))
			if live := n >= 3; live != (got.Fingerprint == "f") {
				t.Errorf("old%d: %s", n, describeRecord(got))
			}
		}
		if got := current(t, s, "alice", "done", base.Add(3*time.Hour)); got.Fingerprint != "new" {
			t.Errorf("the key reserved again was swept: %s", describeRecord(got))
		}
	})
}

func testDeletedPostIDs(t *testing.T, open Open) {
	s := keysOf(t, open)
	log := eventLog(t, s)
	// Two creates under keys, as posts.Service.CreateOnce makes them: k's attempt stored its post
	// and stopped before it completed the key; done's stored its post with its response.
	reserve(t, s, record("alice", "k", "f", 1), base)
	insert(t, s, newPost(1, "alice", base))
	reserve(t, s, record("alice", "done", "f", 2), base)
	if _, inserted, err := s.InsertPostCompletingKey(t.Context(), newPost(2, "alice", base), "done", response(201, 10)); !inserted || err != nil {
		t.Fatalf("InsertPostCompletingKey = %v, %v", inserted, err)
	}
	for _, n := range []int{1, 2} {
		if _, err := s.DeletePost(t.Context(), id(n), "alice", store.AnyVersion); err != nil {
			t.Fatalf("DeletePost(%s): %v", id(n), err)
		}
	}
	refused := func(t *testing.T, n int, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrDeleted) {
			t.Errorf("the insert of %s again: %v; want store.ErrDeleted", id(n), err)
		}
		if p, err := s.GetPost(t.Context(), id(n)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("after it the post is %+v, %v; want none", p, err)
		}
	}
	t.Run("an insert of a deleted post's id is refused, and stores nothing", func(t *testing.T) {
		_, err := s.InsertPost(t.Context(), newPost(1, "alice", base.Add(time.Hour)))
		refused(t, 1, err)
	})
	t.Run("an insert completing the key is refused, and the key stays under way", func(t *testing.T) {
		_, inserted, err := s.InsertPostCompletingKey(t.Context(), newPost(1, "alice", base.Add(time.Hour)), "k", response(201, 10))
		if inserted {
			t.Error("it says it inserted")
		}
		refused(t, 1, err)
		if got := current(t, s, "alice", "k", base); got.Response != nil {
			t.Errorf("the record is %s; want it under way", describeRecord(got))
		}
	})
	t.Run("the id of a post whose key is done is refused too", func(t *testing.T) {
		_, err := s.InsertPost(t.Context(), newPost(2, "alice", base.Add(time.Hour)))
		refused(t, 2, err)
	})
	t.Run("an update or a delete of a deleted post's id finds no post", func(t *testing.T) {
		if _, err := s.UpdatePost(t.Context(), id(1), "alice", store.AnyVersion, store.Update{Title: ptr("back"), UpdatedAt: base}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("UpdatePost: %v; want store.ErrNotFound", err)
		}
		if _, err := s.DeletePost(t.Context(), id(1), "alice", store.AnyVersion); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("DeletePost: %v; want store.ErrNotFound", err)
		}
	})
	t.Run("the log holds the creates' and the deletes' events, and nothing else", func(t *testing.T) {
		var want []string
		for _, n := range []int{1, 2} {
			want = append(want, describe(store.Event{Kind: store.EventCreated, Post: store.Post{ID: id(n), UserID: "alice", Title: fmt.Sprintf("post %d", n), CreatedAt: base, UpdatedAt: base, Version: 1}}))
		}
		for _, n := range []int{1, 2} {
			want = append(want, describe(store.Event{Kind: store.EventDeleted, Post: store.Post{ID: id(n), UserID: "alice", Version: 1}}))
		}
		if got := describeAll(readAll(t, log, 0)); !slices.Equal(got, want) {
			t.Errorf("the log holds\n%s\nwant\n%s", lines(got), lines(want))
		}
	})
	t.Run("the ids kept are swept with their keys, within the sweep's limit", func(t *testing.T) {
		sweep := func(now time.Time, limit int) int { return sweepKeys(t, s, now, limit) }
		if n := sweep(base.Add(23*time.Hour), 10); n != 0 {
			t.Errorf("a sweep before the keys expire deleted %d; want 0", n)
		}
		_, err := s.InsertPost(t.Context(), newPost(1, "alice", base.Add(time.Hour)))
		refused(t, 1, err)
		// Two keys and two ids: a sweep of 3, then of what is left.
		for i, want := range []int{3, 1, 0} {
			if n := sweep(base.Add(25*time.Hour), 3); n != want {
				t.Errorf("sweep %d after the keys expired deleted %d; want %d", i+1, n, want)
			}
		}
	})
}
