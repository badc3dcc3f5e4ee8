package caddymodule

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	_ "modernc.org/sqlite"

	"github.com/postsedge/caddy-posts/store"
	storemongo "github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// The end-to-end tests run a real Caddy in this process (caddytest) with the posts module on
// these sites:
//   - :9080, the embedded store in dataDir, with API keys for alice (in clear, with a profile) and
//     bob (as a digest), and bearer tokens signed by the keys of the test's JWKS server (idp);
//   - :9081, a mongodb_uri that reaches the tests' FerretDB (ferret) through a TCP proxy the
//     tests can stall, to push a storage operation past its timeout;
//   - :9082, a mongodb_uri where no database listens;
//   - :9083, basic_auth in front of the posts of dataDir.
//
// So two stores hold posts: the SQLite file dataDir/posts.db, which every data_dir site shares,
// and the FerretDB of the mongodb_uri sites. The tests read both straight from the outside, as a
// user would with the sqlite3 shell or mongosh, never through the server.

const (
	site        = "http://localhost:9080"
	stalledSite = "http://localhost:9081"
	deadSite    = "http://localhost:9082"
	basicSite   = "http://localhost:9083"

	aliceKey = "alice-key"
	bobKey   = "bob-key"
)

var (
	dataDir  string
	ferret   *mongotest.Server // the MongoDB of the mongodb_uri sites
	ferretDB *mongo.Client     // the tests' own connection to it
	proxy    *stallProxy
	idp      *identityProvider
)

// The tests of this package mostly wait: on a storage or a server timeout, on a process that
// starts or is killed. So they run side by side where they share nothing:
//   - a test that uses the in-process Caddy (its config, its sites, their stores, the stall
//     proxy, the identity provider's outage switch) calls inProcess, and runs while no other such
//     test does;
//   - a test that runs `caddy` processes of its own, on a data_dir and ports of their own, calls
//     ownProcesses, and runs beside those, a few at a time.
//
// A test that calls neither runs alone, before them: the ones of hostile_test.go, which measure
// the time and memory of their process.
var (
	caddyInUse   sync.Mutex
	processSlots = make(chan struct{}, 3)
)

// inProcess makes t a parallel test that has the in-process Caddy to itself until it ends.
func inProcess(t *testing.T) {
	t.Parallel()
	caddyInUse.Lock()
	t.Cleanup(caddyInUse.Unlock)
}

// ownProcesses makes t a parallel test that runs once one of processSlots is free.
func ownProcesses(t *testing.T) {
	t.Parallel()
	processSlots <- struct{}{}
	t.Cleanup(func() { <-processSlots })
}

// waitingTests is the -parallel of this package when none is given. A parallel test counts
// against -parallel while it waits for its turn in inProcess or ownProcesses, which hold the
// real limits, so the default of GOMAXPROCS (2 on the machines that run make test) would have
// the in-process tests wait for one another in every slot.
const waitingTests = 64

func TestMain(m *testing.M) {
	flag.Parse()
	parallelGiven := false
	flag.Visit(func(f *flag.Flag) { parallelGiven = parallelGiven || f.Name == "test.parallel" })
	if !parallelGiven {
		flag.Set("test.parallel", strconv.Itoa(waitingTests))
	}
	dir, err := os.MkdirTemp("", "posts-e2e-")
	if err != nil {
		panic(err)
	}
	dataDir = dir
	ferretDir, err := os.MkdirTemp("", "posts-e2e-ferretdb-")
	if err != nil {
		panic(err)
	}
	if ferret, err = mongotest.Start(ferretDir); err != nil {
		panic(err)
	}
	if ferretDB, err = mongo.Connect(options.Client().ApplyURI(ferret.URI)); err != nil {
		panic(err)
	}
	if err := prepareFerretDB(); err != nil {
		panic(err)
	}
	proxy = startStallProxy(ferret.Socket)
	idp = newIdentityProvider()
	initConfig, err := startInProcessCaddy()
	if err != nil {
		panic(err)
	}
	code := m.Run()
	// FerretDB waits for its clients to hang up: the last config's, and the tests' own.
	_ = caddy.Stop()
	_ = ferretDB.Disconnect(context.Background())
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
	return fmt.Sprintf(`{
	admin localhost:2999
	http_port 9080
	https_port 9443
	grace_period 1ns
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
`, site, accessLog(), dataDir, idp.URL+"/jwks.json", issuer, audience, aliceKey, bobDigest,
		basicSite, daveHash, dataDir, idp.URL+"/jwks.json", aliceKey,
		stalledSite, proxy.addr, aliceKey, deadSite, aliceKey)
}

// startCaddy loads the test config into the in-process Caddy (a no-op when it is running already).
func startCaddy(t *testing.T) *client {
	t.Helper()
	tc := caddytest.NewTester(t)
	tc.InitServer(config(), "caddyfile")
	if t.Failed() {
		t.FailNow()
	}
	return &client{t: t, http: tc.Client}
}

// client makes requests and reads the store.
type client struct {
	t    *testing.T
	http *http.Client
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// header lines such as "X-API-Key: alice-key"; an empty line adds nothing
func (c *client) do(method, url, body string, header ...string) response {
	c.t.Helper()
	res, err := c.fetch(request{method, url, body, header})
	if err != nil {
		c.t.Fatal(err)
	}
	return res
}

// request is a request of do: method, URL, body ("" for none) and header lines.
type request struct {
	method, url, body string
	header            []string
}

// fetch makes r and reads its response; unlike do, it may run on any goroutine.
func (c *client) fetch(r request) (response, error) {
	var reader io.Reader
	if r.body != "" {
		reader = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, r.url, reader)
	if err != nil {
		return response{}, err
	}
	for _, h := range r.header {
		if h == "" {
			continue // no credential
		}
		name, value, _ := strings.Cut(h, ":")
		req.Header.Add(name, strings.TrimSpace(value))
	}
	res, err := c.http.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", r.method, r.url, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: reading the body: %w", r.method, r.url, err)
	}
	return response{res.StatusCode, res.Header, data}, nil
}

