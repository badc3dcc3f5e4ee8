// End-to-end set-up: TestMain, the in-process Caddy and its config, the stall proxy.
package caddymodule

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"go.mongodb.org/mongo-driver/v2/mongo"
	_ "modernc.org/sqlite"

	"github.com/postsedge/caddy-posts/auth/authtest"
	"github.com/postsedge/caddy-posts/openapi/openapitest"
	"github.com/postsedge/caddy-posts/store"
	storemongo "github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// The end-to-end tests run a real Caddy in this process (caddytest) with the posts module on
// these sites, each on a port free when the tests start (so that two runs of the tests can share a
// machine), as is Caddy's admin endpoint (caddytest.Default.AdminPort):
//   - site, the embedded store in dataDir, with API keys for alice (in clear, with a profile) and
//     bob (as a digest), and bearer tokens signed by the keys of the test's JWKS server (idp);
//   - stalledSite, a mongodb_uri that reaches the tests' FerretDB (ferret) through a TCP proxy the
//     tests can stall, to push a storage operation past its timeout;
//   - deadSite, a mongodb_uri where no database listens;
//   - basicSite, basic_auth in front of the posts of dataDir.
//
// So two stores hold posts: the SQLite file dataDir/posts.db, which every data_dir site shares,
// and the FerretDB of the mongodb_uri sites. The tests read both straight from the outside, as a
// user would with the sqlite3 shell or mongosh, never through the server.

const (
	aliceKey = "alice-key"
	bobKey   = "bob-key"
)

var (
	site, stalledSite, deadSite, basicSite string // http://localhost:<port>
	httpsPort                              int    // Caddy's https_port, where nothing listens
	// extraSite is the address of the site a test adds to config() for itself (a key set in an
	// outage, encode in front); defaultsSite, strictSite and mongoSite are graphQLSites'. Every
	// port is free when TestMain starts, so that two runs of the tests share a machine.
	extraSite, defaultsSite, strictSite, mongoSite string

	dataDir  string
	ferret   *mongotest.Server // the MongoDB of the mongodb_uri sites
	ferretDB *mongo.Client     // the tests' own connection to it
	proxy    *stallProxy
	idp      *authtest.Provider
)

// A test that uses the in-process Caddy (its config, its sites, their stores, the stall proxy,
// the identity provider's outage switch) calls inProcess, and runs while no other such test
// does, after the tests that do not. The tests that run `caddy` processes of their own are in
// integration/.
var caddyInUse sync.Mutex

// inProcess makes t a parallel test that has the in-process Caddy to itself until it ends.
func inProcess(t *testing.T) {
	t.Parallel()
	caddyInUse.Lock()
	t.Cleanup(caddyInUse.Unlock)
}

func TestMain(m *testing.M) {
	flag.Parse() // the test's flags, before startInProcessCaddy sets os.Args to Caddy's
	dir, err := os.MkdirTemp("", "posts-e2e-")
	if err != nil {
		panic(err)
	}
	dataDir = dir
	reloadCloseSpread = time.Second // the reload tests wait for it twice
	caddytest.Default.AdminPort = freePort()
	// caddytest skips every test whose certificates it cannot find beside its own source, which
	// it looks for at the path the binary was built from: under make test's -trimpath, a path
	// that exists nowhere, so that each test would pass as skipped. None of these sites serves
	// them.
	caddytest.Default.Certificates = nil
	site, stalledSite, deadSite, basicSite = freeSite(), freeSite(), freeSite(), freeSite()
	extraSite, defaultsSite, strictSite, mongoSite = freeSite(), freeSite(), freeSite(), freeSite()
	httpsPort = freePort()
	ferretDir, err := os.MkdirTemp("", "posts-e2e-ferretdb-")
	if err != nil {
		panic(err)
	}
	if ferret, err = mongotest.Start(ferretDir); err != nil {
		panic(err)
	}
	if ferretDB, err = storemongo.Connect(ferret.URI); err != nil {
		panic(err)
	}
	if err := prepareFerretDB(); err != nil {
		panic(err)
	}
	proxy = startStallProxy(ferret.Socket)
	idp = authtest.NewProvider()
	initConfig, err := startInProcessCaddy()
	if err != nil {
		panic(err)
	}
	var violations openapitest.Violations
	http.DefaultTransport = openapitest.Checked{Base: http.DefaultTransport, Report: violations.Report}
	code := m.Run()
	for _, v := range violations.Found() {
		fmt.Fprintln(os.Stderr, "FAIL:", v)
		code = 1
	}
	// FerretDB waits for its clients to hang up: the last config's, and the tests' own.
	_ = caddy.Stop()
	_ = storemongo.Disconnect(ferretDB)
	ferret.Close()
	idp.Close()
	if storeReader.db != nil {
		storeReader.db.Close()
	}
	os.Remove(initConfig)
	os.RemoveAll(dir)
	os.RemoveAll(ferretDir)
	os.Exit(code)
}

// startInProcessCaddy starts Caddy in this process as the first caddytest.Tester would, on
// a Caddyfile of only its admin endpoint, but waits for that to answer in steps of 10ms rather
// than of a second. It returns the path of the Caddyfile; a Caddy that answers already is used.
func startInProcessCaddy() (caddyfile string, err error) {
	admin := fmt.Sprintf("http://localhost:%d/config/", caddytest.Default.AdminPort)
	answers := func() bool {
		res, err := http.Get(admin)
		if err == nil {
			res.Body.Close()
		}
		return err == nil
	}
	if answers() {
		return "", nil
	}
	f, err := os.CreateTemp("", "posts-e2e-*.caddyfile")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "{\n\tadmin localhost:%d\n}\n", caddytest.Default.AdminPort); err != nil {
		return "", err
	}
	os.Args = []string{"caddy", "run", "--config", f.Name(), "--adapter", "caddyfile"}
	go caddycmd.Main()
	for deadline := time.Now().Add(10 * time.Second); !answers(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return f.Name(), fmt.Errorf("the in-process Caddy's admin endpoint %s did not answer in 10s", admin)
		}
	}
	return f.Name(), nil
}

