//go:build integration

// Commands beside a Caddy process: backup while it serves, restore, FerretDB import.
package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/caddymodule"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

func TestBackupWhileServingAndRestore(t *testing.T) {
	ownProcesses(t)
	dir := t.TempDir()
	port := freePort(t)
	config := processConfig("off", port, "\t\tdata_dir "+dir)
	p := startProcess(t, config, port)
	client := keyed()
	var before []string
	for i := range 50 {
		id, err := p.create(client, fmt.Sprint("before the backup ", i))
		if err != nil || id == "" {
			t.Fatalf("create: %q, %v", id, err)
		}
		before = append(before, id)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // writes go on during the backup
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
				p.create(client, fmt.Sprint("during the backup ", i))
			}
		}
	})
	backup := filepath.Join(t.TempDir(), "posts-backup.db")
	var out bytes.Buffer
	err := caddyCommand(t, &out, "posts-backup", "--data_dir", dir, "--output", backup).Run()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("posts-backup: %v\n%s", err, &out)
	}
	if !strings.Contains(out.String(), "integrity check ok") {
		t.Errorf("posts-backup said %q", &out)
	}
	after, err := p.create(client, "after the backup")
	if err != nil || after == "" {
		t.Fatalf("create: %q, %v", after, err)
	}

	t.Run("a second backup to the same file is refused", func(t *testing.T) {
		var out bytes.Buffer
		if err := caddyCommand(t, &out, "posts-backup", "--data_dir", dir, "--output", backup).Run(); err == nil {
			t.Errorf("it succeeded: %s", &out)
		}
	})

	// Restore: stop, put the backup in place of the file, start.
	p.stop()
	for _, name := range []string{sqlite.DatabaseFile + "-wal", sqlite.DatabaseFile + "-shm"} {
		os.Remove(filepath.Join(dir, name))
	}
	data, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, sqlite.DatabaseFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	restored := startProcess(t, config, port)
	status := func(id string) int {
		res, err := client.Get(restored.url + "/posts/" + id)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, id := range before {
		if got := status(id); got != http.StatusOK {
			t.Errorf("GET of a post written before the backup: %d", got)
		}
	}
	if got := status(after); got != http.StatusNotFound {
		t.Errorf("GET of the post written after the backup: %d; want 404", got)
	}
	restored.stop()
	integrity(t, dir)
}

func TestADataDirOfTheFerretDBStoreIsRefusedThenImported(t *testing.T) {
	ownProcesses(t)
	dir := t.TempDir()
	server, err := mongotest.Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	old, err := mongo.Open(server.URI, caddymodule.DefaultDatabase)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	post := store.Post{ID: store.NewID(at), UserID: "alice", Title: "from the FerretDB store", CreatedAt: at, UpdatedAt: at}
	if _, err := old.InsertPost(t.Context(), post); err != nil {
		t.Fatal(err)
	}
	old.Close()
	server.Close()
	port := freePort(t)
	config := processConfig("off", port, "\t\tdata_dir "+dir)

	t.Run("caddy run exits non-zero, names the files and the command, and changes nothing", func(t *testing.T) {
		entries := func() string {
			var names []string
			files, _ := os.ReadDir(dir)
			for _, f := range files {
				info, _ := f.Info()
				names = append(names, fmt.Sprint(f.Name(), info.Size(), info.ModTime()))
			}
			return strings.Join(names, "\n")
		}
		before := entries()
		var out bytes.Buffer
		err := caddyCommand(t, &out, "run", "--config", writeConfig(t, config), "--adapter", "caddyfile").Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Errorf("caddy run ended with %v; want a non-zero exit", err)
		}
		for _, want := range []string{"posts.sqlite", "FerretDB", "caddy posts-import-ferretdb --data_dir " + dir} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("the output does not say %q:\n%s", want, &out)
			}
		}
		if after := entries(); after != before {
			t.Errorf("the directory changed:\nbefore\n%s\nafter\n%s", before, after)
		}
	})

	t.Run("after posts-import-ferretdb, caddy run serves the posts", func(t *testing.T) {
		var out bytes.Buffer
		if err := caddyCommand(t, &out, "posts-import-ferretdb", "--data_dir", dir).Run(); err != nil {
			t.Fatalf("posts-import-ferretdb: %v\n%s", err, &out)
		}
		if !strings.Contains(out.String(), "copied 1 posts") {
			t.Errorf("it said %q", &out)
		}
		p := startProcess(t, config, port)
		res, err := http.Get(p.url + "/posts/" + post.ID)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(post.Title)) {
			t.Errorf("GET the imported post: %d %s", res.StatusCode, body)
		}
		p.stop()
	})
}