// atOnce makes every request at once, each on a goroutine of its own, and returns their
// responses in order, or the errors of those that got none: for requests that each wait out a
// timeout, so that they wait it together.
func (c *client) atOnce(requests []request) ([]response, error) {
	responses, errs := make([]response, len(requests)), make([]error, len(requests))
	var wg sync.WaitGroup
	for i, r := range requests {
		wg.Go(func() { responses[i], errs[i] = c.fetch(r) })
	}
	wg.Wait()
	return responses, errors.Join(errs...)
}

const (
	asAlice  = "X-API-Key: " + aliceKey
	asBob    = "X-API-Key: " + bobKey
	jsonBody = "Content-Type: application/json"
)

// create makes a post on the main site as the user of key and returns it.
func (c *client) create(key, title string) postOut {
	c.t.Helper()
	return c.createOn(site, key, title)
}

// createOn makes a post through siteURL as the user of key and returns it.
func (c *client) createOn(siteURL, key, title string) postOut {
	c.t.Helper()
	res := c.do("POST", siteURL+"/posts", fmt.Sprintf(`{"title": %q, "body": "body of %s"}`, title, title), key, jsonBody)
	if res.status != http.StatusCreated {
		c.t.Fatalf("creating %q: status %d, body %s", title, res.status, res.body)
	}
	var p postOut
	res.decode(c.t, &p)
	return p
}

// postOut is a post as the API writes it.
type postOut struct {
	ID        string  `json:"id"`
	UserID    string  `json:"userId"`
	Title     string  `json:"title"`
	Body      *string `json:"body"`
	CreatedAt string  `json:"createdAt"`
	UpdatedAt string  `json:"updatedAt"`
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q; want application/json", ct)
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// wantError checks a failure: its status, a JSON {"error": ...} body that contains want, and,
// through the store, that nothing changed since before.
func (r response) wantError(t *testing.T, status int, want string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d; want %d (body %s)", r.status, status, r.body)
	}
	var e struct {
		Error string `json:"error"`
	}
	r.decode(t, &e)
	if e.Error == "" || !strings.Contains(e.Error, want) {
		t.Errorf("error = %q; want it to contain %q", e.Error, want)
	}
}

// stored returns every stored post, one line each: the rows of the SQLite file that the data_dir
// sites share, in id order, then the documents of the FerretDB that the mongodb_uri sites use,
// in _id order. A write through any site shows in it.
func stored(t *testing.T) []string {
	t.Helper()
	return append(storedRows(t), storedDocuments(t)...)
}

// storedRows returns every row of the posts table of dataDir/posts.db as JSON, in id order.
func storedRows(t *testing.T) []string {
	t.Helper()
	db := readStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT id, user_id, title, body, created_at, updated_at FROM posts ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var row struct {
			ID        string  `json:"id"`
			UserID    string  `json:"user_id"`
			Title     string  `json:"title"`
			Body      *string `json:"body"`
			CreatedAt int64   `json:"created_at"`
			UpdatedAt int64   `json:"updated_at"`
		}
		if err := rows.Scan(&row.ID, &row.UserID, &row.Title, &row.Body, &row.CreatedAt, &row.UpdatedAt); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(row)
		out = append(out, "sqlite "+string(b))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// storedDocuments returns every document of the posts collection of the FerretDB, in _id
// order, as extended JSON.
func storedDocuments(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cur, err := ferretCollection("posts").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = "mongodb " + d.String()
	}
	return out
}

// storedPost reads one post from dataDir/posts.db; ok is false when there is none with the id.
// The columns come under the names of the API's members: userId, title, body (nil when the
// post has none), createdAt and updatedAt (as times).
func storedPost(t *testing.T, id string) (doc map[string]any, ok bool) {
	t.Helper()
	if !store.ValidID(id) {
		t.Fatalf("%q is not a post id", id)
	}
	db := readStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var (
		userID, title    string
		body             sql.NullString
		created, updated int64
	)
	err := db.QueryRowContext(ctx, `SELECT user_id, title, body, created_at, updated_at FROM posts WHERE id = ?`, id).
		Scan(&userID, &title, &body, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	doc = map[string]any{"userId": userID, "title": title, "body": nil,
		"createdAt": time.UnixMilli(created).UTC(), "updatedAt": time.UnixMilli(updated).UTC()}
	if body.Valid {
		doc["body"] = body.String
	}
	return doc, true
}

// unchanged fails the test if the stored posts differ from before.
func unchanged(t *testing.T, before []string) {
	t.Helper()
	after := stored(t)
	if strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Errorf("the stored posts changed:\nbefore %v\nafter  %v", before, after)
	}
}

// clearPosts empties the posts table of dataDir/posts.db.
func clearPosts(t *testing.T) {
	t.Helper()
	db := openStore(t, true)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, `DELETE FROM posts`); err != nil {
		t.Fatal(err)
	}
}

