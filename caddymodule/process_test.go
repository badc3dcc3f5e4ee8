package caddymodule

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "modernc.org/sqlite"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// The tests of this file run Caddy as processes of their own, as users run ./caddy: this test
// binary, started again with childEnv set, is Caddy's main with the posts module in it. So a
// process can be killed, a second one started on the same data_dir, and the commands run.

const childEnv = "CADDY_POSTS_TEST_CHILD"

// testBinary is this binary's path, taken before caddytest (which sets os.Args) runs.
var testBinary, _ = os.Executable()

func init() {
	if os.Getenv(childEnv) == "caddy" {
		caddycmd.Main() // exits on failure, returns on success
		os.Exit(0)
	}
}

// caddyCommand is this binary as the caddy command with args, its output going to out.
func caddyCommand(t *testing.T, out io.Writer, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testBinary, args...)
	home := t.TempDir()
	// Built with -race, a process sleeps a second before it exits (the race detector's
	// atexit_sleep_ms), which every start and stop of these tests would wait for; a GORACE of
	// the environment keeps the last word.
	gorace := strings.TrimSpace("atexit_sleep_ms=0 " + os.Getenv("GORACE"))
	cmd.Env = append(os.Environ(), childEnv+"=caddy", "XDG_DATA_HOME="+home, "XDG_CONFIG_HOME="+home, "HOME="+home, "GORACE="+gorace)
	cmd.Stdout, cmd.Stderr = out, out
	return cmd
}

// lockedBuffer is an output that a process writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// caddyProcess is a running `caddy run`.
type caddyProcess struct {
	t    *testing.T
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan error
	url  string // of its posts site
}

// freePort is a loopback port nothing listens on at the moment.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// processConfig is a Caddyfile with one posts site on port; admin is "off" or an address.
func processConfig(admin string, port int, posts string) string {
	return fmt.Sprintf("{\n\tadmin %s\n\tpersist_config off\n\tgrace_period 5s\n}\nhttp://:%d {\n\tposts {\n%s\n\t\tapi_key process-key alice\n\t}\n}\n", admin, port, posts)
}

// writeConfig writes a Caddyfile and returns its path.
func writeConfig(t *testing.T, caddyfile string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startProcess runs `caddy run` with caddyfile, whose posts site is on port, and waits until
// the site answers. The process is killed when the test ends, if it still runs.
func startProcess(t *testing.T, caddyfile string, port int) *caddyProcess {
	t.Helper()
	p := &caddyProcess{t: t, out: &lockedBuffer{}, done: make(chan error, 1), url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	p.cmd = caddyCommand(t, p.out, "run", "--config", writeConfig(t, caddyfile), "--adapter", "caddyfile")
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-p.done:
			t.Fatalf("caddy run exited (%v) before serving:\n%s", err, p.out)
		default:
		}
		if res, err := http.Get(p.url + "/posts?limit=1"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("caddy run did not serve in 20s:\n%s", p.out)
		}
	}
}

// kill ends the process with SIGKILL, as a crash or an OOM killer would.
func (p *caddyProcess) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop ends the process with SIGINT, as Ctrl-C or a service manager does, and checks it exits 0.
func (p *caddyProcess) stop() {
	p.t.Helper()
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Errorf("caddy run ended with %v:\n%s", err, p.out)
		}
	case <-time.After(20 * time.Second):
		p.t.Fatalf("caddy run did not stop in 20s")
	}
}

// create POSTs a post and returns its id, or "" when the answer was not 201.
func (p *caddyProcess) create(client *http.Client, title string) (string, error) {
	res, err := client.Post(p.url+"/posts?", "application/json", strings.NewReader(fmt.Sprintf(`{"title": %q}`, title)))
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		return "", nil
	}
	var post struct{ ID string }
	err = json.NewDecoder(res.Body).Decode(&post)
	return post.ID, err
}

// keyed is a client that sends the API key of the process sites.
func keyed() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: keyTransport{http.DefaultTransport.(*http.Transport).Clone()}}
}

type keyTransport struct{ base http.RoundTripper }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-API-Key", "process-key")
	return k.base.RoundTrip(r)
}

// integrity runs PRAGMA integrity_check on the database of dir and counts its posts.
func integrity(t *testing.T, dir string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.DatabaseFile)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var result string
	var posts int
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&result); err != nil || result != "ok" {
		t.Errorf("integrity_check: %q, %v", result, err)
	}
	if err := db.QueryRow("SELECT count(*) FROM posts").Scan(&posts); err != nil {
		t.Fatal(err)
	}
	return posts
}

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

// adminLoad loads a Caddyfile into the process through its admin API.
func adminLoad(t *testing.T, admin, caddyfile string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+admin+"/load", strings.NewReader(caddyfile))
	req.Header.Set("Content-Type", "text/caddyfile")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		t.Fatalf("loading the config: %d %s", res.StatusCode, body)
	}
}