// prepareFerretDB makes the posts collection and its indexes, as a MongoDB store does on first
// use: FerretDB can take longer to create them (55 to 485ms measured under -race) than the
// stalled site's timeout of 500ms allows its first write, and no test is about that.
func prepareFerretDB() error {
	s, err := storemongo.Open(ferret.URI, DefaultDatabase)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = s.ListPosts(ctx, store.Filter{Limit: 1})
	return err
}

func config() string {
	bobDigest := sha256.Sum256([]byte(bobKey))
	return fmt.Sprintf(`%s
	https_port %d
	skip_install_trust
}

%s {
	log {
		output file %s
		format filter {
			request>headers>X-Api-Key delete
		}
	}
	header >X-Auth-User {http.auth.user.id}
	header >X-Auth-Name {http.auth.user.name}
	header >X-Auth-Iss {http.auth.user.iss}
	posts {
		data_dir %s
		jwks_url %s
		issuer %s
		audience %s
		api_key %s alice {
			name "Alice Liddell"
			email alice@example.com
		}
		api_key sha256:%x bob
		max_body_size 64KiB
		max_limit 5
		timeout 3s
	}
	respond "next handler"
}

%s {
	basic_auth /posts* {
		dave %s
	}
	posts {
		data_dir %s
		trust_caddy_auth
		jwks_url %s
		api_key %s alice
	}
}

%s {
	posts {
		mongodb_uri mongodb://%s/?directConnection=true
		api_key %s alice
		timeout 500ms
	}
}

%s {
	posts {
		mongodb_uri "mongodb://127.0.0.1:1/?directConnection=true&serverSelectionTimeoutMS=300"
		api_key %s alice
		timeout 500ms
	}
}
`, globalOptions(), httpsPort, site, accessLog(), dataDir, idp.URL+"/jwks.json", authtest.Issuer, authtest.Audience, aliceKey, bobDigest,
		basicSite, daveHash, dataDir, idp.URL+"/jwks.json", aliceKey,
		stalledSite, proxy.addr, aliceKey, deadSite, aliceKey)
}

// globalOptions are the first lines of the in-process Caddy's every config: its admin endpoint,
// site's port as the HTTP port, no grace period; the global block is still open.
func globalOptions() string {
	return fmt.Sprintf("{\n\tadmin localhost:%d\n\thttp_port %s\n\tgrace_period 1ns", caddytest.Default.AdminPort, sitePort(site))
}

// freePort is a TCP port that was free a moment ago, and that it has not returned before: the
// kernel may hand a port just closed out again, and two sites of one config on it made the config
// "ambiguous" (it did beside a second make test). It is below the range the kernel gives
// connections their local ports from (ip_local_port_range): the sites are chosen when the tests
// start and served minutes later, and a port of that range was taken meanwhile by a connection
// of a second make test ("address already in use").
func freePort() int {
	portsMu.Lock()
	defer portsMu.Unlock()
	below := ephemeralPorts()
	for {
		port := 10000 + rand.IntN(below-10000)
		ln, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			continue // taken
		}
		ln.Close()
		if !portsGiven[port] {
			portsGiven[port] = true
			return port
		}
	}
}

// ephemeralPorts is the first port of the range the kernel gives connections their local ports
// from: Linux's ip_local_port_range, 32768 where it cannot be read.
func ephemeralPorts() int {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if first, err := strconv.Atoi(strings.Fields(string(b))[0]); err == nil && first > 11000 {
			return first
		}
	}
	return 32768
}

// portsGiven are the ports freePort returned, under portsMu.
var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

func freeSite() string { return fmt.Sprintf("http://localhost:%d", freePort()) }

// sitePort is the port of a site's address.
func sitePort(site string) string { return site[strings.LastIndex(site, ":")+1:] }

// startCaddy loads the test config into the in-process Caddy (a no-op when it is running already).
func startCaddy(t *testing.T) *client {
	t.Helper()
	tc := caddytest.NewTester(t)
	tc.InitServer(config(), "caddyfile")
	if t.Failed() {
		t.FailNow()
	}
	tc.Client.Transport = openapitest.Checked{Base: tc.Client.Transport, Report: t.Errorf}
	return &client{t: t, http: tc.Client}
}

// stallProxy forwards TCP connections to the FerretDB's unix socket. While stalled it
// swallows what clients send, so their operations run past their deadline; connections that
// saw a stall are closed when it ends.
type stallProxy struct {
	addr    string
	stalled atomic.Bool
	mu      sync.Mutex
	broken  []net.Conn
}

func startStallProxy(socket string) *stallProxy {
	p := &stallProxy{}
	p.addr = mongotest.ServeTCP(socket, func(client net.Conn, _ []byte) bool {
		if !p.stalled.Load() {
			return true
		}
		p.mu.Lock()
		p.broken = append(p.broken, client)
		p.mu.Unlock()
		return false
	})
	return p
}

func (p *stallProxy) stall(on bool) {
	p.stalled.Store(on)
	if !on {
		p.mu.Lock()
		for _, c := range p.broken {
			c.Close()
		}
		p.broken = nil
		p.mu.Unlock()
	}
}