// openStore opens dataDir/posts.db as a client of its own, the way a user would with the sqlite3
// shell while the server runs: read-only unless writable, which only tests that must change the
// store ask for. The server's config opens the file when it starts, so it is there. The file is
// in WAL mode: a reader never waits for the server's writes, and a writer waits for the
// server's up to the busy timeout. The caller closes it.
//
// Reads go through readStore instead.
func openStore(t *testing.T, writable bool) *sql.DB {
	t.Helper()
	mode := "ro"
	if writable {
		mode = "rw" // not rwc: a missing file is the test's fault, not one to make
	}
	q := url.Values{"mode": {mode}, "_pragma": {"busy_timeout(5000)"}}
	dsn := (&url.URL{Scheme: "file", Path: filepath.Join(dataDir, sqlite.DatabaseFile), RawQuery: q.Encode()}).String()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

// storeReader is the read-only openStore of readStore, opened by its first caller.
var storeReader struct {
	once sync.Once
	db   *sql.DB
}

// readStore returns the tests' read-only client of dataDir/posts.db, which stays open, as a
// sqlite3 shell left open would: every check that nothing changed reads the store twice, and a
// client opened for each read parsed the schema each time (1.4 of the 11.6 CPU seconds of the
// in-process tests under -race). The caller does not close it.
func readStore(t *testing.T) *sql.DB {
	t.Helper()
	storeReader.once.Do(func() { storeReader.db = openStore(t, false) })
	if storeReader.db == nil {
		t.Fatal("the tests' client of the store could not be opened")
	}
	return storeReader.db
}

// ferretCollection is a collection of the database the mongodb_uri sites use in the FerretDB,
// through the tests' own connection, which bypasses the proxies.
func ferretCollection(name string) *mongo.Collection {
	return ferretDB.Database(DefaultDatabase).Collection(name)
}

var timestampRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestListingPosts(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)

	t.Run("an empty collection lists as [] and never null", func(t *testing.T) {
		clearPosts(t)
		res := c.do("GET", site+"/posts", "")
		if res.status != 200 || string(res.body) != "[]\n" {
			t.Fatalf("got %d %q; want 200 []", res.status, res.body)
		}
		if ct := res.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}
	})

	t.Run("posts come newest first", func(t *testing.T) {
		clearPosts(t)
		var want []string
		for _, title := range []string{"first", "second", "third"} {
			want = append([]string{c.create(asAlice, title).ID}, want...)
		}
		var got []postOut
		c.do("GET", site+"/posts", "").decode(t, &got)
		if ids := idsOf(got); strings.Join(ids, ",") != strings.Join(want, ",") {
			t.Errorf("ids = %v; want newest first %v", ids, want)
		}
	})

	t.Run("userId keeps only that user's posts", func(t *testing.T) {
		clearPosts(t)
		c.create(asAlice, "alice's")
		bobs := c.create(asBob, "bob's")
		var got []postOut
		c.do("GET", site+"/posts?userId=bob", "").decode(t, &got)
		if len(got) != 1 || !reflect.DeepEqual(got[0], bobs) {
			t.Errorf("got %+v; want only %+v", got, bobs)
		}
		c.do("GET", site+"/posts?userId=carol", "").decode(t, &got)
		if len(got) != 0 {
			t.Errorf("carol has no posts, got %+v", got)
		}
	})

	t.Run("pages follow the next link without duplicates or gaps while posts are added", func(t *testing.T) {
		clearPosts(t)
		var all []string // newest first
		for i := range 6 {
			all = append([]string{c.create(asAlice, fmt.Sprint("post ", i)).ID}, all...)
		}
		var seen []string
		next := "/posts?limit=2"
		for pages := 0; next != ""; pages++ {
			if pages > 3 {
				t.Fatal("more pages than posts")
			}
			res := c.do("GET", site+next, "")
			var page []postOut
			res.decode(t, &page)
			seen = append(seen, idsOf(page)...)
			next = nextLink(t, res.header.Get("Link"))
			if pages == 0 {
				c.create(asAlice, "added while paging") // newer than every page: never shows up later
			}
		}
		if strings.Join(seen, ",") != strings.Join(all, ",") {
			t.Errorf("paged through %v; want %v", seen, all)
		}
	})

	t.Run("the next link keeps the userId filter and the limit", func(t *testing.T) {
		clearPosts(t)
		for i := range 3 {
			c.create(asBob, fmt.Sprint("bob ", i))
		}
		res := c.do("GET", site+"/posts?userId=bob&limit=1", "")
		link := nextLink(t, res.header.Get("Link"))
		u, _ := url.Parse(link)
		if u.Path != "/posts" || u.Query().Get("userId") != "bob" || u.Query().Get("limit") != "1" || u.Query().Get("after") == "" {
			t.Errorf("next link = %q; want /posts with userId=bob, limit=1 and after", link)
		}
	})

	t.Run("the last page has no next link", func(t *testing.T) {
		clearPosts(t)
		c.create(asAlice, "only")
		res := c.do("GET", site+"/posts?limit=1", "")
		if link := res.header.Get("Link"); link != "" {
			t.Errorf("Link = %q on the last page", link)
		}
	})

	t.Run("HEAD answers like GET without a body", func(t *testing.T) {
		res := c.do("HEAD", site+"/posts", "")
		if res.status != 200 || len(res.body) != 0 || res.header.Get("Content-Type") != "application/json" {
			t.Errorf("HEAD /posts = %d %q %v", res.status, res.body, res.header)
		}
	})

	bad := []struct{ name, query, want string }{
		{"an unknown parameter, naming the allowed ones", "?sort=title", `unknown query parameter "sort"; allowed: userId, limit, after`},
		{"an operator smuggled into a parameter name", "?userId[$ne]=x", `unknown query parameter "userId[$ne]"`},
		{"a limit that is not a number", "?limit=ten", "limit must be a whole number"},
		{"a limit of zero", "?limit=0", "limit must be a whole number of posts, at least 1"},
		{"a negative limit", "?limit=-1", "limit must be from 1 to 5"},
		{"a limit above max_limit", "?limit=6", "limit must be from 1 to 5"},
		{"a cursor this API never made", "?after=not-a-cursor", "after is not a cursor"},
		{"a parameter given twice", "?userId=a&userId=b", `"userId" is given more than once`},
		{"an empty parameter", "?userId=", `"userId" is empty`},
		{"a malformed query string", "?userId=%zz", "malformed"},
	}
	for _, tt := range bad {
		t.Run("400 for "+tt.name, func(t *testing.T) {
			before := stored(t)
			c.do("GET", site+"/posts"+tt.query, "").wantError(t, http.StatusBadRequest, tt.want)
			unchanged(t, before)
		})
	}
}

func idsOf(posts []postOut) []string {
	ids := make([]string, len(posts))
	for i, p := range posts {
		ids[i] = p.ID
	}
	return ids
}

var linkRE = regexp.MustCompile(`^<([^>]+)>; rel="next"$`)

// nextLink returns the target of a Link: <...>; rel="next" header, or "" when there is none.
func nextLink(t *testing.T, header string) string {
	t.Helper()
	if header == "" {
		return ""
	}
	m := linkRE.FindStringSubmatch(header)
	if m == nil {
		t.Fatalf("Link = %q; want <...>; rel=\"next\"", header)
	}
	return m[1]
}

