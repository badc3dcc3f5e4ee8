package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/postsedge/caddy-posts/bench/bare"
	"github.com/postsedge/caddy-posts/posts"
)

// The data the benchmarks read: seedUsers users with postsPerUser posts each, listUser among
// them, and the post that GET /posts/{id} reads, by alice (the API key's user).
const (
	seedUsers    = 20
	postsPerUser = 50
	// the collections of the paging pair, and its page size
	smallPosts = 2000
	largePosts = 200000
	pageSize   = 20
	listUser   = "user-01"
	author     = "alice"
)

// env is everything the pairs run against: Caddy with the module, the bare baselines, and the
// credentials and data they need.
type env struct {
	caddyBin, caddyfile, dir string
	jwksURL                  string

	read, write, respond, admin string // Caddy's sites and admin endpoint (http://127.0.0.1:port)
	bareRead, bareWrite         string // the bare baselines on the read and the write database
	// pages are the URLs of GET /posts?limit=20, first page and page 50, of the small and the
	// large collection.
	pages            map[string]string
	page50First      map[string]string // the id of the first post of page 50, by collection
	postID, listUser string
	token, apiKey    string
	postJSON         []byte // the body of GET /posts/{id}

	caddy   *caddyProcess
	closers []func()
}

// start starts everything in dir (a fresh temporary directory) and checks that every side
// answers what the pairs expect.
func start(ctx context.Context, caddyBin, caddyfile, dir string) (e *env, err error) {
	e = &env{caddyBin: caddyBin, caddyfile: caddyfile, dir: dir, listUser: listUser, apiKey: "bench-" + rand.Text()}
	defer func() {
		if err != nil {
			e.close()
		}
	}()

	if e.jwksURL, err = e.startIDP(); err != nil {
		return e, err
	}

	// The post GET /posts/{id} reads is made here, so that its bytes are known before Caddy
	// starts and can be the respond route's body.
	created := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Hour)
	body := "a post read over and over"
	target := bare.Post{ID: bson.NewObjectID(), UserID: author, Title: "benchmark", Body: &body, CreatedAt: created, UpdatedAt: created}
	e.postID = target.ID.Hex()
	if e.postJSON, err = bare.EncodePost(target); err != nil {
		return e, err
	}

	if e.caddy, err = e.startCaddy(ctx, filepath.Join(dir, "caddy")); err != nil {
		return e, err
	}
	e.closers = append(e.closers, e.caddy.stop)
	e.read, e.write, e.respond, e.admin = e.caddy.read, e.caddy.write, e.caddy.respond, e.caddy.admin
	e.pages, e.page50First = map[string]string{}, map[string]string{}

	socket := filepath.Join(e.caddy.dir, "posts", "mongodb.sock")
	mc, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + url.QueryEscape(socket)))
	if err != nil {
		return e, err
	}
	e.closers = append(e.closers, func() { _ = mc.Disconnect(context.Background()) })
	if err := seed(ctx, mc.Database("posts").Collection("posts"), target); err != nil {
		return e, fmt.Errorf("seeding: %w", err)
	}

	for name, size := range map[string]int{"small": smallPosts, "large": largePosts} {
		began := time.Now()
		seeded, err := insertPosts(ctx, mc.Database(name).Collection("posts"), created, size)
		if err != nil {
			return e, fmt.Errorf("seeding %s: %w", name, err)
		}
		log.Printf("%d posts seeded in the %s collection in %s", size, name, time.Since(began).Round(time.Second))
		base := e.caddy.small
		if name == "large" {
			base = e.caddy.large
		}
		// Page 50 starts after the 980th post; its cursor is made here, as following 49 Links
		// through the large collection would take minutes.
		last := seeded[49*pageSize-1]
		e.pages[name+" first"] = base + "/posts?limit=" + strconv.Itoa(pageSize)
		e.pages[name+" page 50"] = e.pages[name+" first"] + "&after=" + posts.Cursor(posts.Post{ID: last.ID, CreatedAt: last.CreatedAt})
		e.page50First[name] = seeded[49*pageSize].ID.Hex()
	}

	keys := map[string]string{e.apiKey: author}
	if e.bareRead, err = e.serve(bare.New(mc.Database("posts").Collection("posts"), keys)); err != nil {
		return e, err
	}
	if e.bareWrite, err = e.serve(bare.New(mc.Database("writes").Collection("posts"), keys)); err != nil {
		return e, err
	}
	return e, e.check(ctx)
}

