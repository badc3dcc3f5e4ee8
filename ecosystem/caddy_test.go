//go:build ecosystem

// The harness: the documentation's recipes, ./caddy running one, and requests to it.

package ecosystem

import (
	"bytes"
	"database/sql"
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
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/postsedge/caddy-posts/internal/docgen"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// binary is the Caddy that `make build` builds from xcaddy.json.
const binary = "../caddy"

// The recipes of the documentation, by the name of their fence; each is run by the test named
// beside it.
var recipes = []string{
	"compression",    // TestCompression
	"basic_auth",     // TestBasicAuth
	"forward_auth",   // TestForwardAuth
	"rate_limit",     // TestRateLimit
	"reverse_proxy",  // TestReverseProxy
	"proxy_in_front", // TestProxyInFront
	"cache",          // TestCache
}

func TestEveryRecipeOfTheDocumentationIsRun(t *testing.T) {
	var inDocs []string
	for name := range readRecipes(t) {
		inDocs = append(inDocs, name)
	}
	slices.Sort(inDocs)
	run := slices.Sorted(slices.Values(recipes))
	if !slices.Equal(inDocs, run) {
		t.Errorf("the documentation has the recipes %q; the tests run %q", inDocs, run)
	}
}

// readRecipes reads the ```caddyfile ecosystem <name> blocks of every Markdown document of the
// repository (docgen.Blocks), by name, wherever a page puts them.
func readRecipes(t *testing.T) map[string]string {
	t.Helper()
	blocks, err := docgen.Blocks("..")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	where := map[string]string{}
	for _, b := range blocks {
		if b.Lang != "caddyfile" || b.Role != "ecosystem" {
			continue
		}
		if where[b.Name] != "" {
			t.Fatalf("two recipes are called %s: in %s and in %s", b.Name, where[b.Name], b.File)
		}
		found[b.Name], where[b.Name] = b.Text, b.File
	}
	return found
}

// site is ./caddy running a recipe.
type site struct {
	url  string        // of the site, http://127.0.0.1:<port>
	home string        // its XDG_DATA_HOME: Caddy's data directory is home/caddy
	out  *lockedBuffer // what Caddy writes, its log
}

// setup is what a test changes in a recipe and around it.
type setup struct {
	// replace maps text of the recipe (an upstream's address) to the test's; each must occur.
	replace map[string]string
	// env is added to Caddy's environment (the keys of {env.*}).
	env []string
	// debug logs at level DEBUG.
	debug bool
	// first is a directive put at the head of the site's block: the recipe with another
	// module in front.
	first string
}

// start runs recipe name in ./caddy on a port of its own, its site address replaced by
// http://127.0.0.1:<port> and its other text as s says, and waits until it listens. It stops
// when the test ends.
func start(t *testing.T, name string, s setup) *site {
	t.Helper()
	if _, err := os.Stat(binary); err != nil {
		t.Fatalf("%s is missing (%v): build it with `make build` (make ecosystem and make test do)", binary, err)
	}
	text, ok := readRecipes(t)[name]
	if !ok {
		t.Fatalf("the documentation has no ```caddyfile ecosystem %s block", name)
	}
	for from, to := range s.replace {
		if !strings.Contains(text, from) {
			t.Fatalf("the recipe %s no longer holds %q:\n%s", name, from, text)
		}
		text = strings.ReplaceAll(text, from, to)
	}
	address, rest, _ := strings.Cut(text, " {\n")
	if strings.ContainsAny(address, "{}\n") {
		t.Fatalf("the recipe %s does not open with its site's address:\n%s", name, text)
	}
	port := freePort(t)
	global := "\tadmin off\n\tpersist_config off\n"
	if s.debug {
		global += "\tdebug\n"
	}
	if s.first != "" {
		rest = "\t" + s.first + "\n" + rest
	}
	text = fmt.Sprintf("{\n%s}\n\nhttp://127.0.0.1:%d {\n%s", global, port, rest)
	config := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}

	home := t.TempDir()
	out := &lockedBuffer{}
	cmd := exec.Command(binary, "run", "--config", config, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+home, "XDG_CONFIG_HOME="+home, "HOME="+home)
	cmd.Env = append(cmd.Env, s.env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	// Caddy listens once every handler is provisioned.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("caddy run of the recipe %s exited (%v):\n%s\n%s", name, err, text, out)
		default:
		}
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return &site{url: fmt.Sprintf("http://127.0.0.1:%d", port), home: home, out: out}
		}
		if time.Now().After(deadline) {
			t.Fatalf("caddy run of the recipe %s did not listen in 20s:\n%s", name, out)
		}
	}
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

// stored counts the posts in the site's embedded store, read from its file as the sqlite3 tool
// would.
func (s *site) stored(t *testing.T) int {
	t.Helper()
	file := filepath.Join(s.home, "caddy", "posts", sqlite.DatabaseFile)
	db, err := sql.Open("sqlite", "file:"+file+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM posts").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// answer is what a request got.
type answer struct {
	status int
	header http.Header
	body   string
}

// client neither decompresses nor follows redirects: the tests see what Caddy sends.
var client = &http.Client{
	Timeout:       10 * time.Second,
	Transport:     &http.Transport{DisableCompression: true},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// call sends a request to the site with header ("Name: value" lines; "" for none) and, when
// body is not empty, a JSON body.
func (s *site) call(t *testing.T, method, path, body string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range header {
		if name, value, ok := strings.Cut(h, ": "); ok {
			req.Header.Add(name, value)
		}
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{res.StatusCode, res.Header, string(data)}
}