func TestGettingAPost(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	created := c.create(asAlice, "to read")

	t.Run("200 with the post", func(t *testing.T) {
		var got postOut
		c.do("GET", site+"/posts/"+created.ID, "").decode(t, &got)
		if !reflect.DeepEqual(got, created) {
			t.Errorf("got %+v; want %+v", got, created)
		}
	})
	t.Run("HEAD answers like GET without a body", func(t *testing.T) {
		res := c.do("HEAD", site+"/posts/"+created.ID, "")
		if res.status != 200 || len(res.body) != 0 {
			t.Errorf("HEAD = %d %q", res.status, res.body)
		}
	})
	t.Run("404 for an id no post has", func(t *testing.T) {
		c.do("GET", site+"/posts/"+store.NewID(time.Now()), "").wantError(t, 404, "post not found")
	})
	t.Run("404 for a malformed id", func(t *testing.T) {
		c.do("GET", site+"/posts/not-an-id", "").wantError(t, 404, "post not found")
	})
	t.Run("404 for HEAD of a missing post", func(t *testing.T) {
		if res := c.do("HEAD", site+"/posts/"+store.NewID(time.Now()), ""); res.status != 404 {
			t.Errorf("status = %d; want 404", res.status)
		}
	})
}

func TestCreatingAPost(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)

	t.Run("201 with the post, its Location, and the caller as author", func(t *testing.T) {
		res := c.do("POST", site+"/posts", `{"title": "  Hello  ", "body": "world"}`, asAlice, jsonBody)
		if res.status != http.StatusCreated {
			t.Fatalf("status = %d; body %s", res.status, res.body)
		}
		var p postOut
		res.decode(t, &p)
		if loc := res.header.Get("Location"); loc != "/posts/"+p.ID {
			t.Errorf("Location = %q; want /posts/%s", loc, p.ID)
		}
		if !regexp.MustCompile(`^[0-9a-f]{24}$`).MatchString(p.ID) {
			t.Errorf("id = %q; want 24 hex digits", p.ID)
		}
		if p.UserID != "alice" || p.Title != "Hello" || p.Body == nil || *p.Body != "world" {
			t.Errorf("post = %+v; want alice's, title trimmed to Hello, body world", p)
		}
		if !timestampRE.MatchString(p.CreatedAt) || p.UpdatedAt != p.CreatedAt {
			t.Errorf("createdAt = %q, updatedAt = %q; want equal RFC 3339 UTC timestamps with ms", p.CreatedAt, p.UpdatedAt)
		}
		doc, ok := storedPost(t, p.ID)
		if !ok || doc["userId"] != "alice" || doc["title"] != "Hello" || doc["body"] != "world" {
			t.Errorf("stored %v", doc)
		}
		created, _ := time.Parse(time.RFC3339, p.CreatedAt)
		if got, _ := doc["createdAt"].(time.Time); !got.Equal(created) {
			t.Errorf("stored createdAt %v; answered %v", got, created)
		}
	})

	t.Run("a key configured as a sha256 digest authenticates its user", func(t *testing.T) {
		if p := c.create(asBob, "by bob"); p.UserID != "bob" {
			t.Errorf("userId = %q; want bob", p.UserID)
		}
	})

	t.Run("a post without a body has no body member and none stored", func(t *testing.T) {
		res := c.do("POST", site+"/posts", `{"title": "no body"}`, asAlice, jsonBody)
		var p postOut
		res.decode(t, &p)
		if res.status != 201 || p.Body != nil || bytes.Contains(res.body, []byte(`"body"`)) {
			t.Errorf("got %d %s; want 201 without body", res.status, res.body)
		}
		if doc, _ := storedPost(t, p.ID); doc["body"] != nil {
			t.Errorf("stored body %v", doc["body"])
		}
	})

	t.Run("a null body is no body", func(t *testing.T) {
		res := c.do("POST", site+"/posts", `{"title": "null body", "body": null}`, asAlice, jsonBody)
		if res.status != 201 || bytes.Contains(res.body, []byte(`"body"`)) {
			t.Errorf("got %d %s; want 201 without body", res.status, res.body)
		}
	})

	t.Run("the largest title and body are accepted", func(t *testing.T) {
		body := fmt.Sprintf(`{"title": %q, "body": %q}`, strings.Repeat("é", 300), strings.Repeat("b", 50_000))
		if res := c.do("POST", site+"/posts", body, asAlice, jsonBody); res.status != 201 {
			t.Errorf("status = %d, body %s", res.status, res.body)
		}
	})
}

func TestUpdatingAPost(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)

	t.Run("200 with the post re-read, updatedAt advanced, createdAt kept", func(t *testing.T) {
		p := c.create(asAlice, "before")
		time.Sleep(5 * time.Millisecond) // so the update lands in a later millisecond
		res := c.do("PATCH", site+"/posts/"+p.ID, `{"title": "after"}`, asAlice, jsonBody)
		var got postOut
		res.decode(t, &got)
		if res.status != 200 || got.Title != "after" || *got.Body != *p.Body || got.CreatedAt != p.CreatedAt || got.UserID != "alice" {
			t.Fatalf("got %d %+v", res.status, got)
		}
		if got.UpdatedAt <= p.UpdatedAt {
			t.Errorf("updatedAt %s did not advance from %s", got.UpdatedAt, p.UpdatedAt)
		}
		if doc, _ := storedPost(t, p.ID); doc["title"] != "after" {
			t.Errorf("stored title %v", doc["title"])
		}
	})

	t.Run("a merge patch with a null body removes the body", func(t *testing.T) {
		p := c.create(asAlice, "with body")
		res := c.do("PATCH", site+"/posts/"+p.ID, `{"body": null}`, asAlice, "Content-Type: application/merge-patch+json")
		if res.status != 200 || bytes.Contains(res.body, []byte(`"body"`)) {
			t.Errorf("got %d %s; want 200 without body", res.status, res.body)
		}
		if doc, _ := storedPost(t, p.ID); doc["body"] != nil || doc["title"] != "with body" {
			t.Errorf("stored %v; want the title kept and no body", doc)
		}
	})

	t.Run("404 when no post has the id", func(t *testing.T) {
		before := stored(t)
		c.do("PATCH", site+"/posts/"+store.NewID(time.Now()), `{"title": "x"}`, asAlice, jsonBody).wantError(t, 404, "post not found")
		unchanged(t, before)
	})

	t.Run("404 for a malformed id", func(t *testing.T) {
		before := stored(t)
		c.do("PATCH", site+"/posts/nope", `{"title": "x"}`, asAlice, jsonBody).wantError(t, 404, "post not found")
		unchanged(t, before)
	})

	t.Run("403 when the post is someone else's", func(t *testing.T) {
		p := c.create(asAlice, "alice's")
		before := stored(t)
		c.do("PATCH", site+"/posts/"+p.ID, `{"title": "bob was here"}`, asBob, jsonBody).wantError(t, 403, "another user")
		unchanged(t, before)
	})
}

