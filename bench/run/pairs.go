package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/postsedge/caddy-posts/bench/wsload"
)

// A pair is one line of the table: a metric of side a against the same metric of side b,
// measured in alternating runs of the load tool.
type pair struct {
	id     string // the target number; "i" for a line given as information
	what   string
	a, b   side
	metric metric
	diff   bool   // compare as a − b, in the metric's unit; otherwise a ÷ b
	target string // for the table, e.g. "≥ 0.90"; "" for information
	met    func(float64) bool
	// rate, when set, gives the total requests per second of every run (each worker paced at
	// its share); otherwise each run is closed loop at the harness's concurrency.
	rate func() float64
	// conc, when set, is the concurrency of every run, instead of the harness's; requests,
	// when set, is the number of requests of a run, instead of its duration.
	conc, requests int
	// settle, when set, runs before each run of a side, and waits until its servers are idle.
	settle func(context.Context) error
	// of, when set, is the pair whose runs this one reads with its own metric, instead of
	// running its own: those of its sides named as this one's a and b.
	of *pair
	// also are sides run in each round besides a and b, for the pairs that read this one's
	// runs (of): the sides of several pairs measured side by side.
	also []side
	// wsRun, when set, is the run of each of its WebSocket sides instead of fanOut's: on a
	// server that start starts, with subscribers and events of its own.
	wsRun func(ctx context.Context, start func(context.Context) (*wsServer, error), profile string) (result, error)

	out outcome
}

// side is one of the two things a pair compares: requests of the load generator, or, for a
// WebSocket or stream side, the fan-out of fanOut on fresh servers that ws starts, to the
// subscribers open opens (nil: WebSocket connections).
type side struct {
	name    string
	req     request
	profile string // the /debug/pprof of the process that serves req, for -profile; "" for none
	ws      func(context.Context) (*wsServer, error)
	open    opener
}

// fresh says whether each side of p starts a server of its own for each run, so that p needs
// no seeded store.
func (p *pair) fresh() bool { return p.a.ws != nil && p.b.ws != nil }

// metric is what a run is reduced to.
type metric struct {
	name string
	unit string
	of   func(result) float64 // in unit
}

var (
	throughput = metric{"throughput", "req/s", result.throughput}
	p50        = metric{"p50", "ms", func(r result) float64 { return r.quantile(0.50) * 1e3 }}
	p99        = metric{"p99", "ms", func(r result) float64 { return r.quantile(0.99) * 1e3 }}
	memory     = metric{"RSS", "KiB/conn", func(r result) float64 { return r.perConn / 1024 }}
	cpu        = metric{"CPU", "µs/event", func(r result) float64 { return r.cpuPerEvent * 1e6 }}
)

func atLeast(t float64) func(float64) bool { return func(v float64) bool { return v >= t } }
func atMost(t float64) func(float64) bool  { return func(v float64) bool { return v <= t } }

// bounded is p with a target of at most t.
func bounded(p *pair, t float64) *pair {
	p.target, p.met = fmt.Sprintf("≤ %.1f", t), atMost(t)
	return p
}

// outcome is what the rounds of a pair measured: the runs of each side (by its name, a pair's
// also sides too), their metric and the comparisons.
type outcome struct {
	runs      map[string][]result
	a, b, cmp []float64
}

// record adds one round's runs of the two sides, and logs them.
func (p *pair) record(ra, rb result) {
	a, b := p.metric.of(ra), p.metric.of(rb)
	cmp := a / b
	if p.diff {
		cmp = a - b
	}
	o := &p.out
	p.keep(p.a.name, ra)
	p.keep(p.b.name, rb)
	o.a, o.b, o.cmp = append(o.a, a), append(o.b, b), append(o.cmp, cmp)
	log.Printf("pair %s round %d: %s %s, %s %s: %s", p.id, len(o.cmp), p.a.name, p.metric.format(a), p.b.name, p.metric.format(b), p.formatCmp(cmp))
}