// startIDP serves a JWKS with one RSA key and signs the RS256 token every bearer request reuses.
func (e *env) startIDP() (jwksURL string, err error) {
	const kid = "bench-rs256"
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	jwk, err := jwkset.NewJWKFromKey(&key.PublicKey, jwkset.JWKOptions{
		Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: jwkset.AlgRS256, USE: jwkset.UseSig},
	})
	if err != nil {
		return "", err
	}
	set, err := json.Marshal(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{jwk.Marshal()}})
	if err != nil {
		return "", err
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(set)
	}))
	e.closers = append(e.closers, srv.Close)
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"sub": author, "iat": now.Unix(), "exp": now.Add(3 * time.Hour).Unix()})
	tok.Header["kid"] = kid
	e.token, err = tok.SignedString(key)
	return srv.URL, err
}

// caddyProcess is one Caddy running the bench Caddyfile, with its files in dir.
type caddyProcess struct {
	read, write, respond, admin string // its sites and admin endpoint (http://127.0.0.1:port)
	small, large                string // the sites of the small and the large collection
	dir, log                    string
	cmd                         *exec.Cmd
	stop                        func()
}

// startCaddy starts Caddy with its files in dir, a new directory, and waits until it serves
// writes.
func (e *env) startCaddy(ctx context.Context, dir string) (p *caddyProcess, err error) {
	p = &caddyProcess{dir: dir, log: filepath.Join(dir, "caddy.log"), stop: func() {}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	names := []string{"READ", "WRITE", "RESPOND", "ADMIN", "SMALL", "LARGE"}
	ports := map[string]int{}
	taken := map[int]bool{}
	for len(ports) < len(names) { // a port just freed may come again: each site needs its own
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		if !taken[port] {
			taken[port], ports[names[len(ports)]] = true, port
		}
	}
	local := func(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }
	p.read, p.write, p.respond, p.admin = local(ports["READ"]), local(ports["WRITE"]), local(ports["RESPOND"]), local(ports["ADMIN"])
	p.small, p.large = local(ports["SMALL"]), local(ports["LARGE"])
	home := filepath.Join(dir, "home")
	vars := []string{
		"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"XDG_CACHE_HOME=" + filepath.Join(home, "cache"),
		"BENCH_DIR=" + dir, "BENCH_JWKS_URL=" + e.jwksURL, "BENCH_API_KEY=" + e.apiKey, "BENCH_POST_JSON=" + string(e.postJSON),
	}
	for name, port := range ports {
		vars = append(vars, fmt.Sprintf("BENCH_%s_PORT=%d", name, port))
	}

	logFile, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(e.caddyBin, "run", "--config", e.caddyfile, "--adapter", "caddyfile")
	p.cmd.Env = append(os.Environ(), vars...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", e.caddyBin, err)
	}
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); logFile.Close(); close(done) }()
	p.stop = func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	}
	if err := p.waitForWrite(ctx, e.token, done); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// waitForWrite makes one POST /posts with the bearer token, which starts the embedded store,
