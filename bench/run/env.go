// The environment of a benchmark run: the Caddy process, its stores seeded through the API, the
// bare baselines and the peers, started and stopped together. One file, longer than most, because
// every pair reads the same environment and its set-up is easiest to check in one place.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"log"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/postsedge/caddy-posts/bench/bare"
	"github.com/postsedge/caddy-posts/bench/wsload"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// The data the benchmarks read: largePosts posts (the store of most pairs, and PocketBase's)
// and smallPosts (the other side of the paging pairs), by seedUsers users in turn, author (the
// API key's user) first and listUser among them, seeded through each server's API.
const (
	seedUsers  = 20
	largePosts = 200000
	smallPosts = 2000
	pageSize   = 20
	listUser   = "user-01"
	author     = "alice"
)

// seedPost is a post as every server is seeded with it.
type seedPost struct{ user, title, body string }

// seedPosts are the first n posts of the seeding: post i is by user i mod seedUsers (author
// for 0, user-01 … user-19 for the others), titled "post i", with a body of 12 to 240 bytes,
// "lorem ipsum " again and again, but for the words of the search rows that it holds
// (searchWords), in place of its first.
func seedPosts(n int) []seedPost {
	ps := make([]seedPost, n)
	for i := range ps {
		user := fmt.Sprintf("user-%02d", i%seedUsers)
		if i%seedUsers == 0 {
			user = author
		}
		body := strings.Repeat("lorem ipsum ", 1+i%20)
		if w := searchWords(i); len(w) > 0 {
			body = withWords(body, w)
		}
		ps[i] = seedPost{user: user, title: fmt.Sprintf("post %d", i), body: body}
	}
	return ps
}

// seeded is what a server's API answered for the seeding of one store: the posts' ids
// (in the order of seedPosts), the author's among them, the others (which no pair writes, so
// they stay at version 1), and the run of POSTs.
type seeded struct {
	ids, authors, others []string
	newest               []created // the posts, newest first (caddy-posts and PocketBase)
	run                  result
}

// env is everything the pairs run against: Caddy with the module, the baselines, PocketBase,
// and the credentials and data they need.
type env struct {
	caddyBin, caddyfile, dir string
	conc                     int // of the seeding, as of the pairs
	jwksURL                  string
	tokens                   map[string]string // a bearer token of each user, by user id
	apiKey                   string            // the author's

	caddy                       *caddyProcess
	read, write, small, respond string // Caddy's sites (http://127.0.0.1:port): the large store, the writes, the small store, respond
	uncached                    string // the large store's site that keeps no prepared document
	caddyProfile                string // Caddy's /debug/pprof
	bareRead, bareWrite         baseline
	bareWriteEvents             baseline // bench/bare logging each post's event, on the file of the writes
	pb, pbProfile               string   // PocketBase's records of posts, and its /debug/pprof; "" unless a pair needs it
	gqlgen, gqlgenProfile       string   // the gqlgen server's /graphql, and its /debug/pprof; "" unless a pair needs it
	gqlgenVersion               string   // the version of gqlgen it was built with
	// Caddy's reverse_proxy sites: to the bench/bare of the large store (bareRead), and to the
	// gqlgen server.
	proxyBare, proxyGQLGen string
	// The ./caddy on the copies of the large store of row 39e (startSearchCopies), with the
	// search index and without; unless it runs, not started.
	copies searchCopies

	large, smallStore, pbStore seeded
	// tracingNow and tracingBefore are the processes of the T rows (tracing.go).
	tracingNow, tracingBefore tracingSite
	// pages are the URLs of GET /posts?limit=20, first page and page 50, of the small and the
	// large store; page50First is the id of the first post of page 50, by store.
	pages, page50First map[string]string
	postJSON           []byte // the body of the respond route: a post as GET /posts/{id} answers it

	notes   []string // for RESULTS.md, under the table
	closers []func()
}

// baseline is bench/bare serving a SQLite file (one of Caddy's, or a copy) in a process of its own.
type baseline struct{ url, profile, file string }

