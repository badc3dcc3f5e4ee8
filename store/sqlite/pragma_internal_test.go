package sqlite

import (
	"database/sql"
	"testing"
)

func TestEveryConnectionRunsTheSettings(t *testing.T) {
	for _, tc := range []struct {
		name        string
		opts        Options
		synchronous int
	}{
		{"by default, synchronous NORMAL", Options{}, 1},
		{"with full sync, synchronous FULL", Options{FullSync: true}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.TempDir(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			c := s.db.Load()
			for _, db := range []struct {
				name      string
				db        *sql.DB
				queryOnly int
			}{{"writer", c.write, 0}, {"reader", c.read, 1}} {
				want := map[string]any{
					"journal_mode": "wal", "busy_timeout": 5000, "cache_size": -16000, "foreign_keys": 1, "temp_store": 2,
					"query_only": db.queryOnly,
				}
				if db.name == "writer" { // the one connection that commits
					want["synchronous"] = tc.synchronous
				}
				for pragma, value := range want {
					var got any
					if err := db.db.QueryRow("PRAGMA " + pragma).Scan(&got); err != nil {
						t.Fatalf("%s: PRAGMA %s: %v", db.name, pragma, err)
					}
					if s, ok := got.(string); ok {
						got = any(s)
					} else if n, ok := got.(int64); ok {
						got = int(n)
					}
					if got != value {
						t.Errorf("%s: PRAGMA %s = %v; want %v", db.name, pragma, got, value)
					}
				}
			}
		})
	}
	t.Run("SetFullSync changes the writer's synchronous", func(t *testing.T) {
		s, err := Open(t.TempDir(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, full := range []bool{true, false, true} {
			if err := s.SetFullSync(full); err != nil {
				t.Fatal(err)
			}
			var got int
			if err := s.db.Load().write.QueryRow("PRAGMA synchronous").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{false: 1, true: 2}[full]; got != want {
				t.Errorf("after SetFullSync(%v), synchronous = %d; want %d", full, got, want)
			}
		}
	})
}