// fetches the JWKS and checks the token, retrying while Caddy starts, and not once it has exited.
func (p *caddyProcess) waitForWrite(ctx context.Context, token string, exited <-chan struct{}) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, body, err := do(ctx, "POST", p.read+"/posts", `{"title": "the first post"}`, "Authorization: Bearer "+token)
		select {
		case <-exited:
			deadline = time.Time{}
		default:
		}
		switch {
		case err == nil && status == http.StatusCreated:
			return nil
		case err == nil && status != http.StatusServiceUnavailable, time.Now().After(deadline):
			log, _ := os.ReadFile(p.log)
			return fmt.Errorf("the first POST /posts: status %d, %s, %v; Caddy's log:\n%s", status, body, err, log)
		case ctx.Err() != nil:
			return ctx.Err()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// seed inserts the target post and seedUsers×postsPerUser others.
func seed(ctx context.Context, coll *mongo.Collection, target bare.Post) error {
	if _, err := coll.InsertOne(ctx, target); err != nil {
		return err
	}
	_, err := insertPosts(ctx, coll, target.CreatedAt, seedUsers*postsPerUser)
	return err
}

// insertPosts inserts n posts of seedUsers users in turn, each a minute older than the one
// before, with bodies of 12 to 240 bytes, and returns them, newest first.
func insertPosts(ctx context.Context, coll *mongo.Collection, newest time.Time, n int) ([]bare.Post, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	all := make([]bare.Post, 0, n)
	var docs []any
	for i := range n {
		user := fmt.Sprintf("user-%02d", i%seedUsers)
		if i%seedUsers == 0 {
			user = author
		}
		body := strings.Repeat("lorem ipsum ", 1+i%20)
		created := newest.Add(-time.Duration(i+1) * time.Minute)
		p := bare.Post{ID: bson.NewObjectID(), UserID: user, Title: fmt.Sprintf("post %d", i), Body: &body, CreatedAt: created, UpdatedAt: created}
		all, docs = append(all, p), append(docs, p)
		if len(docs) == 10000 || i == n-1 {
			if _, err := coll.InsertMany(ctx, docs); err != nil {
				return nil, err
			}
			docs = docs[:0]
		}
	}
	return all, nil
}

// serve serves h on a free port of 127.0.0.1 until e closes.
func (e *env) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	e.closers = append(e.closers, func() { _ = srv.Close() })
	return "http://" + ln.Addr().String(), nil
}

// check fails unless every side answers what its pair compares: the same bytes for the same
// post, and a full page for the lists.
func (e *env) check(ctx context.Context) error {
	for _, base := range []string{e.read, e.bareRead, e.respond} {
		status, body, err := do(ctx, "GET", base+"/posts/"+e.postID, "")
		if err != nil || status != http.StatusOK || !bytes.Equal(body, e.postJSON) {
			return fmt.Errorf("GET %s/posts/%s: %d %q, %v; want 200 %q", base, e.postID, status, body, err, e.postJSON)
		}
	}
	for _, base := range []string{e.read, e.bareRead} {
		status, body, err := do(ctx, "GET", base+"/posts?userId="+e.listUser+"&limit=10", "")
		var page []struct{ UserID string }
		if err == nil {
			err = json.Unmarshal(body, &page)
		}
		if err != nil || status != http.StatusOK || len(page) != 10 || page[0].UserID != e.listUser {
			return fmt.Errorf("GET %s/posts?userId=%s&limit=10: %d %s, %v; want 10 posts", base, e.listUser, status, body, err)
		}
	}
	for _, q := range []struct {
		query, id string
		ok        func(body []byte) bool
	}{
		{postQuery, e.postID, func(b []byte) bool { return bytes.Contains(b, []byte(`"id":"`+e.postID+`"`)) }},
		{userPostsQuery, e.listUser, func(b []byte) bool { return bytes.Count(b, []byte(`"createdAt"`)) == 10 }},
	} {
		req, _ := json.Marshal(map[string]any{"query": q.query, "variables": map[string]string{"id": q.id}})
		status, body, err := do(ctx, "POST", e.read+"/graphql", string(req))
		if err != nil || status != http.StatusOK || bytes.Contains(body, []byte(`"errors"`)) || !q.ok(body) {
			return fmt.Errorf("POST /graphql %s: %d %s, %v", q.query, status, body, err)
		}
	}
	for _, page := range []string{e.pages["small first"], e.pages["small page 50"]} {
		status, body, err := do(ctx, "GET", page, "")
		var got []struct{ ID string }
		if err == nil {
			err = json.Unmarshal(body, &got)
		}
		if err != nil || status != http.StatusOK || len(got) != pageSize || page == e.pages["small page 50"] && got[0].ID != e.page50First["small"] {
			return fmt.Errorf("GET %s: %d %.200s, %v; want %d posts (page 50 from %s)", page, status, body, err, pageSize, e.page50First["small"])
		}
	}
	for _, base := range []string{e.write, e.bareWrite} {
		status, body, err := do(ctx, "POST", base+"/posts", `{"title": "check"}`, "X-API-Key: "+e.apiKey)
		if err != nil || status != http.StatusCreated {
			return fmt.Errorf("POST %s/posts: %d %s, %v; want 201", base, status, body, err)
		}
	}
	return nil
}

// do makes one request and reads its answer.
func do(ctx context.Context, method, url, body string, headers ...string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Set(name, value)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// close stops everything start started, the last first.
func (e *env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
	e.closers = nil
}