func TestDeletingAPost(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)

	t.Run("204 with an empty body, and the post is gone", func(t *testing.T) {
		p := c.create(asAlice, "doomed")
		res := c.do("DELETE", site+"/posts/"+p.ID, "", asAlice)
		if res.status != 204 || len(res.body) != 0 {
			t.Errorf("got %d %q; want 204 and no body", res.status, res.body)
		}
		if _, ok := storedPost(t, p.ID); ok {
			t.Error("the post is still stored")
		}
		c.do("GET", site+"/posts/"+p.ID, "").wantError(t, 404, "post not found")
	})
	t.Run("404 when no post has the id", func(t *testing.T) {
		before := stored(t)
		c.do("DELETE", site+"/posts/"+store.NewID(time.Now()), "", asAlice).wantError(t, 404, "post not found")
		unchanged(t, before)
	})
	t.Run("403 when the post is someone else's", func(t *testing.T) {
		p := c.create(asAlice, "alice keeps this")
		before := stored(t)
		c.do("DELETE", site+"/posts/"+p.ID, "", asBob).wantError(t, 403, "another user")
		unchanged(t, before)
	})
}

func TestOtherMethodsGet405(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	p := c.create(asAlice, "target")
	tests := []struct{ method, path, allow string }{
		{"PUT", "/posts", "GET, HEAD, POST"},
		{"DELETE", "/posts", "GET, HEAD, POST"},
		{"PATCH", "/posts", "GET, HEAD, POST"},
		{"OPTIONS", "/posts", "GET, HEAD, POST"},
		{"PUT", "/posts/" + p.ID, "GET, HEAD, PATCH, DELETE"},
		{"POST", "/posts/" + p.ID, "GET, HEAD, PATCH, DELETE"},
		{"TRACE", "/posts/" + p.ID, "GET, HEAD, PATCH, DELETE"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+strings.Split(tt.path, "/")[1], func(t *testing.T) {
			before := stored(t)
			res := c.do(tt.method, site+tt.path, `{"title": "put"}`, asAlice, jsonBody)
			res.wantError(t, http.StatusMethodNotAllowed, tt.method+" is not allowed")
			if got := res.header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow = %q; want %q", got, tt.allow)
			}
			unchanged(t, before)
		})
	}
}

func TestAuthentication(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	p := c.create(asAlice, "guarded")
	writes := []struct{ method, path, body string }{
		{"POST", "/posts", `{"title": "anonymous"}`},
		{"PATCH", "/posts/" + p.ID, `{"title": "anonymous"}`},
		{"DELETE", "/posts/" + p.ID, ""},
	}
	for _, w := range writes {
		t.Run(w.method+" without credentials gets 401 with a Bearer challenge", func(t *testing.T) {
			before := stored(t)
			res := c.do(w.method, site+w.path, w.body, jsonBody)
			res.wantError(t, 401, "authentication required")
			if got := res.header.Get("WWW-Authenticate"); got != `Bearer realm="posts"` {
				t.Errorf("WWW-Authenticate = %q", got)
			}
			unchanged(t, before)
		})
		t.Run(w.method+" with an unknown key gets 401", func(t *testing.T) {
			before := stored(t)
			res := c.do(w.method, site+w.path, w.body, jsonBody, "X-API-Key: not-a-key")
			res.wantError(t, 401, "unknown API key")
			if got := res.header.Get("WWW-Authenticate"); !strings.Contains(got, `error="invalid_token"`) {
				t.Errorf("WWW-Authenticate = %q", got)
			}
			unchanged(t, before)
		})
	}
	t.Run("GET needs no credentials", func(t *testing.T) {
		if res := c.do("GET", site+"/posts/"+p.ID, ""); res.status != 200 {
			t.Errorf("status = %d", res.status)
		}
	})
	t.Run("GET with an unknown key is refused, not served as anonymous", func(t *testing.T) {
		c.do("GET", site+"/posts", "", "X-API-Key: not-a-key").wantError(t, 401, "unknown API key")
	})
	t.Run("a bearer token is refused where no jwks_url is configured", func(t *testing.T) {
		c.do("GET", deadSite+"/posts", "", "Authorization: Bearer abc.def.ghi").wantError(t, 401, "bearer tokens are not accepted")
	})
	t.Run("the key header given twice is a malformed request", func(t *testing.T) {
		before := stored(t)
		c.do("POST", site+"/posts", `{"title": "twice"}`, jsonBody, asAlice, asBob).wantError(t, 400, "more than once")
		unchanged(t, before)
	})
}