// start starts everything in dir (a fresh temporary directory), PocketBase only if withPeer,
// the gqlgen server only if withGQLGen, the T rows' processes only if withTracing, seeds every store through its API at conc connections,
// and checks that every side answers what the pairs expect.
func start(ctx context.Context, cfg config, dir string, withPeer, withGQLGen, withTracing bool) (e *env, err error) {
	e, err = startFresh(cfg, dir)
	if err != nil {
		return e, err
	}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	e.pages, e.page50First = map[string]string{}, map[string]string{}
	e.notes = []string{fmt.Sprintf("Every read by id (GET /posts/{id}, post(id), PocketBase's view) takes a random post among the %s of its store, but row Ph's (one post every time); "+
		"the stores are seeded through each server's API with the same posts (%d users in turn, bodies of 12 to 240 bytes).", thousands(largePosts), seedUsers)}

	if e.caddy, err = e.startCaddy(ctx, filepath.Join(dir, "caddy")); err != nil {
		return e, err
	}
	e.closers = append(e.closers, e.caddy.stop)
	e.read, e.write, e.small, e.respond = e.caddy.sites["READ"], e.caddy.sites["WRITE"], e.caddy.sites["SMALL"], e.caddy.sites["RESPOND"]
	e.uncached = e.caddy.sites["UNCACHED"]
	e.caddyProfile = e.caddy.sites["ADMIN"] + "/debug/pprof"
	e.proxyBare, e.proxyGQLGen = e.caddy.sites["PROXY_BARE"], e.caddy.sites["PROXY_GQLGEN"]
	// The baselines open the files of the read and the write site, which Caddy has made; the
	// one of the read site listens where Caddy's reverse_proxy to bench/bare forwards.
	if e.bareRead, err = e.startBare(ctx, bareArg, "read", e.caddy.upstreams["BARE"]); err != nil {
		return e, err
	}
	if e.bareWrite, err = e.startBare(ctx, bareArg, "write", ""); err != nil {
		return e, err
	}
	if e.bareWriteEvents, err = e.startBare(ctx, bareEventsArg, "write", ""); err != nil {
		return e, err
	}

	if e.large, err = e.seedCaddy(ctx, e.read, largePosts); err != nil {
		return e, err
	}
	rss, err := wsload.ResidentMemory(e.caddy.proc.cmd.Process.Pid)
	if err != nil {
		return e, err
	}
	e.note("caddy-posts", e.large.run, rss, "./caddy, with all its sites: this store, the small one (seeded next), the one of the writes, and respond")
	if e.smallStore, err = e.seedCaddy(ctx, e.small, smallPosts); err != nil {
		return e, err
	}
	if cfg.only.MatchString(searchCopiesRow) {
		if err := e.startSearchCopies(ctx); err != nil {
			return e, fmt.Errorf("the copies of row %s: %w", searchCopiesRow, err)
		}
	}
	for _, s := range []struct {
		name, base string
		newest     []created
	}{{"large", e.read, e.large.newest}, {"small", e.small, e.smallStore.newest}} {
		// Page 50 starts after the 980th post.
		last := s.newest[49*pageSize-1]
		e.pages[s.name+" first"] = s.base + "/posts?limit=" + strconv.Itoa(pageSize)
		e.pages[s.name+" page 50"] = e.pages[s.name+" first"] + "&after=" + posts.Cursor(posts.Post{ID: last.ID, CreatedAt: last.CreatedAt})
		e.page50First[s.name] = s.newest[49*pageSize].ID
	}

	if withPeer {
		if err := e.startPocketBase(ctx, cfg.pocketBase); err != nil {
			return e, fmt.Errorf("PocketBase: %w", err)
		}
	}
	if withGQLGen {
		if err := e.startGQLGen(ctx, cfg.gqlgen); err != nil {
			return e, fmt.Errorf("the gqlgen server: %w", err)
		}
	}
	if withTracing {
		if err := e.startTracing(ctx); err != nil {
			return e, fmt.Errorf("the T rows: %w", err)
		}
	}
	return e, e.check(ctx)
}

// startFresh starts only what the pairs whose every side starts a fresh server of its own
// need (the WebSocket and stream pairs): the identity provider, and what Caddy's config reads.
// No store is seeded, no server is left running.
func startFresh(cfg config, dir string) (e *env, err error) {
	e = &env{caddyBin: cfg.caddy, caddyfile: cfg.caddyfile, dir: dir, conc: cfg.conc, apiKey: "bench-" + rand.Text()}
	if err := e.startIDP(); err != nil {
		e.close()
		return e, err
	}
	// The respond route answers a typical post (a body of the median length), in the bytes
	// GET /posts/{id} would; they are known before Caddy starts, for its config.
	t := time.Now().UTC().Truncate(time.Millisecond)
	ps := seedPosts(seedUsers)
	p := ps[len(ps)/2]
	if e.postJSON, err = bare.EncodePost(bare.Post{ID: store.NewID(t), UserID: p.user, Title: p.title, Body: &p.body, CreatedAt: t, UpdatedAt: t}); err != nil {
		e.close()
		return e, err
	}
	return e, nil
}

