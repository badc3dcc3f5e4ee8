// The search rows of issue 39 (39a–39f): the words that the seeding gives the posts, the
// searches the rows send, the check of their answers against the seeding, and the two copies
// of the large store's file that row 39e's sides insert into, served by a ./caddy of their own.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/postsedge/caddy-posts/store/sqlite"
)

// The words of the search rows. Each word a post holds takes the place of one of the first
// words of its body, whose five letters it has too ("lorem", "ipsum"), so that every body keeps
// its length and the other rows read the posts they read before.
const (
	wordRare           = "dolor"          // in 1% of the posts (39a, 39f)
	wordTenA, wordTenB = "magna", "nulla" // in 10% of the posts each, both in 1% (39c)
	wordPrefix         = "vel"            // begins each word of prefixWords, one of which is in 1% of the posts (39d)
	wordNone           = "quokka"         // in no post, and begins none of their words (39b)
	// searchBlock is the number of posts of which a word of 1% is in one (searchWords).
	searchBlock = 100
)

// searchCopiesRow is the row that inserts into copies of the large store (startSearchCopies),
// made only when it runs.
const searchCopiesRow = "39e"

// unindexedTriggers are the triggers of migration 9 (store/sqlite/schema.go) that write the
// search index, which the unindexed copy of startSearchCopies has not.
var unindexedTriggers = []string{"posts_insert_words", "posts_update_words", "posts_delete_words"}

// prefixWords are the words that begin with wordPrefix, taken in turn.
var prefixWords = []string{"velit", "velox", "velum"}

// searchWords are the words of the search rows that post i of the seeding holds, by its rank
// in its block of searchBlock posts: a permutation of the block that moves from block to block,
// so that each word is in exactly its share of every block, and in posts of every user and
// body length in turn. Rank 0 holds wordRare, rank 1 a word of prefixWords, a rank ending in 2
// wordTenA and one from 30 to 39 wordTenB (so rank 32 both): a post holds two words at most,
// and every body has two.
func searchWords(i int) []string {
	rank := (37*(i%searchBlock) + 11*(i/searchBlock)) % searchBlock // 37 is prime to 100: a permutation
	var w []string
	switch {
	case rank == 0:
		w = append(w, wordRare)
	case rank == 1:
		w = append(w, prefixWords[i/searchBlock%len(prefixWords)])
	}
	if rank%10 == 2 {
		w = append(w, wordTenA)
	}
	if rank/10 == 3 {
		w = append(w, wordTenB)
	}
	return w
}

// withWords is body with its first words replaced by ws, each as long as the word it replaces.
func withWords(body string, ws []string) string {
	f := strings.Fields(body)
	for i, w := range ws {
		if len(w) != len(f[i]) {
			panic(fmt.Sprintf("the search word %q is not as long as %q", w, f[i]))
		}
		f[i] = w
	}
	return strings.Join(f, " ") + " "
}

// search is one search of the rows: its q, and how many of the posts of a store of n hold it.
type search struct {
	q     string
	count func(n int) int
}

// The searches of the rows.
var (
	searchRare   = search{wordRare, func(n int) int { return n / searchBlock }}
	searchNone   = search{wordNone, func(int) int { return 0 }}
	searchTwo    = search{wordTenA + " " + wordTenB, func(n int) int { return n / searchBlock }}
	searchPrefix = search{wordPrefix, func(n int) int { return n / searchBlock }}
	searches     = []search{searchRare, searchNone, searchTwo, searchPrefix}
)

// path is the GET /posts of s, limit posts a page.
func (s search) path(limit string) string {
	return "/posts?" + url.Values{"q": {s.q}, "limit": {limit}}.Encode()
}

// holds says whether p is one of the posts s finds: it holds every word of s whole, and a word
// that begins with the last, as the issue says; read from the seeding's plain words, not with
// the module's tokenizer.
func (s search) holds(p seedPost) bool {
	words := strings.Fields(p.title + " " + p.body)
	q := strings.Fields(s.q)
	for _, w := range q[:len(q)-1] {
		if !slices.Contains(words, w) {
			return false
		}
	}
	last := q[len(q)-1]
	return slices.ContainsFunc(words, func(w string) bool { return strings.HasPrefix(w, last) })
}

