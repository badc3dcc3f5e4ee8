package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// maxCopyBatch bounds --batch_size; a batch is also cut at store.MaxBatchBytes.
const maxCopyBatch = 100_000

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "posts-copy",
		Usage: "--from <data_dir|mongodb URI> --to <data_dir|mongodb URI> [--from_database <name>] [--to_database <name>] [--batch_size <n>]",
		Short: "Copies the posts and user profiles of one store into another: embedded to MongoDB, or back",
		Long: `
Copies every post and user profile of one store into another, each store being the
embedded one of a data_dir (posts.db) or a database of a MongoDB deployment, named by a
mongodb:// or mongodb+srv:// URI and --from_database or --to_database (default "posts",
as the posts directive's database). Posts keep their ids, titles, bodies (none stays
none, empty stays empty) and times; profiles keep theirs.

It reads the source in ascending order of ids and writes the target a batch at a time
(--batch_size, default 1000: one transaction on SQLite, one bulk insert on MongoDB), with
a progress line on a terminal. What the target holds already is skipped and left as it
is, so a copy that was interrupted (Ctrl-C, a lost connection) completes when run again.

Then it reads both stores again side by side and compares them: counts, a SHA-256 of
each side's ids in ascending order (each followed by a newline, as sha256sum of
"SELECT id FROM posts ORDER BY id" prints), and every post and profile field by field.
It exits non-zero, naming a few ids, if a post or profile of the source is not on the
target, or is there with other content (the target's is left as it is: move or delete
it, then run the copy again). Posts and profiles that only the target holds (it was not
empty) are counted, and are no failure.

A data_dir source is read as one snapshot, beside a Caddy that may be serving it (as
posts-backup does): posts written after the copy began are not in it, and a second run
once Caddy is stopped copies them. A MongoDB source is read as it is at each moment, so
stop writes to it first. A data_dir target must not be in use: stop a Caddy serving it.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().String("from", "", "The store to copy: a data_dir, or a mongodb:// or mongodb+srv:// URI")
			cmd.Flags().String("to", "", "The store to copy into: a data_dir, or a mongodb:// or mongodb+srv:// URI")
			cmd.Flags().String("from_database", DefaultDatabase, "The database of --from, when it is a MongoDB URI")
			cmd.Flags().String("to_database", DefaultDatabase, "The database of --to, when it is a MongoDB URI")
			cmd.Flags().Int("batch_size", store.DefaultCopyBatch, "How many posts or profiles to read and write at a time")
			cmd.Args = cobra.NoArgs // a path given without --from or --to is refused, not ignored
			cmd.RunE = caddycmd.WrapCommandFuncForCobra(copyCommand)
		},
	})
}

func copyCommand(fl caddycmd.Flags) (int, error) {
	from, err := copySideFlag(fl, "from")
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	to, err := copySideFlag(fl, "to")
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if from.same(to) {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("--from and --to name the same store, %s", from)
	}
	batch := fl.Int("batch_size")
	if batch < 1 || batch > maxCopyBatch {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("--batch_size must be from 1 to %d, not %d", maxCopyBatch, batch)
	}
	ctx, stop := interrupted()
	defer stop()
	// The source first: a target is opened (a data_dir made) only once the source is known good.
	source, closeSource, err := from.openSource(ctx)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	defer closeSource()
	target, closeTarget, err := to.openTarget(ctx)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	defer closeTarget()
	progress := newProgressLine(os.Stderr)
	done, err := store.Copy(ctx, source, target, store.CopyOptions{Batch: batch, Progress: progress.show})
	progress.end()
	switch {
	case err != nil && ctx.Err() != nil:
		return caddy.ExitCodeFailedStartup, fmt.Errorf("interrupted; what was copied stays, and the same command completes the copy: %w", err)
	case err != nil:
		return caddy.ExitCodeFailedStartup, fmt.Errorf("copying %s to %s: %w", from, to, err)
	}
	fmt.Print(copySummary(from, to, done))
	if !done.OK() {
		return caddy.ExitCodeFailedStartup, differences(done)
	}
	return caddy.ExitCodeSuccess, nil
}

// copySide is one side of posts-copy: the embedded store of a data_dir, or a MongoDB database.
type copySide struct {
	flag     string // --from or --to
	dir      string // an absolute data_dir, or
	uri      string // a mongodb:// or mongodb+srv:// URI
	database string
}

// copySideFlag reads --name and --name_database.
func copySideFlag(fl caddycmd.Flags, name string) (copySide, error) {
	value, database := fl.String(name), fl.String(name+"_database")
	side := copySide{flag: "--" + name}
	switch {
	case value == "":
		return side, fmt.Errorf("%s is required: a data_dir, or a mongodb:// or mongodb+srv:// URI", side.flag)
	case strings.HasPrefix(value, "mongodb://"), strings.HasPrefix(value, "mongodb+srv://"):
		if err := validDatabase(database); err != nil {
			return side, fmt.Errorf("%s_%w", side.flag, err)
		}
		side.uri, side.database = value, database
	case strings.Contains(value, "://"):
		return side, fmt.Errorf("%s %s is neither a data_dir nor a mongodb:// or mongodb+srv:// URI", side.flag, mongo.Redact(value))
	case fl.Changed(name + "_database"):
		return side, fmt.Errorf("%s_database applies to a MongoDB URI, and %s is a data_dir", side.flag, side.flag)
	default:
		dir, err := filepath.Abs(value)
		if err != nil {
			return side, fmt.Errorf("%s: %w", side.flag, err)
		}
		side.dir = dir
	}
	return side, nil
}

// String names the store without the URI's credentials or options.
func (s copySide) String() string {
	if s.dir != "" {
		return s.dir
	}
	return fmt.Sprintf("%s database %s", mongo.Redact(s.uri), s.database)
}

// same says whether both sides name one store, as far as can be told without connecting.
func (s copySide) same(o copySide) bool {
	if s.dir != "" || o.dir != "" {
		if s.dir == o.dir {
			return true
		}
		a, errA := os.Stat(s.dir)
		b, errB := os.Stat(o.dir)
		return errA == nil && errB == nil && os.SameFile(a, b)
	}
	return s.database == o.database && hosts(s.uri) == hosts(o.uri)
}

// hosts is a URI's scheme and hosts, in one order. (Not in one case: a host may be the path
// of a unix socket.)
func hosts(uri string) string {
	scheme, list, _ := strings.Cut(mongo.Redact(uri), "://")
	names := strings.Split(list, ",")
	slices.Sort(names)
	return scheme + "://" + strings.Join(names, ",")
}

func (s copySide) openSource(ctx context.Context) (store.CopySource, func(), error) {
	if s.dir != "" {
		snap, err := sqlite.OpenSnapshot(ctx, s.dir)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.flag, err)
		}
		return snap, func() { snap.Close() }, nil
	}
	m, err := s.openMongo(ctx)
	if err != nil {
		return nil, nil, err
	}
	if holds, err := m.HoldsPosts(ctx); err != nil || !holds {
		m.Close()
		return nil, nil, errors.Join(fmt.Errorf("%s: %s holds no posts collection: is %s_database right?", s.flag, s, s.flag), err)
	}
	return m, func() { m.Close() }, nil
}

func (s copySide) openTarget(ctx context.Context) (store.CopyTarget, func(), error) {
	if s.dir != "" {
		st, err := sqlite.Open(s.dir, sqlite.Options{})
		if errors.Is(err, sqlite.ErrLocked) {
			return nil, nil, fmt.Errorf("%s %s is in use by another process, a running Caddy: stop it first, or copy into another data_dir", s.flag, s.dir)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.flag, err)
		}
		return st, func() { st.Close() }, nil
	}
	m, err := s.openMongo(ctx)
	if err != nil {
		return nil, nil, err
	}
	return m, func() { m.Close() }, nil
}

// openMongo opens the side's database and checks that it answers, within the URI's server
// selection timeout (30s unless it sets serverSelectionTimeoutMS).
func (s copySide) openMongo(ctx context.Context) (*mongo.Store, error) {
	m, err := mongo.Open(s.uri, s.database)
	if err != nil {
		return nil, fmt.Errorf("%s is not a usable MongoDB URI: %w", s.flag, errors.Unwrap(err))
	}
	if err := m.Ping(ctx); err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: cannot reach %s: %w", s.flag, mongo.Redact(s.uri), err)
	}
	return m, nil
}