// note records for RESULTS.md the seeding of a store of largePosts posts through a server's
// API, and the server's resident memory right after it.
func (e *env) note(server string, run result, rss int64, what string) {
	line := fmt.Sprintf("%s: %s posts seeded through its API (POST, %d connections, closed loop) at %.0f posts/s (%.0fs), p50 %.2f ms; "+
		"resident memory (VmRSS) right after: %.0f MiB (%s)",
		server, thousands(largePosts), e.conc, run.throughput(), run.seconds, run.quantile(0.5)*1e3, float64(rss)/(1<<20), what)
	log.Print(line)
	e.notes = append(e.notes, line)
}

// startIDP serves a JWKS with one RSA key and signs an RS256 token for each user of the
// seeding; every bearer request of a user reuses its token.
func (e *env) startIDP() error {
	const kid = "bench-rs256"
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	jwk, err := jwkset.NewJWKFromKey(&key.PublicKey, jwkset.JWKOptions{
		Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: jwkset.AlgRS256, USE: jwkset.UseSig},
	})
	if err != nil {
		return err
	}
	set, err := json.Marshal(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{jwk.Marshal()}})
	if err != nil {
		return err
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(set)
	}))
	e.closers = append(e.closers, srv.Close)
	e.jwksURL = srv.URL
	e.tokens = map[string]string{}
	now := time.Now()
	for _, p := range seedPosts(seedUsers) {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"sub": p.user, "iat": now.Unix(), "exp": now.Add(3 * time.Hour).Unix()})
		tok.Header["kid"] = kid
		if e.tokens[p.user], err = tok.SignedString(key); err != nil {
			return err
		}
	}
	return nil
}

// caddyProcess is one Caddy running the bench Caddyfile, with its files in dir.
type caddyProcess struct {
	sites map[string]string // its sites and admin endpoint (http://127.0.0.1:port) by the name of their port variable
	// upstreams are the addresses (127.0.0.1:port) its reverse_proxy sites forward to, by the
	// name of their variable, for the servers that the harness starts there after Caddy.
	upstreams map[string]string
	dir       string
	proc      *process
}

func (p *caddyProcess) stop() { p.proc.stop() }

