//go:build integration

// A data_dir under stress: a second process, SIGKILL, a held write lock, 32 writers.
package integration

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store/sqlite"
)

func TestASecondProcessOnTheSameDataDirFailsAtRun(t *testing.T) {
	ownProcesses(t)
	dir := t.TempDir()
	port := freePort(t)
	first := startProcess(t, processConfig("off", port, "\t\tdata_dir "+dir), port)
	if _, err := first.create(keyed(), "before"); err != nil {
		t.Fatal(err)
	}

	other := processConfig("off", freePort(t), "\t\tdata_dir "+dir)
	t.Run("caddy validate passes beside the running server and opens nothing", func(t *testing.T) {
		var out bytes.Buffer
		cmd := caddyCommand(t, &out, "validate", "--config", writeConfig(t, other), "--adapter", "caddyfile")
		if err := cmd.Run(); err != nil {
			t.Fatalf("validate: %v\n%s", err, &out)
		}
	})

	t.Run("caddy run exits non-zero naming the lock and the directory", func(t *testing.T) {
		var out lockedBuffer
		cmd := caddyCommand(t, &out, "run", "--config", writeConfig(t, other), "--adapter", "caddyfile")
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Errorf("the second caddy run ended with %v; want a non-zero exit", err)
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("the second caddy run kept running:\n%s", &out)
		}
		for _, want := range []string{filepath.Join(dir, sqlite.LockFile), "locked", "data_dir " + dir} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("its output does not name %q:\n%s", want, &out)
			}
		}
	})

	t.Run("the first process still serves and writes", func(t *testing.T) {
		if id, err := first.create(keyed(), "after"); err != nil || id == "" {
			t.Errorf("create: %q, %v", id, err)
		}
	})
	first.stop()
	if n := integrity(t, dir); n != 2 {
		t.Errorf("%d posts stored; want 2", n)
	}
}

// TestAnAcknowledgedWriteSurvivesSIGKILL kills Caddy during a write load, starts it again on the
// same data_dir, and reads back every post whose create was answered 201.
func TestAnAcknowledgedWriteSurvivesSIGKILL(t *testing.T) {
	ownProcesses(t)
	for _, mode := range []string{"normal", "full"} {
		t.Run("with synchronous "+mode, func(t *testing.T) {
			dir := t.TempDir()
			port := freePort(t)
			config := processConfig("off", port, fmt.Sprintf("\t\tdata_dir %s\n\t\tsynchronous %s", dir, mode))
			p := startProcess(t, config, port)
			var mu sync.Mutex
			acked := map[string]string{} // id → title
			var attempts atomic.Int64
			var wg sync.WaitGroup
			for w := range 16 {
				wg.Go(func() {
					client := keyed()
					for i := 0; ; i++ {
						title := fmt.Sprintf("writer %d post %d", w, i)
						attempts.Add(1)
						id, err := p.create(client, title)
						if err != nil {
							return // the process is gone
						}
						if id != "" {
							mu.Lock()
							acked[id] = title
							mu.Unlock()
						}
					}
				})
			}
			for attempts.Load() < 500 {
				time.Sleep(10 * time.Millisecond)
			}
			p.kill()
			wg.Wait()
			t.Logf("%d creates acknowledged before SIGKILL", len(acked))

			again := startProcess(t, config, port)
			client := keyed()
			missing := 0
			for id, title := range acked {
				res, err := client.Get(again.url + "/posts/" + id)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(title)) {
					missing++
				}
			}
			if missing > 0 {
				t.Errorf("%d of %d acknowledged posts are missing after the restart", missing, len(acked))
			}
			again.stop()
			if n := integrity(t, dir); n < len(acked) {
				t.Errorf("%d posts stored; want at least the %d acknowledged", n, len(acked))
			}
		})
	}
}

// TestAWriteBlockedPastTheTimeoutGets503 holds the database's write lock from another
// connection, as a tool writing to the file would: writes wait for it no longer than timeout and
// answer 503, reads go on, and writes work again once it is released.
func TestAWriteBlockedPastTheTimeoutGets503(t *testing.T) {
	ownProcesses(t)
	dir := t.TempDir()
	port := freePort(t)
	p := startProcess(t, processConfig("off", port, "\t\tdata_dir "+dir+"\n\t\ttimeout 500ms"), port)
	client := keyed()
	kept, err := p.create(client, "kept")
	if err != nil || kept == "" {
		t.Fatalf("create: %q, %v", kept, err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	res, err := client.Post(p.url+"/posts", "application/json", strings.NewReader(`{"title": "blocked"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if elapsed := time.Since(start); res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || elapsed > 3*time.Second {
		t.Errorf("a blocked write: %d (Retry-After %q) after %v, %s; want 503 with Retry-After after about 500ms",
			res.StatusCode, res.Header.Get("Retry-After"), elapsed, body)
	}
	if res, err := client.Get(p.url + "/posts/" + kept); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("a read while writes are blocked: %v %v", res, err)
	} else {
		res.Body.Close()
	}

	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if id, err := p.create(client, "after"); err != nil || id == "" {
		t.Errorf("a write once the lock is released: %q, %v", id, err)
	}
	p.stop()
	if n := integrity(t, dir); n != 2 {
		t.Errorf("%d posts stored; want 2 (the blocked one is not)", n)
	}
}

// writersAtOnce has users create, change and delete posts at once through a `caddy run` whose
// store holds seeded posts (at least 40 times users), and checks that no request fails and that
// the store holds as many posts at the end.
func writersAtOnce(t *testing.T, users, seeded int) {
	t.Helper()
	dir := t.TempDir()
	s, err := sqlite.Open(dir, sqlite.Options{}) // makes the schema
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO posts SELECT printf('%024x', i), 'user' || (i % ?), 'post ' || i, NULL, 1700000000000 + i, 1700000000000 + i, 1 FROM n`,
		seeded-1, users)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	var keys strings.Builder
	for u := range users {
		fmt.Fprintf(&keys, "\t\tapi_key key-%d user%d\n", u, u)
	}
	port := freePort(t)
	p := startProcess(t, processConfig("off", port, "\t\tdata_dir "+dir+"\n"+keys.String()), port)

	var wg sync.WaitGroup
	var requests atomic.Int64
	failures := make(chan string, users*10)
	for u := range users {
		wg.Go(func() {
			client := &http.Client{Timeout: 10 * time.Second}
			do := func(method, path, body string, want int) {
				req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
				req.Header.Set("Authorization", fmt.Sprint("ApiKey key-", u))
				req.Header.Set("Content-Type", "application/json")
				requests.Add(1)
				res, err := client.Do(req)
				if err != nil {
					failures <- err.Error()
					return
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != want {
					failures <- fmt.Sprintf("%s %s: %d %s", method, path, res.StatusCode, b)
				}
			}
			for i := range 40 {
				own := fmt.Sprintf("/posts/%024x", (i*users+u)%seeded) // a seeded post of this user
				switch i % 4 {
				case 0, 1:
					do("PATCH", own, fmt.Sprintf(`{"title": "changed %d"}`, i), http.StatusOK)
				case 2:
					do("POST", "/posts", `{"title": "new"}`, http.StatusCreated)
				case 3:
					do("DELETE", own, "", http.StatusNoContent)
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	n := 0
	for f := range failures {
		if n++; n <= 5 {
			t.Error(f)
		}
	}
	if n > 0 {
		t.Errorf("%d of %d requests failed", n, requests.Load())
	}
	p.stop()
	if got, want := integrity(t, dir), seeded+users*10-users*10; got != want {
		t.Errorf("%d posts stored; want %d (as many created as deleted)", got, want)
	}
}