// pbSearch is PocketBase's request of a search of one word, as its filter syntax has it: its
// first page of pageSize, newest first, without the count of every match (skipTotal) unless
// counted.
func pbSearch(word string, counted bool) string {
	q := url.Values{"filter": {fmt.Sprintf("(title~'%s'||body~'%s')", word, word)}, "perPage": {fmt.Sprint(pageSize)},
		"sort": {"-created,-id"}, "skipTotal": {"1"}}
	if counted {
		q.Del("skipTotal")
	}
	return "?" + q.Encode()
}

// stored is a post of a seeded store: its id there, and the post of the seeding.
type stored struct {
	id string
	seedPost
}

// newestFirst are the posts of a store seeded with ps, whose answers were sd, newest first.
func newestFirst(ps []seedPost, sd seeded) []stored {
	index := make(map[string]int, len(sd.ids))
	for i, id := range sd.ids {
		index[id] = i
	}
	out := make([]stored, len(sd.newest))
	for i, c := range sd.newest {
		out[i] = stored{c.ID, ps[index[c.ID]]}
	}
	return out
}

// matching are the ids of the posts that s finds, in the order of posts.
func (s search) matching(posts []stored) []string {
	var ids []string
	for _, p := range posts {
		if s.holds(p.seedPost) {
			ids = append(ids, p.id)
		}
	}
	return ids
}

// The page size of checkSearch's reading of every match of a search.
const allPages = "100"

// checkSearch fails unless the searches of the rows find what the seeding put in each store:
// on the module's two stores, the first page of each (limit=20) is the newest 20 posts that
// hold its words, or none, and its pages, read through their Link, are every such post once,
// newest first, as many as the seeding gave the words; PocketBase's filter counts as many
// posts, and its first page is its newest 20 of them. It notes what it found.
func (e *env) checkSearch(ctx context.Context) error {
	first := fmt.Sprint(pageSize)
	firstPages := map[string][]string{} // the titles of the large store's first page, by q
	for _, st := range []struct {
		base string
		sd   seeded
		n    int
	}{{e.read, e.large, largePosts}, {e.small, e.smallStore, smallPosts}} {
		posts := newestFirst(seedPosts(st.n), st.sd)
		for _, s := range searches {
			want := s.matching(posts)
			if len(want) != s.count(st.n) {
				return fmt.Errorf("the seeding of %d posts gives q=%s %d posts; want %d", st.n, s.q, len(want), s.count(st.n))
			}
			page, _, err := getPage(ctx, st.base+s.path(first))
			if err != nil {
				return err
			}
			if got, w := ids(page), want[:min(pageSize, len(want))]; !slices.Equal(got, w) {
				return fmt.Errorf("GET %s%s: the posts %v; want %v", st.base, s.path(first), got, w)
			}
			if st.n == largePosts {
				firstPages[s.q] = titles(page)
			}
			var all []string
			for next := st.base + s.path(allPages); next != ""; {
				page, link, err := getPage(ctx, next)
				if err != nil {
					return err
				}
				all, next = append(all, ids(page)...), ""
				if link != "" {
					next = st.base + link
				}
			}
			if !slices.Equal(all, want) {
				return fmt.Errorf("GET %s%s and its next pages: %d posts, not the %d that hold %q, newest first",
					st.base, s.path(allPages), len(all), len(want), s.q)
			}
		}
	}
	e.notes = append(e.notes, fmt.Sprintf("The search rows (39): the bodies of the seeding hold, in place of their first `lorem` or `ipsum`, "+
		"`%s` in 1%% of the posts, `%s` and `%s` in 10%% each (1%% both), one of `%s` in 1%%, and no post holds `%s` "+
		"(each post's rank in its block of %d a permutation that moves from block to block, so each word is in posts of every user and body length); "+
		"before the rows, each search's pages on both stores, read through their Link, were every post the seeding gave its words, once, newest first; "+
		"each run of rows 7d, 39a–39d and 39f starts once Caddy is idle (a tick of CPU time in a third of a second at most): its merges of the index's segments, "+
		"which follow a burst of writes (the seeding, the other rows' writes), done.",
		wordRare, wordTenA, wordTenB, strings.Join(prefixWords, "`, `"), wordNone, searchBlock))
	if e.pb == "" {
		return nil
	}
	want := searchRare.matching(newestFirst(seedPosts(largePosts), e.pbStore))
	var counted struct{ TotalItems int }
	if err := getJSON(ctx, e.pb+pbSearch(wordRare, true), &counted); err != nil {
		return err
	}
	if counted.TotalItems != len(want) {
		return fmt.Errorf("GET %s: totalItems %d; want %d", e.pb+pbSearch(wordRare, true), counted.TotalItems, len(want))
	}
	var page struct{ Items []pagePost }
	if err := getJSON(ctx, e.pb+pbSearch(wordRare, false), &page); err != nil {
		return err
	}
	if got := ids(page.Items); !slices.Equal(got, want[:pageSize]) {
		return fmt.Errorf("GET %s: the posts %v; want %v", e.pb+pbSearch(wordRare, false), got, want[:pageSize])
	}
	same := "the same posts as caddy-posts' first page (by title), in the same order"
	if !slices.Equal(titles(page.Items), firstPages[searchRare.q]) {
		same = fmt.Sprintf("not the same posts as caddy-posts' first page, by title (%v and %v): each store's order is that of its own seeding's concurrent POSTs",
			firstPages[searchRare.q], titles(page.Items))
	}
	e.notes = append(e.notes, fmt.Sprintf("Row 39f: PocketBase's `filter=(title~'%s'||body~'%s')` counts %d posts, as many as the seeding gave the word, "+
		"and its first page (`perPage=20&sort=-created,-id&skipTotal=1`) is its newest 20 of them, %s.", wordRare, wordRare, counted.TotalItems, same))
	return nil
}