// startCaddy starts Caddy with its files in dir, a new directory, and waits until it serves
// writes.
func (e *env) startCaddy(ctx context.Context, dir string) (*caddyProcess, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	names := []string{"READ", "WRITE", "SMALL", "RESPOND", "ADMIN", "UNCACHED", "STREAM", "PROXY_BARE", "PROXY_GQLGEN"}
	upstreams := []string{"BARE", "GQLGEN"}
	addrs, err := freeAddrs(len(names) + len(upstreams))
	if err != nil {
		return nil, err
	}
	// Caddy reads these for its data and config folders: keep whatever it writes in dir.
	home := filepath.Join(dir, "home")
	vars := []string{
		"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"XDG_CACHE_HOME=" + filepath.Join(home, "cache"),
		"BENCH_DIR=" + dir, "BENCH_JWKS_URL=" + e.jwksURL, "BENCH_API_KEY=" + e.apiKey, "BENCH_POST_JSON=" + string(e.postJSON),
	}
	p := &caddyProcess{sites: map[string]string{}, upstreams: map[string]string{}, dir: dir}
	for i, name := range names {
		_, port, _ := strings.Cut(addrs[i], ":")
		vars = append(vars, fmt.Sprintf("BENCH_%s_PORT=%s", name, port))
		p.sites[name] = "http://" + addrs[i]
	}
	for i, name := range upstreams {
		addr := addrs[len(names)+i]
		vars = append(vars, fmt.Sprintf("BENCH_%s_UPSTREAM=%s", name, addr))
		p.upstreams[name] = addr
	}
	if p.proc, err = spawn(e.caddyBin, []string{"run", "--config", e.caddyfile, "--adapter", "caddyfile"}, vars, filepath.Join(dir, "caddy.log")); err != nil {
		return nil, err
	}
	if err := p.waitForWrite(ctx, e.tokens[author]); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// waitForWrite makes one POST /posts with the bearer token, which fetches the JWKS and checks
// the token and the store, retrying while Caddy starts, and not once it has exited; then it
// deletes the post, so the store has only what the benchmarks put there.
func (p *caddyProcess) waitForWrite(ctx context.Context, token string) error {
	bearer := "Authorization: Bearer " + token
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, body, err := do(ctx, "POST", p.sites["READ"]+"/posts", `{"title": "the first post"}`, bearer)
		if p.proc.exited() {
			deadline = time.Time{}
		}
		switch {
		case err == nil && status == http.StatusCreated:
			var post struct{ ID string }
			if err := json.Unmarshal(body, &post); err != nil {
				return err
			}
			status, body, err = do(ctx, "DELETE", p.sites["READ"]+"/posts/"+post.ID, "", bearer)
			if err == nil && status != http.StatusNoContent {
				err = fmt.Errorf("DELETE /posts/%s: %d %s", post.ID, status, body)
			}
			return err
		case err == nil && status != http.StatusServiceUnavailable, time.Now().After(deadline):
			return p.proc.failure(fmt.Errorf("the first POST /posts: status %d, %s, %v", status, body, err))
		case ctx.Err() != nil:
			return ctx.Err()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startBare serves bench/bare in a process of its own on the file of Caddy's site (its
// data_dir is named as the site in Caddyfile.bench), as mode says (bareArg, bareEventsArg), on
// addr ("": a free address).
func (e *env) startBare(ctx context.Context, mode, site, addr string) (baseline, error) {
	return e.serveBare(ctx, mode, filepath.Join(e.caddy.dir, site, sqlite.DatabaseFile), addr)
}

// serveBare serves bench/bare on the SQLite file as startBare does.
func (e *env) serveBare(ctx context.Context, mode, file, addr string) (baseline, error) {
	addrs, err := freeAddrs(2)
	if err != nil {
		return baseline{}, err
	}
	if addr != "" {
		addrs[0] = addr
	}
	p, err := serveChild(ctx, addrs[0], []string{"BENCH_API_KEY=" + e.apiKey}, mode, file, addrs[0], addrs[1])
	if err != nil {
		return baseline{}, err
	}
	e.closers = append(e.closers, p.stop)
	return baseline{url: "http://" + addrs[0], profile: "http://" + addrs[1] + "/debug/pprof", file: file}, nil
}

// created is a post as a server answered its POST.
type created struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"createdAt"` // caddy-posts only
	Created   string    `json:"created"`   // PocketBase only: "2006-01-02 15:04:05.000Z", whose order is its text's
}

// postAll POSTs the posts to url at conc connections, closed loop, each with the body and the
// headers that build makes of it, and returns the answers, in the order of ps, and the run.
func postAll(ctx context.Context, conc int, url string, ps []seedPost, status int, build func(seedPost) (string, []string)) ([]created, result, error) {
	out := make([]created, len(ps))
	run, err := drive(ctx, conc, 0, len(ps), 0, func(ctx context.Context, c *http.Client, i int) error {
		body, headers := build(ps[i])
		res, answer, err := send(ctx, c, "POST", url, body, headers)
		if err == nil && res.StatusCode != status {
			err = fmt.Errorf("POST %s: %d %.200s; want %d", url, res.StatusCode, answer, status)
		}
		if err == nil {
			err = json.Unmarshal(answer, &out[i])
		}
		return err
	})
	return out, run, err
}

// newPostJSON is the body of a POST that creates a post: userId for PocketBase only, whose
// posts are anyone's to create; caddy-posts takes the author from the credentials.
type newPostJSON struct {
	UserID string `json:"userId,omitempty"`
	Title  string `json:"title"`
	Body   string `json:"body"`
}

// seedCaddy seeds the store of the site at base with n posts through POST /posts, each user's
// with the user's bearer token.
func (e *env) seedCaddy(ctx context.Context, base string, n int) (seeded, error) {
	ps := seedPosts(n)
	out, run, err := postAll(ctx, e.conc, base+"/posts", ps, http.StatusCreated, func(p seedPost) (string, []string) {
		body, _ := json.Marshal(newPostJSON{Title: p.title, Body: p.body})
		return string(body), []string{"Authorization: Bearer " + e.tokens[p.user]}
	})
	if err != nil {
		return seeded{}, fmt.Errorf("seeding %s: %w", base, err)
	}
	s := seededFrom(ps, out, run)
	s.newest = slices.SortedFunc(slices.Values(out), func(a, b created) int {
		return -cmpKeys(store.Key{CreatedAt: a.CreatedAt, ID: a.ID}, store.Key{CreatedAt: b.CreatedAt, ID: b.ID})
	})
	log.Printf("%d posts seeded through %s/posts in %.1fs (%.0f posts/s)", n, base, run.seconds, run.throughput())
	return s, nil
}

// cmpKeys orders two places of the list order, oldest first.
func cmpKeys(a, b store.Key) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

func seededFrom(ps []seedPost, out []created, run result) seeded {
	s := seeded{run: run}
	for i, c := range out {
		s.ids = append(s.ids, c.ID)
		if ps[i].user == author {
			s.authors = append(s.authors, c.ID)
		} else {
			s.others = append(s.others, c.ID)
		}
	}
	return s
}

// random makes each run read the ids in a new random order.
func random(ids []string) func(context.Context, int) ([]string, error) {
	return func(context.Context, int) ([]string, error) {
		s := slices.Clone(ids)
		mrand.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		return s, nil
	}
}

// one makes every request of a run read the i-th of ids.
func one(ids []string, i int) func(context.Context, int) ([]string, error) {
	return func(context.Context, int) ([]string, error) { return ids[i : i+1], nil }
}

// madeBy makes, before each run, one post of user through the API of the site at base, with
// the user's bearer token, for every request of the run.
func (e *env) madeBy(base, user string) func(context.Context, int) ([]string, error) {
	return func(ctx context.Context, _ int) ([]string, error) {
		body, _ := json.Marshal(newPostJSON{Title: "to patch", Body: "lorem ipsum"})
		status, answer, err := do(ctx, "POST", base+"/posts", string(body), "Authorization: Bearer "+e.tokens[user])
		var c created
		if err == nil && status != http.StatusCreated {
			err = fmt.Errorf("POST %s/posts as %s: %d %.200s", base, user, status, answer)
		}
		if err == nil {
			err = json.Unmarshal(answer, &c)
		}
		return []string{c.ID}, err
	}
}

// fresh makes, before each run, as many posts of the author as the run has requests, through
// the API of the site at base, so a run deletes each once.
func (e *env) fresh(base string) func(context.Context, int) ([]string, error) {
	return func(ctx context.Context, n int) ([]string, error) {
		if n == 0 {
			return nil, fmt.Errorf("a run that deletes posts needs a number of requests")
		}
		out, _, err := postAll(ctx, e.conc, base+"/posts", slices.Repeat([]seedPost{{title: "to delete", body: "lorem ipsum"}}, n),
			http.StatusCreated, func(p seedPost) (string, []string) {
				body, _ := json.Marshal(newPostJSON{Title: p.title, Body: p.body})
				return string(body), []string{"Authorization: ApiKey " + e.apiKey}
			})
		ids := make([]string, len(out))
		for i, c := range out {
			ids[i] = c.ID
		}
		return ids, err
	}
}

// check fails unless every side answers what its pair compares: the same bytes from the module,
// the baseline and Caddy's reverse_proxy to it for the same posts and pages (and, with the gqlgen
// server, the same JSON from it for the same queries), and a full page for the lists.
func (e *env) check(ctx context.Context) error {
	status, body, err := do(ctx, "GET", e.respond+"/posts/any", "")
	if err != nil || status != http.StatusOK || !bytes.Equal(body, e.postJSON) {
		return fmt.Errorf("GET %s/posts/any: %d %q, %v; want 200 %q", e.respond, status, body, err, e.postJSON)
	}
	same := func(path string) error {
		var answers [3]string
		for i, base := range []string{e.read, e.bareRead.url, e.proxyBare} {
			res, body, err := send(ctx, http.DefaultClient, "GET", base+path, "", nil)
			if err != nil || res.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s%s: %.200s, %v", base, path, body, err)
			}
			answers[i] = res.Header.Get("Link") + "\n" + string(body)
		}
		for i, name := range []string{"the baseline", "Caddy's reverse_proxy to it"} {
			if answers[0] != answers[i+1] {
				return fmt.Errorf("GET %s: the module and %s differ:\n%.500s\n%.500s", path, name, answers[0], answers[i+1])
			}
		}
		return nil
	}
	for _, id := range e.large.ids[:5] {
		if err := same("/posts/" + id); err != nil {
			return err
		}
	}
	_, page50, _ := strings.Cut(e.pages["large page 50"], e.read)
	for _, path := range []string{"/posts?limit=20", "/posts?userId=" + listUser + "&limit=10", page50} {
		if err := same(path); err != nil {
			return err
		}
	}
	for _, q := range []struct {
		query, id string
		ok        func(body []byte) bool
	}{
		{postQuery, e.large.ids[0], func(b []byte) bool { return bytes.Contains(b, []byte(`"id":"`+e.large.ids[0]+`"`)) }},
		{userPostsQuery, listUser, func(b []byte) bool { return bytes.Count(b, []byte(`"createdAt"`)) == 10 }},
	} {
		req, _ := json.Marshal(map[string]any{"query": q.query, "variables": map[string]string{"id": q.id}})
		status, body, err := do(ctx, "POST", e.read+"/graphql", string(req))
		if err != nil || status != http.StatusOK || bytes.Contains(body, []byte(`"errors"`)) || !q.ok(body) {
			return fmt.Errorf("POST /graphql %s: %d %s, %v", q.query, status, body, err)
		}
	}
	// Pair 5p's persisted query, registered with its text (Apollo's second request), then run
	// by its hash alone; and pair 5u's site, which answers post(id) as the other does.
	for _, gql := range []struct{ url, body string }{
		{e.read, persistedPost(true)}, {e.read, persistedPost(false)}, {e.uncached, graphQLBody(postQuery, map[string]string{"id": "{id}"})},
	} {
		id := e.large.ids[1]
		status, body, err := do(ctx, "POST", gql.url+"/graphql", strings.ReplaceAll(gql.body, "{id}", id))
		if err != nil || status != http.StatusOK || !bytes.Contains(body, []byte(`{"data":{"post":{"id":"`+id+`"`)) {
			return fmt.Errorf("POST %s/graphql %s: %d %s, %v", gql.url, gql.body, status, body, err)
		}
	}
	for _, name := range []string{"small", "large"} {
		for _, page := range []string{e.pages[name+" first"], e.pages[name+" page 50"]} {
			status, body, err := do(ctx, "GET", page, "")
			var got []struct{ ID string }
			if err == nil {
				err = json.Unmarshal(body, &got)
			}
			if err != nil || status != http.StatusOK || len(got) != pageSize {
				return fmt.Errorf("GET %s: %d %.200s, %v; want %d posts", page, status, body, err, pageSize)
			}
			if page == e.pages[name+" page 50"] && got[0].ID != e.page50First[name] {
				return fmt.Errorf("GET %s: page 50 starts with %s; want %s", page, got[0].ID, e.page50First[name])
			}
		}
	}
	for _, base := range []string{e.write, e.bareWrite.url, e.bareWriteEvents.url} {
		status, body, err := do(ctx, "POST", base+"/posts", `{"title": "check"}`, "Authorization: ApiKey "+e.apiKey)
		if err != nil || status != http.StatusCreated {
			return fmt.Errorf("POST %s/posts: %d %s, %v; want 201", base, status, body, err)
		}
	}
	if e.pb != "" {
		if err := e.checkPocketBase(ctx); err != nil {
			return err
		}
	}
	if err := e.checkSearch(ctx); err != nil {
		return err
	}
	if e.copies.indexed != "" {
		if err := e.checkSearchCopies(ctx); err != nil {
			return err
		}
	}
	if e.gqlgen != "" {
		return e.checkGQLGen(ctx)
	}
	return nil
}

// do makes one request, within 10s, and reads its answer.
func do(ctx context.Context, method, url, body string, headers ...string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, answer, err := send(ctx, http.DefaultClient, method, url, body, headers)
	if err != nil {
		return 0, nil, err
	}
	return res.StatusCode, answer, nil
}

// close stops everything start started, the last first.
func (e *env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
	e.closers = nil
}
