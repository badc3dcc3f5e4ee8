// End-to-end helpers: the client, the checks of a response, the readers of stores and pools.
package caddymodule

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

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

// header lines such as "Authorization: ApiKey alice-key"; an empty line adds nothing
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
	asAlice  = "Authorization: ApiKey " + aliceKey
	asBob    = "Authorization: ApiKey " + bobKey
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
	Version   int64   `json:"version"`
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
	rows, err := db.QueryContext(ctx, `SELECT id, user_id, title, body, created_at, updated_at, version FROM posts ORDER BY id`)
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
			Version   int64   `json:"version"`
		}
		if err := rows.Scan(&row.ID, &row.UserID, &row.Title, &row.Body, &row.CreatedAt, &row.UpdatedAt, &row.Version); err != nil {
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
// post has none), createdAt and updatedAt (as times), and version.
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
		version          int64
	)
	err := db.QueryRowContext(ctx, `SELECT user_id, title, body, created_at, updated_at, version FROM posts WHERE id = ?`, id).
		Scan(&userID, &title, &body, &created, &updated, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	doc = map[string]any{"userId": userID, "title": title, "body": nil,
		"createdAt": time.UnixMilli(created).UTC(), "updatedAt": time.UnixMilli(updated).UTC(), "version": version}
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
