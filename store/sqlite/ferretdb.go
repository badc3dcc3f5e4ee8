package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/postsedge/caddy-posts/store"
)

// FerretDBDir is where ImportFerretDB moves the files of the earlier embedded store, inside the
// data directory.
const FerretDBDir = "ferretdb-v1"

// Imported is what ImportFerretDB copied.
type Imported struct {
	Posts, Users int
	// Moved is the directory that now holds the earlier store's files.
	Moved string
}

// ImportFerretDB brings the posts and users of database from the embedded store of earlier
// releases (FerretDB on SQLite, whose files are <dir>/<database>.sqlite) into the store of dir.
// It moves every FerretDB file of dir into dir/ferretdb-v1 (so the store will open dir), then
// copies the documents in one transaction; posts whose id is stored already are left as they
// are, so running it twice copies nothing twice. It reads FerretDB's files with SQL only: each
// document is one JSON text in a column, with its dates in Unix milliseconds.
func ImportFerretDB(ctx context.Context, dir, database string, opts Options) (Imported, error) {
	moved := filepath.Join(dir, FerretDBDir)
	// A socket that answers belongs to an earlier release still serving dir.
	if conn, err := net.Dial("unix", filepath.Join(dir, "mongodb.sock")); err == nil {
		conn.Close()
		return Imported{}, fmt.Errorf("%s is being served by a running Caddy of an earlier release: stop it first", dir)
	}
	names, err := ferretDBFiles(dir)
	if err != nil {
		return Imported{}, err
	}
	source := filepath.Join(moved, database+".sqlite")
	if len(names) == 0 {
		if _, err := os.Stat(source); err != nil {
			return Imported{}, fmt.Errorf("no FerretDB database %q in %s or %s", database, dir, moved)
		}
	}
	if err := os.MkdirAll(moved, 0o700); err != nil {
		return Imported{}, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Imported{}, err
	}
	for _, e := range entries {
		if name := e.Name(); name == "mongodb.sock" || strings.Contains(name, ".sqlite") {
			if err := os.Rename(filepath.Join(dir, name), filepath.Join(moved, name)); err != nil {
				return Imported{}, err
			}
		}
	}
	if _, err := os.Stat(source); err != nil {
		return Imported{}, fmt.Errorf("no FerretDB database %q among the files moved to %s", database, moved)
	}
	s, err := Open(dir, opts)
	if err != nil {
		return Imported{}, err
	}
	defer s.Close()
	done := Imported{Moved: moved}
	done.Posts, done.Users, err = s.importFerretDB(ctx, source)
	return done, err
}

// ferretDocument is a post or a user as FerretDB stored it.
type ferretDocument struct {
	ID        string  `json:"_id"`
	UserID    string  `json:"userId"`
	Title     string  `json:"title"`
	Body      *string `json:"body"`
	Name      *string `json:"name"`
	Email     *string `json:"email"`
	CreatedAt int64   `json:"createdAt"`
	UpdatedAt int64   `json:"updatedAt"`
}

func (s *Store) importFerretDB(ctx context.Context, source string) (posts, users int, err error) {
	old, err := sql.Open("sqlite", dsn(source, "deferred", "query_only(1)"))
	if err != nil {
		return 0, 0, err
	}
	defer old.Close()
	c, err := s.conns()
	if err != nil {
		return 0, 0, err
	}
	tx, err := c.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, err
	}
	defer tx.Rollback()
	for _, collection := range []struct {
		name  string
		count *int
		store func(ferretDocument) (sql.Result, error)
	}{
		{"posts", &posts, func(d ferretDocument) (sql.Result, error) {
			if !store.ValidID(d.ID) || d.UserID == "" || d.Title == "" {
				return nil, fmt.Errorf("a post that is not one of caddy-posts: %+v", d)
			}
			return tx.ExecContext(ctx, insertNewPostSQL, d.ID, d.UserID, d.Title, orNil(d.Body), d.CreatedAt, d.UpdatedAt, 1)
		}},
		{"users", &users, func(d ferretDocument) (sql.Result, error) {
			return tx.ExecContext(ctx, `INSERT INTO users (id, name, email, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
				d.ID, orNil(d.Name), orNil(d.Email), d.UpdatedAt)
		}},
	} {
		var table string
		err := old.QueryRowContext(ctx, `SELECT table_name FROM _ferretdb_collections WHERE name = ?`, collection.name).Scan(&table)
		if errors.Is(err, sql.ErrNoRows) {
			continue // a database without profiles yet
		}
		if err != nil {
			return 0, 0, fmt.Errorf("reading %s: %w", source, err)
		}
		rows, err := old.QueryContext(ctx, fmt.Sprintf(`SELECT _ferretdb_sjson FROM %q`, table))
		if err != nil {
			return 0, 0, err
		}
		for rows.Next() {
			var text string
			var d ferretDocument
			if err := rows.Scan(&text); err != nil {
				rows.Close()
				return 0, 0, err
			}
			if err := json.Unmarshal([]byte(text), &d); err != nil {
				rows.Close()
				return 0, 0, fmt.Errorf("a document of %s: %w", collection.name, err)
			}
			res, err := collection.store(d)
			if err != nil {
				rows.Close()
				return 0, 0, err
			}
			if n, _ := res.RowsAffected(); n > 0 {
				*collection.count++
			}
		}
		if err := rows.Close(); err != nil {
			return 0, 0, err
		}
	}
	if err := indexWords(ctx, tx, c); err != nil {
		return 0, 0, err
	}
	return posts, users, c.state.commit(ctx, tx, c, nil) // new ids: none the cache holds
}