// keep adds a run of the side named name to the runs of p.
func (p *pair) keep(name string, r result) {
	if p.out.runs == nil {
		p.out.runs = map[string][]result{}
	}
	p.out.runs[name] = append(p.out.runs[name], r)
}

// median is the median of v; NaN for none.
func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// The requests of a run of the paging pairs (7), which one client sends one after the other:
// enough for a stable median of latencies of a fraction of a millisecond.
const (
	readRequests  = 2000
	writeRequests = 500
)

// missingPost is the id of a post that no store has: a valid id, of the Unix epoch.
const missingPost = "000000000000000000000000"

// hotPost is the index among the seeded posts of the one that row Ph reads again and again: by
// a user whom no pair writes as, with a body of the median length, as the respond route's.
const hotPost = seedUsers / 2

// patchRequests are the requests of a run of the conditional-write pair (17b), each the PATCH
// of a post made for it, at the harness's connections: about a second of PATCHes.
const patchRequests = 10000

// peerPairs are the ids of the pairs against PocketBase, which is built, served and seeded only
// when one of them runs.
var peerPairs = []string{"Pa", "Ph", "Pb", "Pc", "39f"}

// gqlgenPairs are the ids of the pairs against the gqlgen server (bench/gqlbare), which is built
// and served only when one of them runs.
var gqlgenPairs = []string{"G", "Gu", "Rg"}