// TestBadInputChangesNothing sends every kind of bad body to POST and PATCH: each gets its status
// and a message, and the stored posts stay as they were.
func TestBadInputChangesNothing(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	p := c.create(asAlice, "untouched")
	type badInput struct {
		name        string
		contentType string // "" for application/json, "-" for none
		body        string
		status      int
		want        string
		postOnly    bool
		patchOnly   bool
	}
	tests := []badInput{
		{name: "a body that is not JSON", body: `{"title": `, status: 400, want: "not valid JSON"},
		{name: "an empty body", body: ``, status: 400, want: "the body is empty"},
		{name: "a JSON array", body: `[{"title": "x"}]`, status: 400, want: "must be a JSON object"},
		{name: "a JSON string", body: `"title"`, status: 400, want: "must be a JSON object"},
		{name: "two objects", body: `{"title": "a"} {"title": "b"}`, status: 400, want: "nothing after it"},
		{name: "a title that is a number", body: `{"title": 42}`, status: 400, want: "title must be a string"},
		{name: "a body that is a boolean", body: `{"title": "t", "body": true}`, status: 400, want: "body must be a string"},
		{name: "a member given twice", body: `{"title": "a", "title": "b"}`, status: 400, want: `"title" is given more than once`},
		{name: "an operator as the title", body: `{"title": {"$ne": null}}`, status: 400, want: "title must be a string"},
		{name: "a body over max_body_size", body: `{"title": "big", "body": "` + strings.Repeat("x", 65*1024) + `"}`, status: 413, want: "larger than the limit of 64 KiB"},
		{name: "text/plain", contentType: "text/plain", body: `{"title": "x"}`, status: 415, want: "Content-Type must be application/json"},
		{name: "no Content-Type", contentType: "-", body: `{"title": "x"}`, status: 415, want: "Content-Type must be"},
		{name: "form encoding", contentType: "application/x-www-form-urlencoded", body: `title=x`, status: 415, want: "Content-Type must be"},
		{name: "merge-patch+json on POST", contentType: "application/merge-patch+json", body: `{"title": "x"}`, status: 415, want: "Content-Type must be application/json", postOnly: true},
		{name: "no title", body: `{"body": "only a body"}`, status: 422, want: "title is required", postOnly: true},
		{name: "an empty title", body: `{"title": ""}`, status: 422, want: "title is required"},
		{name: "a blank title", body: `{"title": " \t\n "}`, status: 422, want: "title is required"},
		{name: "a title of 301 characters", body: `{"title": "` + strings.Repeat("t", 301) + `"}`, status: 422, want: "title must be 1 to 300 characters"},
		{name: "a body of 50,001 characters", body: `{"title": "t", "body": "` + strings.Repeat("b", 50_001) + `"}`, status: 422, want: "body must be at most 50000 characters"},
		{name: "a null title", body: `{"title": null}`, status: 422, want: "title"},
		{name: "an empty object", body: `{}`, status: 422, want: "the update is empty", patchOnly: true},
		{name: "an unknown member", body: `{"title": "t", "tags": ["a"]}`, status: 422, want: `unknown member "tags"`},
		{name: "an update operator", body: `{"$set": {"userId": "bob"}}`, status: 422, want: `unknown member "$set"`},
		{name: "a dotted key", body: `{"title.en": "t"}`, status: 422, want: `unknown member "title.en"`},
		{name: "a title in another letter case", body: `{"Title": "t"}`, status: 422, want: `unknown member "Title"`},
	}
	for _, owned := range []string{"id", "_id", "userId", "createdAt", "updatedAt", "USERID", "CreatedAt"} {
		tests = append(tests, badInput{name: "the server-owned member " + owned, body: fmt.Sprintf(`{"title": "t", %q: "x"}`, owned), status: 422, want: fmt.Sprintf("%q is set by the server", owned)})
	}
	for _, tt := range tests {
		for _, method := range []string{"POST", "PATCH"} {
			if (tt.postOnly && method != "POST") || (tt.patchOnly && method != "PATCH") {
				continue
			}
			t.Run(fmt.Sprintf("%s with %s gets %d", method, tt.name, tt.status), func(t *testing.T) {
				path := "/posts"
				if method == "PATCH" {
					path += "/" + p.ID
				}
				headers := []string{asAlice}
				switch tt.contentType {
				case "":
					headers = append(headers, jsonBody)
				case "-":
				default:
					headers = append(headers, "Content-Type: "+tt.contentType)
				}
				before := stored(t)
				c.do(method, site+path, tt.body, headers...).wantError(t, tt.status, tt.want)
				unchanged(t, before)
			})
		}
	}
	t.Run("a body over max_body_size without a Content-Length gets 413", func(t *testing.T) {
		before := stored(t)
		big := `{"title": "big", "body": "` + strings.Repeat("x", 65*1024) + `"}`
		req, _ := http.NewRequest("POST", site+"/posts", io.MultiReader(strings.NewReader(big))) // unknown length: chunked
		req.Header.Set("X-API-Key", aliceKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(res.Body)
		response{res.StatusCode, res.Header, data}.wantError(t, 413, "larger than the limit")
		unchanged(t, before)
	})
}

// TestStorageUnavailable: a database that cannot be reached, or does not answer within timeout,
// gets 503 with Retry-After and a message without internals, and nothing is reported as done.
func TestStorageUnavailable(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	// The post is in the stalled site's store, so the PATCH and DELETE below would change it if
	// they reached the database.
	p := c.createOn(stalledSite, asAlice, "kept")
	requests := []struct{ method, path, body string }{
		{"GET", "/posts", ""},
		{"GET", "/posts/" + p.ID, ""},
		{"POST", "/posts", `{"title": "lost"}`},
		{"PATCH", "/posts/" + p.ID, `{"title": "lost"}`},
		{"DELETE", "/posts/" + p.ID, ""},
	}
	check := func(t *testing.T, res response) {
		t.Helper()
		res.wantError(t, http.StatusServiceUnavailable, "the database is unavailable")
		if res.header.Get("Retry-After") == "" {
			t.Error("no Retry-After")
		}
		if bytes.Contains(res.body, []byte("127.0.0.1")) || bytes.Contains(bytes.ToLower(res.body), []byte("mongo")) {
			t.Errorf("the error leaks internals: %s", res.body)
		}
	}
	t.Run("the proxied site works while the proxy passes traffic", func(t *testing.T) {
		res := c.do("GET", stalledSite+"/posts/"+p.ID, "")
		if res.status != 200 {
			t.Fatalf("status = %d, body %s", res.status, res.body)
		}
		// The checks below that nothing changed see the site's writes only if they read its store.
		if docs := strings.Join(storedDocuments(t), "\n"); !strings.Contains(docs, p.ID) {
			t.Errorf("the FerretDB holds no post %s; the site writes elsewhere", p.ID)
		}
	})

	// Each request waits out a timeout (the dead site's server selection, the stalled site's
	// storage timeout): they are made all at once, with the proxy stalled, and nothing stored
	// may have changed after any of them.
	before := stored(t)
	var all []request
	for _, site := range []string{deadSite, stalledSite} {
		for _, r := range requests {
			all = append(all, request{r.method, site + r.path, r.body, []string{asAlice, jsonBody}})
		}
	}
	proxy.stall(true)
	responses, err := c.atOnce(all)
	proxy.stall(false)
	if err != nil {
		t.Fatal(err)
	}
	dead, stalled := responses[:len(requests)], responses[len(requests):]
	for i, r := range requests {
		t.Run(r.method+" "+strings.Split(r.path, "/")[1]+" with no database listening gets 503", func(t *testing.T) {
			check(t, dead[i])
			unchanged(t, before)
		})
	}
	for i, r := range requests {
		t.Run(r.method+" "+strings.Split(r.path, "/")[1]+" past the timeout gets 503", func(t *testing.T) {
			check(t, stalled[i])
			unchanged(t, before)
		})
	}
}

func TestOtherPathsGoToTheNextHandler(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	for _, path := range []string{"/", "/other", "/postsx", "/api/posts"} {
		t.Run(path, func(t *testing.T) {
			res := c.do("GET", site+path, "")
			if res.status != 200 || string(res.body) != "next handler" {
				t.Errorf("got %d %q; want the next handler's answer", res.status, res.body)
			}
		})
	}
	// Under /posts/, every path is the API's: one that is no route is its 404, not passed on.
	for _, path := range []string{"/posts/", "/posts/a/b", "/posts/0123456789abcdef01234567/"} {
		t.Run(path, func(t *testing.T) {
			c.do("GET", site+path, "").wantError(t, 404, "")
		})
	}
}

// serveTCP listens on a free loopback port for as long as the tests run, hands each connection
// to serve in its own goroutine, and returns the address.
func serveTCP(serve func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(conn)
		}
	}()
	return ln.Addr().String()
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
	p.addr = serveTCP(func(conn net.Conn) { p.serve(conn, socket) })
	return p
}

