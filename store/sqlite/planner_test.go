package sqlite

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// TestStablePlans checks that openDB's connections keep a statement's plan when the values bound
// to it change, where the driver's own connections compile it again for the value: SQLite plans
// x LIKE ? as a range of x's index once it knows the pattern's fixed prefix, which it only
// learns by compiling the statement again after the first bind.
func TestStablePlans(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plans.db")
	plain, err := sql.Open("sqlite", dsn(path, "immediate"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for _, q := range []string{
		`CREATE TABLE t (x TEXT COLLATE NOCASE)`,
		`CREATE INDEX t_x ON t (x)`,
		`INSERT INTO t (x) VALUES ('abc'), ('abd'), ('xyz')`,
	} {
		if _, err := plain.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	stable, err := openDB(dsn(path, "immediate"))
	if err != nil {
		t.Fatal(err)
	}
	defer stable.Close()

	plan := func(db *sql.DB) string {
		t.Helper()
		rows, err := db.Query(`EXPLAIN QUERY PLAN SELECT x FROM t WHERE x LIKE ?`, "ab%")
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, detail)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "; ")
	}
	if got := plan(plain); !strings.Contains(got, "x>? AND x<?") {
		t.Fatalf("the driver's own connection planned %q, not a range of the index: the test cannot tell the two apart", got)
	}
	if got := plan(stable); strings.Contains(got, "x>? AND x<?") {
		t.Errorf("a connection of openDB planned %q: compiled again for the bound pattern", got)
	}
}