// TestAReloadUnderLoadFailsNoRequest reloads the config six times under reads and writes: the
// store is shared across the reloads, so no request is answered with an error.
//
// A reload also closes the old server's connections, and a request sent on one as it closes
// fails on the connection, whatever the handler: a `respond` site in place of the posts one
// loses as many requests (7 to 17 of ~6,000 over six reloads, measured with this test). Those
// are Caddy's, and counted, not failed on.
func TestAReloadUnderLoadFailsNoRequest(t *testing.T) {
	ownProcesses(t)
	dir := t.TempDir()
	port, admin := freePort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	config := func(maxLimit int) string {
		return processConfig(admin, port, fmt.Sprintf("\t\tdata_dir %s\n\t\tmax_limit %d", dir, maxLimit))
	}
	p := startProcess(t, config(100), port)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, writes, errorAnswers, lost atomic.Int64
	var firstFailure atomic.Value
	fail := func(what any) {
		errorAnswers.Add(1)
		firstFailure.CompareAndSwap(nil, fmt.Sprint(what))
	}
	for w := range 8 {
		wg.Go(func() {
			client := keyed()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if w%2 == 0 {
					writes.Add(1)
					switch id, err := p.create(client, fmt.Sprint("reload ", w, " ", i)); {
					case err != nil:
						lost.Add(1)
					case id == "":
						fail("a POST was not answered 201")
					}
					continue
				}
				reads.Add(1)
				res, err := client.Get(p.url + "/posts?limit=20")
				if err != nil {
					lost.Add(1)
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					fail(res.Status)
				}
			}
		})
	}
	for i := range 6 {
		time.Sleep(300 * time.Millisecond)
		adminLoad(t, admin, config(50+i))
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("%d reads and %d writes across 6 reloads; %d failed on their connection", reads.Load(), writes.Load(), lost.Load())
	if n := errorAnswers.Load(); n > 0 {
		t.Errorf("%d requests were answered with an error; the first: %v", n, firstFailure.Load())
	}
	if total := reads.Load() + writes.Load(); lost.Load() > total/20 {
		t.Errorf("%d of %d requests failed on their connection: more than reloads account for", lost.Load(), total)
	}
	p.stop()
}

// leakFrames are what the stack of a goroutine the posts handler left would hold. (The module's
// own package is in the main goroutine's stack in this test binary, so it is not among them.)
var leakFrames = []string{"database/sql", "modernc.org/sqlite", "caddy-posts/store", "caddy-posts/posts",
	"caddy-posts/events", "caddy-posts/handlers", "caddy-posts/schema", "caddy-posts/auth"}

// TestNothingIsLeftAfterTheLastConfigIsUnloaded loads a config without the posts handler into a
// process that served one, and looks at the process from outside: its open files and its
// goroutines.
func TestNothingIsLeftAfterTheLastConfigIsUnloaded(t *testing.T) {
	ownProcesses(t)
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc to list a process's open files")
	}
	dir := t.TempDir()
	port, admin := freePort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := startProcess(t, processConfig(admin, port, "\t\tdata_dir "+dir), port)
	for i := range 20 {
		if _, err := p.create(keyed(), fmt.Sprint("post ", i)); err != nil {
			t.Fatal(err)
		}
	}
	openFiles := func() []string {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
		var inDir []string
		for _, fd := range fds {
			if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.cmd.Process.Pid, fd.Name())); err == nil && strings.HasPrefix(target, dir) {
				inDir = append(inDir, target)
			}
		}
		return inDir
	}
	if len(openFiles()) == 0 {
		t.Fatal("the serving process has no file of the data_dir open: the check below could not fail")
	}

	adminLoad(t, admin, fmt.Sprintf("{\n\tadmin %s\n\tpersist_config off\n}\nhttp://:%d {\n\trespond \"no posts\"\n}\n", admin, port))
	var stacks string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res, err := http.Get("http://" + admin + "/debug/pprof/goroutine?debug=2")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		stacks = string(b)
		leaked := slices.ContainsFunc(leakFrames, func(f string) bool { return strings.Contains(stacks, f) })
		if (len(openFiles()) == 0 && !leaked) || time.Now().After(deadline) {
			break
		}
	}
	if files := openFiles(); len(files) > 0 {
		t.Errorf("the process still has these files open: %v", files)
	}
	for _, frame := range leakFrames {
		if strings.Contains(stacks, frame) {
			t.Errorf("a goroutine in %s is left:\n%s", frame, stacks)
		}
	}
	if s, err := sqlite.Open(dir, sqlite.Options{}); err != nil {
		t.Errorf("the data_dir is still locked: %v", err)
	} else {
		s.Close()
	}
	p.stop()
}

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
	old, err := mongo.Open(server.URI, DefaultDatabase)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	post := store.Post{ID: store.NewID(at), UserID: "alice", Title: "from the FerretDB store", CreatedAt: at, UpdatedAt: at}
	if err := old.InsertPost(t.Context(), post); err != nil {
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

// TestThirtyTwoWritersAtOnce has 32 users create, change and delete posts at once through Caddy,
// on a store of 2,000 posts: no request fails. It is the race detector's run of
// TestThirtyTwoWritersAtFortyThousandPosts (load_test.go): the same writers and requests, on a
// store small enough to seed in a moment (the test takes about 2s under -race, against 12s at
// 40,000 posts).
func TestThirtyTwoWritersAtOnce(t *testing.T) {
	ownProcesses(t)
	writersAtOnce(t, 32, 2_000)
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
		INSERT INTO posts SELECT printf('%024x', i), 'user' || (i % ?), 'post ' || i, NULL, 1700000000000 + i, 1700000000000 + i FROM n`,
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
				req.Header.Set("X-API-Key", fmt.Sprint("key-", u))
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