// pagePost is a post of a page, as both APIs answer it.
type pagePost struct{ ID, Title string }

func ids(ps []pagePost) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

func titles(ps []pagePost) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Title
	}
	return out
}

// getPage reads a page of GET /posts at url, and the path of the next page from its Link.
func getPage(ctx context.Context, url string) ([]pagePost, string, error) {
	res, body, err := send(ctx, http.DefaultClient, "GET", url, "", nil)
	if err != nil {
		return nil, "", err
	}
	var page []pagePost
	if err := json.Unmarshal(body, &page); err != nil || res.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET %s: %d %.300s, %v", url, res.StatusCode, body, err)
	}
	link := res.Header.Get("Link")
	if link != "" {
		next, ok := strings.CutSuffix(link, `>; rel="next"`)
		if !ok || !strings.HasPrefix(next, "</") {
			return nil, "", fmt.Errorf("GET %s: Link %q", url, link)
		}
		link = next[1:]
	}
	return page, link, nil
}

// getJSON reads the JSON answer of GET url into v.
func getJSON(ctx context.Context, url string, v any) error {
	status, body, err := do(ctx, "GET", url, "")
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("status %d", status)
	}
	if err == nil {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		return fmt.Errorf("GET %s: %.300s, %w", url, body, err)
	}
	return nil
}

