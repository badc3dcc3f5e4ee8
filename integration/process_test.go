//go:build integration

// Harness of the tests that run Caddy as processes of their own (process_*_test.go).
package integration

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "modernc.org/sqlite"

	_ "github.com/postsedge/caddy-posts" // the posts module, as xcaddy build --with registers it
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// The tests of process_*_test.go run Caddy as processes of their own, as users run ./caddy: this test
// binary, started again with childEnv set, is Caddy's main with the posts module and Caddy's
// standard modules in it (the blank imports above). So a process can be killed, a second one
// started on the same data_dir, and the commands run.

const childEnv = "CADDY_POSTS_TEST_CHILD"

// testBinary is this binary's path.
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
	return startProcessAt(t, caddyfile, port, "/posts?limit=1", http.StatusOK)
}

// startProcessAt is startProcess, which waits until path answers with status.
func startProcessAt(t *testing.T, caddyfile string, port int, path string, status int) *caddyProcess {
	t.Helper()
	return startProcessWith(t, caddyfile, port, path, status)
}

// startProcessWith is startProcessAt, the process's environment added to with env (NAME=value).
func startProcessWith(t *testing.T, caddyfile string, port int, path string, status int, env ...string) *caddyProcess {
	t.Helper()
	p := &caddyProcess{t: t, out: &lockedBuffer{}, done: make(chan error, 1), url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	p.cmd = caddyCommand(t, p.out, "run", "--config", writeConfig(t, caddyfile), "--adapter", "caddyfile")
	p.cmd.Env = append(p.cmd.Env, env...)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() { // what the process logged is the first clue
			out := p.out.String()
			t.Logf("the output of caddy on %s, its last 16 KiB:\n%s", p.url, out[max(0, len(out)-16<<10):])
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-p.done:
			t.Fatalf("caddy run exited (%v) before serving:\n%s", err, p.out)
		default:
		}
		if res, err := http.Get(p.url + path); err == nil {
			res.Body.Close()
			if res.StatusCode == status {
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
	return &http.Client{Timeout: 10 * time.Second, Transport: keyTransport{http.DefaultTransport}}
}

type keyTransport struct{ base http.RoundTripper }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "ApiKey process-key")
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