// pairs are the lines of the table, in the order they run. To add one, append it here.
func pairs(e *env) []*pair {
	// Reads of GET /posts/{id} take random ids among all the posts seeded in the store, or,
	// hot, the post hotPost of them every time.
	get := func(base string, ids []string) request {
		return request{url: base + "/{id}", ids: random(ids), status: 200}
	}
	hot := func(base string, ids []string) request {
		return request{url: base + "/{id}", ids: one(ids, hotPost), status: 200}
	}
	anonymous := get(e.read+"/posts", e.large.ids)
	bearer := anonymous
	bearer.headers = []string{"Authorization: Bearer " + e.tokens[author]}
	apiKey := "Authorization: ApiKey " + e.apiKey
	post := func(base string) request {
		return request{method: "POST", url: base + "/posts", body: createBody(""), headers: []string{apiKey}, status: 201}
	}
	graphQL := func(query string, variables map[string]string) request {
		return request{method: "POST", url: e.read + "/graphql", body: graphQLBody(query, variables), status: 200}
	}
	postByID := graphQL(postQuery, map[string]string{"id": "{id}"})
	postByID.ids = anonymous.ids
	// The G and R rows' GraphQL reads, the same request to the module, to the gqlgen server
	// directly and through Caddy's reverse_proxy to it; every answer must have the data, where
	// an error would be a 200 too.
	gqlPost := func(url string) request {
		r := postByID
		r.url, r.want = url, `{"data":{"post":{"id":"`
		return r
	}
	gqlUserPosts := func(url string) request {
		r := graphQL(userPostsQuery, map[string]string{"id": listUser})
		r.url, r.want = url, `{"data":{"user":{"posts":[{"title":"`
		return r
	}
	gqlgen := func(req request) side { return side{name: "gqlgen", req: req, profile: e.gqlgenProfile} }
	// By its hash alone, registered by env's check: every answer must be the post, not
	// PersistedQueryNotFound, which is a 200 too.
	postByHash := postByID
	postByHash.body, postByHash.want = persistedPost(false), `{"data":{"post":{"id":"`
	uncached := postByID
	uncached.url = e.uncached + "/graphql"
	list := "/posts?" + url.Values{"userId": {listUser}, "limit": {"10"}}.Encode()
	newest := "/posts?limit=" + strconv.Itoa(pageSize)

	caddy := func(name string, req request) side { return side{name: name, req: req, profile: e.caddyProfile} }
	// caddyIdle waits until Caddy has done its merges of the search's index, before each run of
	// the rows that search it or write the large store: so that no run pays for the merges of
	// the seeding or of the other side's writes.
	caddyIdle := func(ctx context.Context) error { return e.caddy.proc.idle(ctx, 5*time.Minute) }
	idle := func(p *pair) *pair { p.settle = caddyIdle; return p }
	module := caddy("module", anonymous)
	bare := side{name: "bare", req: get(e.bareRead.url+"/posts", e.large.ids), profile: e.bareRead.profile}
	bareWrite := side{name: "bare", req: post(e.bareWrite.url), profile: e.bareWrite.profile}
	bareWriteEvents := side{name: "bare+event", req: post(e.bareWriteEvents.url), profile: e.bareWriteEvents.profile}
	// Its rounds run the SSE sides of the S rows too, which compare them with its two.
	sseH1, sseH2 := streamSides(e)
	p8 := &pair{id: "8", what: "idle subscribed WebSocket connections at 10,000: resident memory per connection, module ÷ ws-bare",
		a: side{name: "module", ws: e.moduleWS}, b: side{name: "ws-bare", ws: bareWS}, also: []side{sseH1, sseH2},
		metric: memory, target: "≤ 1.25", met: atMost(1.25)}
	// Row 1 is information: the module costs what bare does plus Caddy's fixed layers per
	// request, which no handler can remove; row i holds it to Caddy's own ceiling instead.
	p1 := &pair{id: "1", what: "`GET /posts/{id}` throughput, module ÷ bare", a: module, b: bare,
		metric: throughput}
	// The paging pairs: the same request of one client on the store of largePosts posts and on
	// the one of smallPosts.
	scaling := func(id, what string, n int, large, small request) *pair {
		return &pair{id: id, what: fmt.Sprintf("%s, %s ÷ %s posts, p50 of one client (%s requests a run)", what, thousands(largePosts), thousands(smallPosts), thousands(n)),
			a: caddy(thousands(largePosts), large), b: caddy(thousands(smallPosts), small),
			conc: 1, requests: n, metric: p50, target: "≤ 1.3", met: atMost(1.3)}
	}
	page := func(name string) request { return request{url: e.pages[name], status: 200} }
	// A search's first page of 20; each answer holds its first word, or is empty.
	searched := func(base string, s search) request {
		want := strings.Fields(s.q)[0]
		if s.count(smallPosts) == 0 {
			want = "[]"
		}
		return request{url: base + s.path(strconv.Itoa(pageSize)), status: 200, want: want}
	}
	patch := func(base string, ids []string) request {
		return request{method: "PATCH", url: base + "/posts/{id}", body: `{"title": "post patched"}`, headers: []string{apiKey}, ids: random(ids), status: 200}
	}
	del := func(base string) request {
		return request{method: "DELETE", url: base + "/posts/{id}", headers: []string{apiKey}, ids: e.fresh(base), status: 204}
	}
	// refusedAmong is req with every tenth request a PATCH of a post that is not there, on the
	// site of the writes: refused, 404.
	refusedAmong := func(req request) request {
		req.every, req.instead = 10, &request{method: "PATCH", url: e.write + "/posts/" + missingPost, body: `{"title": "not there"}`,
			headers: []string{apiKey}, status: 404}
		return req
	}
	// patchedAmong is req with every tenth request a PATCH of a post of user made for the run, on
	// the site of the writes, with the author's API key: the author's own (200), or another
	// user's, refused (403).
	patchedAmong := func(req request, user string, status int) request {
		req.every, req.instead = 10, &request{method: "PATCH", url: e.write + "/posts/{id}", body: `{"title": "post patched"}`,
			headers: []string{apiKey}, ids: e.madeBy(e.write, user), status: status}
		return req
	}
	// The posts of users other than the author, which no pair writes: all at version 1, ETag "1".
	byOthers := func(header ...string) request {
		status := 200
		if len(header) > 0 {
			status = 304
		}
		return request{url: e.read + "/posts/{id}", ids: random(e.large.others), headers: header, status: status}
	}
	// The PATCH of a post made for the run, with or without an If-Match of its ETag.
	patchFresh := func(header ...string) request {
		return request{method: "PATCH", url: e.write + "/posts/{id}", body: `{"title": "post patched"}`,
			headers: append([]string{apiKey}, header...), ids: e.fresh(e.write), status: 200}
	}
	// The deployment a user would otherwise run: a server of their own on the same file, behind
	// Caddy's reverse_proxy. The profile is Caddy's, the proxy's side of the work.
	proxied := func(name string, req request) side { return side{name: name, req: req, profile: e.caddyProfile} }
	pocketBase := func(req request) side { return side{name: "PocketBase", req: req, profile: e.pbProfile} }
	peer := func(what string) string {
		return fmt.Sprintf("%s throughput, caddy-posts ÷ PocketBase, %s posts each", what, thousands(largePosts))
	}
	rows := []*pair{
		p1,
		{id: "2", what: "`GET /posts/{id}` p50 at half the bare maximum, module − bare", a: module, b: bare,
			metric: p50, diff: true, target: "≤ 0.3 ms", met: atMost(0.3),
			rate: func() float64 { return median(p1.out.b) / 2 }},
		{id: "3", what: "`GET /posts/{id}` throughput, RS256 bearer (reused) ÷ anonymous",
			a: caddy("bearer", bearer), b: caddy("anonymous", anonymous),
			metric: throughput, target: "≥ 0.97", met: atLeast(0.97)},
		{id: "4", what: "`POST /posts` throughput, module (the post and its event, in one transaction) ÷ bare insert (the post alone)",
			a: caddy("module", post(e.write)), b: bareWrite,
			metric: throughput, target: "≥ 0.85", met: atLeast(0.85)},
		// Row 4 with a tenth of the writes failing, each on its own: a PATCH of a post that
		// is not there, whose UPDATE fails in the transaction it shares with creates
		// (store/sqlite/commit.go), as one of another user's post does (row 4x). Every write
		// answered counts.
		{id: "4f", what: "`POST /posts` throughput with 1 write in 10 a `PATCH` of a post that is not there (404), writes answered, module ÷ bare insert (row 4's, the post alone)",
			a: caddy("module", refusedAmong(post(e.write))), b: bareWrite,
			metric: throughput, target: "≥ 0.85", met: atLeast(0.85)},
		// What failing writes cost the others: row 4f's mix with the tenth write a PATCH of
		// another user's post, refused in the transaction it shares (store/sqlite/commit.go's
		// savepoints), ÷ the same mix with that PATCH of the author's own post. Every write
		// answered counts.
		{id: "4x", what: "`POST /posts` throughput with 1 write in 10 a `PATCH` of another user's post (403) ÷ with that `PATCH` of one's own post (200, all succeeding), writes answered, both on the module",
			a: caddy("1 in 10 refused", patchedAmong(post(e.write), listUser, 403)), b: caddy("all succeeding", patchedAmong(post(e.write), author, 200)),
			metric: throughput, target: "≥ 0.85", met: atLeast(0.85)},
		// Row 4 with the same work on both sides: bare writes the event too, one transaction a
		// request as a user would write it (the module's store shares a transaction among the
		// writes that wait for the writer, store/sqlite/commit.go).
		{id: "4e", what: "`POST /posts` throughput, module ÷ bare inserting the post and its event in one transaction a request (row 4 with the event on both sides; the module's writes that wait for the writer share a transaction)",
			a: caddy("module", post(e.write)), b: bareWriteEvents,
			metric: throughput},
		// What the log costs a server that writes it the plain way: the same bare, with and
		// without the event row. The module cannot run without its log.
		{id: "4l", what: "`POST /posts` throughput with the event log ÷ without it: bench/bare inserting the post and its event in one transaction a request ÷ the post alone (the module cannot run without its log)",
			a: bareWriteEvents, b: bareWrite,
			metric: throughput},
		{id: "5", what: "`post(id)` throughput, GraphQL (the query's text, its document prepared once and cached) ÷ REST `GET /posts/{id}`",
			a: caddy("graphql", postByID), b: caddy("rest", anonymous),
			metric: throughput, target: "≥ 0.90", met: atLeast(0.90)},
		{id: "5p", what: "`post(id)` throughput, GraphQL by its automatic persisted query's hash alone ÷ REST `GET /posts/{id}`",
			a: caddy("graphql-apq", postByHash), b: caddy("rest", anonymous),
			metric: throughput, target: "≥ 0.90", met: atLeast(0.90)},
		{id: "5u", what: "`post(id)` throughput, GraphQL parsed and checked every time (a site whose document cache keeps nothing) ÷ REST `GET /posts/{id}`",
			a: caddy("graphql-uncached", uncached), b: caddy("rest", anonymous),
			metric: throughput, target: "≥ 0.60", met: atLeast(0.60)},
		{id: "6", what: "`user(id){posts(limit:10){title createdAt}}` p99, GraphQL ÷ REST `GET /posts?userId=&limit=10`",
			a:      caddy("graphql", graphQL(userPostsQuery, map[string]string{"id": listUser})),
			b:      caddy("rest", request{url: e.read + list, status: 200}),
			metric: p99, target: "≤ 1.3", met: atMost(1.3)},
		scaling("7a", "`GET /posts?limit=20`, first page", readRequests, page("large first"), page("small first")),
		scaling("7b", "`GET /posts?limit=20&after=…`, page 50", readRequests, page("large page 50"), page("small page 50")),
		scaling("7c", "`GET /posts?userId=…&limit=20`", readRequests,
			request{url: e.read + newest + "&userId=" + listUser, status: 200}, request{url: e.small + newest + "&userId=" + listUser, status: 200}),
		idle(scaling("7d", "`PATCH /posts/{id}` of one's own post (random)", writeRequests,
			patch(e.read, e.large.authors), patch(e.small, e.smallStore.authors))),
		scaling("7e", "`DELETE /posts/{id}` of one's own post", writeRequests, del(e.read), del(e.small)),
		// Issue 39's search, on the posts whose words searchWords gives (checked before the rows
		// by checkSearch); before row Pc, whose creates would put posts without them first.
		idle(bounded(scaling("39a", fmt.Sprintf("`GET /posts?q=%s&limit=20` (a word in 1%% of the posts), first page", wordRare), readRequests,
			searched(e.read, searchRare), searched(e.small, searchRare)), 1.5)),
		{id: "39b", settle: caddyIdle, what: fmt.Sprintf("`GET /posts?q=%s&limit=20` (a word in no post: an empty page) ÷ `GET /posts/{id}` (random), p50 at %s posts, one client (%s requests a run)",
			wordNone, thousands(largePosts), thousands(readRequests)),
			a: caddy("no-match", searched(e.read, searchNone)), b: caddy("get", anonymous),
			conc: 1, requests: readRequests, metric: p50, target: "≤ 2.0", met: atMost(2.0)},
		idle(bounded(scaling("39c", fmt.Sprintf("`GET /posts?q=%s+%s&limit=20` (two words in 10%% of the posts each, independent: 1%% hold both), first page", wordTenA, wordTenB),
			readRequests, searched(e.read, searchTwo), searched(e.small, searchTwo)), 2.0)),
		idle(bounded(scaling("39d", fmt.Sprintf("`GET /posts?q=%s&limit=20` (a prefix of 3 letters, of %s: one of them in 1%% of the posts), first page", wordPrefix, strings.Join(prefixWords, ", ")),
			readRequests, searched(e.read, searchPrefix), searched(e.small, searchPrefix)), 1.5)),
		// What the search index costs the module's writes: the same build on two copies of the
		// large store's file, one without the triggers that write the index.
		{id: searchCopiesRow, what: fmt.Sprintf("`POST /posts` throughput with the search index ÷ without it: the module on a copy of the %s posts' file, "+
			"whose triggers of migration 9 write each post's row of the index (post_rows, and post_words at the transaction's end), ÷ the module on another copy with those three triggers dropped, "+
			"both served by one ./caddy (bench/Caddyfile.search) that has done its idle merges of the index before each run", thousands(largePosts)),
			a:      side{name: "module+index", req: post(e.copies.indexed), profile: e.copies.profile},
			b:      side{name: "module", req: post(e.copies.unindexed), profile: e.copies.profile},
			settle: e.copies.settled,
			metric: throughput, target: "≥ 0.85", met: atLeast(0.85)},
		{id: "39f", settle: caddyIdle, what: fmt.Sprintf("search throughput, caddy-posts `GET /posts?q=%s&limit=20` ÷ PocketBase `filter=(title~'%s'||body~'%s')&perPage=20&sort=-created,-id&skipTotal=1`, "+
			"a word in 1%% of the posts, %s posts each", wordRare, wordRare, wordRare, thousands(largePosts)),
			a: caddy("caddy-posts", searched(e.read, searchRare)), b: pocketBase(request{url: e.pb + pbSearch(wordRare, false), status: 200, want: wordRare}),
			metric: throughput, target: "≥ 10", met: atLeast(10)},
		p8,
		{id: "9", what: "one event to 10,000 subscribers, all delivered: p99 time to the last, module ÷ ws-bare",
			a: p8.a, b: p8.b, of: p8, metric: p99, target: "≤ 1.0", met: atMost(1.0)},
		{id: "9c", what: fmt.Sprintf("%s subscribers on %d feeds (a user's posts each, `postCreated(userId:)` in the variables, %s subscribers a feed), a burst of %d posts a feed "+
			"(a writer a feed, each post once its feed has the last), all delivered: CPU time of the server (utime + stime) per event delivered, module (its writes too) ÷ ws-bare",
			thousands(feedSubscribers), feeds, thousands(feedSubscribers/feeds), feedEvents),
			a: p8.a, b: p8.b, metric: cpu,
			wsRun: func(ctx context.Context, start func(context.Context) (*wsServer, error), profile string) (result, error) {
				return feedBurst(ctx, start, wsload.Init(e.apiKey), profile)
			}},
		{id: "17a", what: "`GET /posts/{id}` throughput, with an `If-None-Match` of its ETag (304, no body) ÷ without (200)",
			a: caddy("304", byOthers(`If-None-Match: "1"`)), b: caddy("200", byOthers()),
			metric: throughput, target: "≥ 1.0", met: atLeast(1.0)},
		{id: "17b", what: fmt.Sprintf("`PATCH /posts/{id}` throughput, with an `If-Match` of its ETag ÷ without (each of the %s requests of a run on a post made for it)", thousands(patchRequests)),
			a: caddy("if-match", patchFresh(`If-Match: "1"`)), b: caddy("plain", patchFresh()),
			requests: patchRequests, metric: throughput, target: "≥ 0.90", met: atLeast(0.90)},
		{id: "i", what: "`GET /posts/{id}` throughput, module ÷ `respond` (the ceiling)", a: module,
			b:      caddy("respond", request{url: e.respond + "/posts/any", status: 200}),
			metric: throughput, target: "≥ 0.75", met: atLeast(0.75)},
		{id: "R", what: "`GET /posts/{id}` throughput, module ÷ Caddy `reverse_proxy` to bench/bare (net/http on the same SQLite file, row 1's baseline)",
			a: module, b: proxied("proxy-bare", get(e.proxyBare+"/posts", e.large.ids)),
			metric: throughput, target: "≥ 1.5", met: atLeast(1.5)},
		{id: gqlgenPairs[2], what: "`post(id)` throughput, GraphQL, module ÷ Caddy `reverse_proxy` to the gqlgen server (bench/gqlbare, on the same SQLite file, row G's)",
			a: caddy("module", gqlPost(e.read+"/graphql")), b: proxied("proxy-gqlgen", gqlPost(e.proxyGQLGen+"/graphql")),
			metric: throughput, target: "≥ 1.5", met: atLeast(1.5)},
		// Against PocketBase, on the same posts, under the same load.
		{id: peerPairs[0], what: peer("get by id (random)"),
			a: caddy("caddy-posts", anonymous), b: pocketBase(get(e.pb, e.pbStore.ids)),
			metric: throughput, target: "≥ 3.0", met: atLeast(3.0)},
		{id: peerPairs[1], what: peer("get by id (one hot post, the same every request)"),
			a: caddy("caddy-posts", hot(e.read+"/posts", e.large.ids)), b: pocketBase(hot(e.pb, e.pbStore.ids)),
			metric: throughput, target: "≥ 2.5", met: atLeast(2.5)},
		{id: peerPairs[2], what: peer("newest 20"),
			a: caddy("caddy-posts", request{url: e.read + newest, status: 200}), b: pocketBase(request{url: e.pb + pbNewest, status: 200}),
			metric: throughput, target: "≥ 1.0", met: atLeast(1.0)},
		{id: peerPairs[3], what: peer("create"),
			a:      caddy("caddy-posts", post(e.read)),
			b:      pocketBase(request{method: "POST", url: e.pb, body: createBody(author), status: 200}),
			metric: throughput, target: "≥ 2.5", met: atLeast(2.5)},
		// Against gqlgen (bench/gqlbare: gqlgen's handler with its default caches, the module's
		// SQLite file), the same query text and variables.
		{id: gqlgenPairs[0], what: "`post(id)` throughput, GraphQL, module ÷ gqlgen (bench/gqlbare: its cache of validated documents and APQ, on the same SQLite file)",
			a: caddy("module", gqlPost(e.read+"/graphql")), b: gqlgen(gqlPost(e.gqlgen)),
			metric: throughput, target: "≥ 1.0", met: atLeast(1.0)},
		{id: gqlgenPairs[1], what: "`user(id){posts(limit:10){title createdAt}}` throughput, GraphQL, module ÷ gqlgen (bench/gqlbare, the same file)",
			a: caddy("module", gqlUserPosts(e.read+"/graphql")), b: gqlgen(gqlUserPosts(e.gqlgen)),
			metric: throughput, target: "≥ 1.0", met: atLeast(1.0)},
	}
	// The stream rows follow the WebSocket rows whose baseline they share.
	after9 := slices.IndexFunc(rows, func(p *pair) bool { return p.id == "9" }) + 1
	return append(slices.Insert(rows, after9, streamPairs(p8, sseH1, sseH2)...), tracingRows(e)...)
}