func (p *stallProxy) serve(client net.Conn, socket string) {
	defer client.Close()
	server, err := net.Dial("unix", socket)
	if err != nil {
		return
	}
	defer server.Close()
	go io.Copy(client, server)
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		if err != nil {
			return
		}
		if p.stalled.Load() {
			p.mu.Lock()
			p.broken = append(p.broken, client)
			p.mu.Unlock()
			continue
		}
		if _, err := server.Write(buf[:n]); err != nil {
			return
		}
	}
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

// TestTheStoreIsSharedAcrossReloads: a reload keeps the store (and the embedded store's open
// file) of the config before; the last config that used a store releases it, and with it the
// lock of the data_dir; the data outlives the store.
func TestTheStoreIsSharedAcrossReloads(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	p := c.create(asAlice, "outlives the store")
	embedded := "sqlite " + dataDir
	stalled := "mongodb mongodb://" + proxy.addr + "/?directConnection=true " + DefaultDatabase
	dead := "mongodb mongodb://127.0.0.1:1/?directConnection=true&serverSelectionTimeoutMS=300 " + DefaultDatabase
	before := pooled(t, embedded)

	t.Run("a reload that changes the handler keeps the store", func(t *testing.T) {
		tc := caddytest.NewTester(t)
		tc.InitServer(strings.Replace(config(), "max_limit 5", "max_limit 4", 1), "caddyfile")
		if after := pooled(t, embedded); after != before {
			t.Error("the reload made a new store")
		}
		if refs, _ := stores.References(embedded); refs != 2 {
			t.Errorf("%d references to the embedded store; want 2 (the two sites that use it)", refs)
		}
		c.do("GET", site+"/posts?limit=5", "").wantError(t, 400, "limit must be from 1 to 4")
	})

	t.Run("while a config uses the data_dir, no other store can open it", func(t *testing.T) {
		// What the next subtest sees free must be locked now, or it proves nothing.
		s, err := sqlite.Open(dataDir, sqlite.Options{})
		if err == nil {
			s.Close()
			t.Fatal("a second store opened the data_dir the running config holds")
		}
		if !strings.Contains(err.Error(), sqlite.LockFile+" is locked") {
			t.Errorf("error = %v; want one saying %s is locked", err, sqlite.LockFile)
		}
	})

	t.Run("the last config that uses a store releases it", func(t *testing.T) {
		tc := caddytest.NewTester(t)
		tc.InitServer("{\n\tadmin localhost:2999\n\thttp_port 9080\n\tgrace_period 1ns\n}\nhttp://localhost:9080 {\n\trespond \"no posts\"\n}\n", "caddyfile")
		for _, key := range []string{embedded, stalled, dead} {
			if _, ok := stores.References(key); ok {
				t.Errorf("%s is still pooled", key)
			}
		}
		// The lock on posts.lock is gone with the store: another store (of another process, or
		// of this one, as here) can open the data_dir.
		s, err := sqlite.Open(dataDir, sqlite.Options{})
		if err != nil {
			t.Fatalf("the data_dir is still held: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the posts are there after the store is opened again", func(t *testing.T) {
		c := startCaddy(t)
		var got postOut
		c.do("GET", site+"/posts/"+p.ID, "").decode(t, &got)
		if !reflect.DeepEqual(got, p) {
			t.Errorf("got %+v; want %+v", got, p)
		}
	})
}

// TestSynchronousFull: a config whose data_dir sites all set synchronous full loads onto the
// store that is open already, which goes on serving writes. (The next test's startCaddy sets
// it back to normal.)
func TestSynchronousFull(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	embedded := "sqlite " + dataDir
	before := pooled(t, embedded)
	tc := caddytest.NewTester(t)
	tc.InitServer(strings.ReplaceAll(config(), "data_dir "+dataDir, "data_dir "+dataDir+"\n\t\tsynchronous full"), "caddyfile")
	if t.Failed() {
		t.FailNow()
	}

	t.Run("the reload keeps the open store", func(t *testing.T) {
		if after := pooled(t, embedded); after != before {
			t.Error("the reload made a new store")
		}
	})
	t.Run("a write is answered and stored", func(t *testing.T) {
		p := c.create(asAlice, "synced in full")
		if doc, ok := storedPost(t, p.ID); !ok || doc["title"] != "synced in full" {
			t.Errorf("stored %v", doc)
		}
	})
}

// pooled returns the store pooled under key.
func pooled(t *testing.T, key string) store.Store {
	t.Helper()
	return poolValue[pooledStore](t, stores, key).Store
}

// poolValue returns the value pool holds under key.
func poolValue[T any](t *testing.T, pool *caddy.UsagePool, key string) T {
	t.Helper()
	var found any
	pool.Range(func(k, v any) bool {
		if k == key {
			found = v
		}
		return true
	})
	v, ok := found.(T)
	if !ok {
		t.Fatalf("nothing pooled under %q", key)
	}
	return v
}

// TestBadConfigIsRefused: values only Provision or Validate can check fail the load, and the
// running config stays.
func TestBadConfigIsRefused(t *testing.T) {
	inProcess(t)
	startCaddy(t)
	global := "{\n\tadmin localhost:2999\n\thttp_port 9080\n\tgrace_period 1ns\n}\n"
	t.Run("an API key from an unset environment variable", func(t *testing.T) {
		caddytest.AssertLoadError(t, global+"http://localhost:9080 {\n\tposts {\n\t\tapi_key {env.POSTS_TEST_UNSET_KEY} alice\n\t}\n}\n",
			"caddyfile", "api_keys[0]: the key is empty (is its environment variable set?)")
	})
	t.Run("an API key whose user id holds a control character, in JSON", func(t *testing.T) {
		caddytest.AssertLoadError(t, `{"admin": {"listen": "localhost:2999"}, "apps": {"http": {"servers": {"s": {"listen": [":9080"],
			"routes": [{"handle": [{"handler": "posts", "api_keys": [{"key": "k", "user_id": "eve\u0001"}], "data_dir": "`+dataDir+`"}]}]}}}}}`,
			"json", "api_keys[0]: the user id has a control character")
	})
	t.Run("a jwks_url that is not an http URL", func(t *testing.T) {
		caddytest.AssertLoadError(t, global+"http://localhost:9080 {\n\tposts {\n\t\tjwks_url ftp://keys.example.com/jwks.json\n\t}\n}\n",
			"caddyfile", `jwks_urls[0]: \"ftp://keys.example.com/jwks.json\" is not an http or https URL`)
	})
	t.Run("an issuer without a jwks_url", func(t *testing.T) {
		caddytest.AssertLoadError(t, global+"http://localhost:9080 {\n\tposts {\n\t\tissuer https://idp.example.com/\n\t}\n}\n",
			"caddyfile", "issuers and audiences apply to bearer tokens, which need jwks_urls")
	})
	t.Run("an HMAC algorithm in JSON", func(t *testing.T) {
		caddytest.AssertLoadError(t, `{"admin": {"listen": "localhost:2999"}, "apps": {"http": {"servers": {"s": {"listen": [":9080"],
			"routes": [{"handle": [{"handler": "posts", "jwks_urls": ["https://idp.example.com/jwks.json"], "algorithms": ["HS256"], "data_dir": "`+dataDir+`"}]}]}}}}}`,
			"json", `algorithms: \"HS256\" is not an accepted signing algorithm`)
	})
	t.Run("a negative max_limit in JSON", func(t *testing.T) {
		caddytest.AssertLoadError(t, `{"admin": {"listen": "localhost:2999"}, "apps": {"http": {"servers": {"s": {"listen": [":9080"],
			"routes": [{"handle": [{"handler": "posts", "max_limit": -1, "data_dir": "`+dataDir+`"}]}]}}}}}`,
			"json", "max_limit must be at least 1")
	})
	t.Run("synchronous with a mongodb_uri", func(t *testing.T) {
		caddytest.AssertLoadError(t, global+"http://localhost:9080 {\n\tposts {\n\t\tmongodb_uri mongodb://127.0.0.1:1/\n\t\tsynchronous full\n\t}\n}\n",
			"caddyfile", "synchronous applies to the embedded store")
	})
	t.Run("two sites on one data_dir with different synchronous", func(t *testing.T) {
		// dataDir is the running config's: the refused config must leave its store as it is.
		sites := fmt.Sprintf("http://localhost:9080 {\n\tposts {\n\t\tdata_dir %s\n\t\tsynchronous normal\n\t}\n}\n"+
			"http://localhost:9083 {\n\tposts {\n\t\tdata_dir %s\n\t\tsynchronous full\n\t}\n}\n", dataDir, dataDir)
		caddytest.AssertLoadError(t, global+sites, "caddyfile", "data_dir "+dataDir+": the sites that use it set different synchronous values")
	})
	t.Run("a synchronous that is neither normal nor full in JSON", func(t *testing.T) {
		caddytest.AssertLoadError(t, `{"admin": {"listen": "localhost:2999"}, "apps": {"http": {"servers": {"s": {"listen": [":9080"],
			"routes": [{"handle": [{"handler": "posts", "synchronous": "fast", "data_dir": "`+dataDir+`"}]}]}}}}}`,
			"json", `synchronous must be normal or full, not \"fast\"`)
	})
	t.Run("the running config still serves", func(t *testing.T) {
		c := startCaddy(t)
		if res := c.do("GET", site+"/posts", ""); res.status != 200 {
			t.Errorf("status = %d", res.status)
		}
	})
}
