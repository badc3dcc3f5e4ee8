//go:build !race

// The query plans of lists: seeding the posts the planner needs costs seconds under the race
// detector, for no concurrency; make test runs it in its step without it.

package sqlite_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

func TestListsSearchAnIndexAndNeverSort(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.Options{})
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 2000 { // enough rows for the planner to prefer an index to a scan on its own
		p := store.Post{ID: store.NewID(base), UserID: fmt.Sprint("user", i%50), Title: "t", CreatedAt: base.Add(time.Duration(i) * time.Second), UpdatedAt: base}
		if _, err := s.InsertPost(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	db := direct(t, dir)
	tests := []struct {
		name, query string
		args        []any
		index       string
	}{
		{"a post by id", sqlite.GetPostSQL, []any{"x"}, "PRIMARY KEY"},
		{"an update, at any version or at one", sqlite.UpdatePostSQL, []any{"t", false, nil, 1, "x", "user1", 3}, "PRIMARY KEY (id=?)"},
		{"a delete, at any version or at one", sqlite.DeletePostSQL, []any{"x", "user1", 3}, "PRIMARY KEY (id=?)"},
		{"the first page and every later one", sqlite.ListSQL, []any{int64(1 << 62), "", 0, 20, ""}, "posts_newest"},
		{"a user's pages", sqlite.ListByUserSQL, []any{int64(1 << 62), "", 0, 20, "user1"}, "posts_user_newest"},
		{"the pages oldest first", sqlite.ListOldestSQL, []any{0, "", int64(1 << 62), 20, ""}, "posts_newest"},
		{"a user's pages oldest first", sqlite.ListByUserOldestSQL, []any{0, "", int64(1 << 62), 20, "user1"}, "posts_user_newest"},
		{"a search's pages", sqlite.SearchSQL, []any{`"t"*`, 0, int64(1 << 62)}, "M1><"},                    // MATCH ?1, rowid >= ?2 and < ?3
		{"a search's pages oldest first", sqlite.SearchOldestSQL, []any{`"t"*`, 0, int64(1 << 62)}, "M1><"}, // MATCH ?1, rowid >= ?2 and < ?3
		{"a profile", sqlite.GetUserSQL, []any{"user1"}, "PRIMARY KEY"},
		{"many profiles", sqlite.GetUsersSQL, []any{`["user1","user2"]`}, "PRIMARY KEY"},
		{"a copy's pages of posts", sqlite.AllPostsSQL, []any{"", 1000}, "PRIMARY KEY (id>?)"},
		{"a copy's pages of profiles", sqlite.AllUsersSQL, []any{"", 1000}, "PRIMARY KEY (id>?)"},
		{"an idempotency key of a user", sqlite.GetKeySQL, []any{"user1", "k"}, "sqlite_autoindex_idempotency_keys_1"},
		{"a sweep of expired idempotency keys", sqlite.DeleteExpiredKeysSQL, []any{int64(1 << 40), 1000}, "idempotency_keys_expiry"},
		{"a sweep of the deleted ids kept for expired keys", sqlite.DeleteExpiredIDsSQL, []any{int64(1 << 40), 1000}, "deleted_posts_until"},
		{"an insert, unless its id is a deleted post's kept", sqlite.InsertLivePostSQL, []any{"x", "user1", "t", nil, 1, 1, 1}, "deleted_posts"},
		{"a delete keeping its id for the keys that name it", sqlite.KeepDeletedSQL, []any{"x"}, "idempotency_keys_post"},
		{"the cut of expiry by time and cap", sqlite.ExpiryCutSQL, []any{int64(1 << 40), 100}, "SEARCH events"},
		{"the last position", sqlite.LastPositionSQL, nil, "SEARCH events"},
		{"a write's event, at the next position", sqlite.LogEventSQL, []any{1, "created", "x", "user1", "t", nil, 1, 1, 1, nil}, "SEARCH events"},
		{"a batch of expiry", sqlite.ExpireEventsSQL, []any{1500, sqlite.ExpireBatch}, "PRIMARY KEY (rowid<?)"},
		{"whether a position is kept", sqlite.KeptSQL, []any{1500}, "PRIMARY KEY (rowid=?)"},
		{"the log's oldest position", sqlite.LogStatsSQL, nil, "SEARCH events"},
	}
	// The scans a query may make, and why: the cut of expiry reads the oldest events in the order
	// of positions (the primary key's) up to the first one to keep, and those before it all go.
	scans := map[string]string{sqlite.ExpiryCutSQL: "SCAN events"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := db.Query("EXPLAIN QUERY PLAN "+tc.query, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			text := strings.Join(plan, "; ")
			for _, bad := range []string{"SCAN posts", "SCAN users", "SCAN idempotency_keys", "SCAN deleted_posts", "SCAN events", "TEMP B-TREE"} {
				if bad != scans[tc.query] && strings.Contains(text, bad) {
					t.Errorf("plan %q has %q", text, bad)
				}
			}
			if !strings.Contains(text, "SEARCH") || !strings.Contains(text, tc.index) {
				t.Errorf("plan %q; want a SEARCH using %s", text, tc.index)
			}
		})
	}
}
