//go:build integration

// posts-copy refuses what it cannot copy, and changes nothing.
package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	storemongo "github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

func TestPostsCopyRefusesWhatItCannotCopy(t *testing.T) {
	ownProcesses(t)
	source, empty := t.TempDir(), t.TempDir()
	seedDataDir(t, source, 10)
	ferret := mongotest.FerretDB(t)
	seedTarget(t, mongoStore(t, ferret.URI, "posts"), 1, 3)
	served := t.TempDir()
	seedDataDir(t, served, 5)
	port := freePort(t)
	p := startProcess(t, processConfig("off", port, "\t\tdata_dir "+served), port)
	defer p.stop()
	fresh := filepath.Join(t.TempDir(), "fresh") // a target that must still not exist afterwards

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"the same data_dir on both sides", []string{"--from", source, "--to", source + "/."}, "--from and --to name the same store, " + source},
		{"the same MongoDB database on both sides", []string{"--from", ferret.URI, "--to", ferret.URI + "?appName=other"}, "name the same store"},
		{"no --from", []string{"--to", fresh}, "--from is required"},
		{"no --to", []string{"--from", source}, "--to is required"},
		{"a source data_dir that does not exist", []string{"--from", filepath.Join(empty, "none"), "--to", fresh}, "no embedded store in " + filepath.Join(empty, "none")},
		{"a source data_dir without posts.db", []string{"--from", empty, "--to", fresh}, "no embedded store in " + empty},
		{"a MongoDB database without posts", []string{"--from", ferret.URI, "--from_database", "typo", "--to", fresh}, "holds no posts collection: is --from_database right?"},
		{"a MongoDB URI that does not parse", []string{"--from", source, "--to", "mongodb://user:s3cret@host:99999/"}, "--to is not a usable MongoDB URI: error parsing uri"},
		{"a URI of another database", []string{"--from", "postgres://user:s3cret@host/posts", "--to", fresh}, "--from postgres://host is neither a data_dir nor a mongodb:// or mongodb+srv:// URI"},
		{"a MongoDB that does not answer", []string{"--from", source, "--to", "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300"}, "--to: cannot reach mongodb://127.0.0.1:1: database unavailable"},
		{"a database name MongoDB refuses", []string{"--from", source, "--to", ferret.URI, "--to_database", "a/b"}, `--to_database: \"a/b\" is not a MongoDB database name`},
		{"a database for a data_dir", []string{"--from", source, "--from_database", "posts", "--to", fresh}, "--from_database applies to a MongoDB URI, and --from is a data_dir"},
		{"a batch size of 0", []string{"--from", source, "--to", fresh, "--batch_size", "0"}, "--batch_size must be from 1 to 100000, not 0"},
		{"a store named without --from or --to", []string{source, fresh}, `unknown command "` + source + `" for "caddy posts-copy"`},
		{"a flag it does not know", []string{"--from", source, "--to", fresh, "--overwrite"}, "unknown flag: --overwrite"},
		{"a target data_dir that a running Caddy serves", []string{"--from", source, "--to", served}, "--to " + served + " is in use by another process, a running Caddy: stop it first"},
	}
	databases := ferretDatabases(t, ferret.URI)
	for _, tc := range tests {
		t.Run(tc.name+" is refused, and nothing changes", func(t *testing.T) {
			out, code := postsCopy(t, tc.args...)
			if code == 0 {
				t.Fatalf("exit 0:\n%s", out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("the output does not say %q:\n%s", tc.want, out)
			}
			if strings.Contains(out, "s3cret") {
				t.Errorf("the output shows the password:\n%s", out)
			}
			if _, err := os.Stat(fresh); !os.IsNotExist(err) {
				t.Errorf("the target %s was made (%v)", fresh, err)
			}
			if got := ferretDatabases(t, ferret.URI); !slices.Equal(got, databases) {
				t.Errorf("MongoDB holds the databases %v; it held %v", got, databases)
			}
		})
	}
	if posts, _ := dataDirContents(t, source); len(posts) != 10 {
		t.Errorf("the source holds %d posts; want its 10", len(posts))
	}
	if posts, _ := dataDirContents(t, served); len(posts) != 5 {
		t.Errorf("the served data_dir holds %d posts; want its 5", len(posts))
	}
}

// ferretDatabases lists the databases at uri.
func ferretDatabases(t *testing.T, uri string) []string {
	t.Helper()
	client, err := storemongo.Connect(uri)
	if err != nil {
		t.Fatal(err)
	}
	defer storemongo.Disconnect(client)
	names, err := client.ListDatabaseNames(t.Context(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}