// The GraphQL reads: post(id) with every field of the REST answer, and a user's latest posts.
const (
	postQuery      = `query($id: ID!) { post(id: $id) { id userId title body createdAt updatedAt } }`
	userPostsQuery = `query($id: ID!) { user(id: $id) { posts(limit: 10) { title createdAt } } }`
)

// graphQLBody is the JSON body of a POST /graphql.
func graphQLBody(query string, variables map[string]string) string {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": variables})
	return string(body)
}

// persistedPost is the body of post(id) {id} as an automatic persisted query: its hash alone,
// or (register) its text with the hash, as Apollo Client sends them.
func persistedPost(register bool) string {
	sum := sha256.Sum256([]byte(postQuery))
	body := map[string]any{"variables": map[string]string{"id": "{id}"},
		"extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hex.EncodeToString(sum[:])}}}
	if register {
		body["query"] = postQuery
	}
	data, _ := json.Marshal(body)
	return string(data)
}

// thousands writes n with thousands separators, as the table does: 200,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// format writes a value of the metric for the table.
func (m metric) format(v float64) string {
	switch m.unit {
	case "ms":
		if v < 1 {
			return fmt.Sprintf("%.3f ms", v)
		}
		return fmt.Sprintf("%.2f ms", v)
	case "KiB/conn", "µs/event":
		return fmt.Sprintf("%.1f %s", v, m.unit)
	}
	return fmt.Sprintf("%.0f %s", v, m.unit)
}

// formatCmp writes a comparison of the pair for the table.
func (p *pair) formatCmp(v float64) string {
	if p.diff {
		return fmt.Sprintf("%+.3f %s", v, p.metric.unit)
	}
	return fmt.Sprintf("%.2f", v)
}