// startSearchCopies makes the two copies of the large store's file that row 39e's sides insert
// into (sqlite.Backup: a snapshot as a read takes it, checked), each with the 200,000 posts and
// their search index, the second without the three triggers of migration 9 that write the
// index (unindexedTriggers; its tables stay, unwritten), and serves the module on both, from
// one ./caddy of bench/Caddyfile.search.
func (e *env) startSearchCopies(ctx context.Context) error {
	dir := filepath.Join(e.dir, "search-copies")
	for _, c := range []struct {
		name    string
		indexed bool
	}{{"indexed", true}, {"unindexed", false}} {
		file := filepath.Join(dir, c.name, sqlite.DatabaseFile)
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return err
		}
		n, err := sqlite.Backup(ctx, filepath.Join(e.caddy.dir, "read"), file)
		if err != nil {
			return err
		}
		if n != largePosts {
			return fmt.Errorf("the copy %s holds %d posts; want %d", file, n, largePosts)
		}
		if !c.indexed {
			db, err := sql.Open("sqlite", "file:"+file)
			if err != nil {
				return err
			}
			for _, t := range unindexedTriggers {
				if _, err = db.ExecContext(ctx, "DROP TRIGGER "+t); err != nil {
					break
				}
			}
			if err := joinClose(err, db); err != nil {
				return fmt.Errorf("the copy %s: %w", file, err)
			}
		}
	}
	addrs, err := freeAddrs(3)
	if err != nil {
		return err
	}
	home := filepath.Join(dir, "home")
	vars := []string{
		"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"SEARCH_DIR=" + dir, "SEARCH_API_KEY=" + e.apiKey,
	}
	for i, name := range []string{"INDEXED", "UNINDEXED", "ADMIN"} {
		_, port, _ := strings.Cut(addrs[i], ":")
		vars = append(vars, fmt.Sprintf("SEARCH_%s_PORT=%s", name, port))
	}
	caddyfile := filepath.Join(filepath.Dir(e.caddyfile), "Caddyfile.search")
	p, err := spawn(e.caddyBin, []string{"run", "--config", caddyfile, "--adapter", "caddyfile"}, vars, filepath.Join(dir, "caddy.log"))
	if err != nil {
		return err
	}
	e.closers = append(e.closers, p.stop)
	for _, addr := range addrs {
		if err := p.listening(ctx, addr); err != nil {
			return err
		}
	}
	e.copies = searchCopies{indexed: "http://" + addrs[0], unindexed: "http://" + addrs[1], profile: "http://" + addrs[2] + "/debug/pprof",
		files: [2]string{filepath.Join(dir, "indexed", sqlite.DatabaseFile), filepath.Join(dir, "unindexed", sqlite.DatabaseFile)}, proc: p}
	log.Printf("./caddy serves two copies of the large store (%s posts), with the search index at %s and without at %s", thousands(largePosts), e.copies.indexed, e.copies.unindexed)
	return nil
}

// searchCopies is the ./caddy of row 39e: its sites on the copy with the index and the one
// without, its /debug/pprof, and the copies' files, in that order.
type searchCopies struct {
	indexed, unindexed, profile string
	files                       [2]string
	proc                        *process
}

// settled waits, for at most a minute, until the ./caddy of the copies is idle (process.idle):
// its merges of the index's segments between writes done (mergeWords, store/sqlite), so that
// neither side of row 39e runs beside the other's leftover work. The row measures a write's own
// cost, as a sustained load pays it, without the merges an idle store takes on besides.
func (c searchCopies) settled(ctx context.Context) error { return c.proc.idle(ctx, time.Minute) }

// checkSearchCopies fails unless a POST to the copy with the index writes its post's row of
// the index (post_rows), and one to the copy without it writes none.
func (e *env) checkSearchCopies(ctx context.Context) error {
	for i, c := range []struct {
		url     string
		indexed bool
	}{{e.copies.indexed, true}, {e.copies.unindexed, false}} {
		counts := func() (posts, rows int, err error) {
			db, err := sql.Open("sqlite", "file:"+e.copies.files[i]+"?mode=ro")
			if err != nil {
				return 0, 0, err
			}
			err = db.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM posts), (SELECT count(*) FROM post_rows)").Scan(&posts, &rows)
			return posts, rows, joinClose(err, db)
		}
		posts, rows, err := counts()
		if err != nil {
			return err
		}
		status, body, err := do(ctx, "POST", c.url+"/posts", createBody(""), "Authorization: ApiKey "+e.apiKey)
		if err != nil || status != http.StatusCreated {
			return fmt.Errorf("POST %s/posts: %d %s, %v; want 201", c.url, status, body, err)
		}
		posts2, rows2, err := counts()
		if err != nil {
			return err
		}
		indexed := 0
		if c.indexed {
			indexed = 1
		}
		if posts2 != posts+1 || rows2 != rows+indexed {
			return fmt.Errorf("a POST to %s (indexed: %v) took the posts from %d to %d and the index's rows from %d to %d", c.url, c.indexed, posts, posts2, rows, rows2)
		}
	}
	return nil
}

// joinClose closes db, and returns err or else the error of closing it.
func joinClose(err error, db *sql.DB) error {
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}
