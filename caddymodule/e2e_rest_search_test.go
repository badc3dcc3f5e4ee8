// REST search end to end: GET /posts with q, since, until and sort, alone and together with
// userId, limit and after, on both stores; paging through a search of 1,000 posts while posts
// are written; each bad input refused. (A search of a MongoDB store still building its index:
// e2e_search_backfill_test.go.)
package caddymodule

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/postsedge/caddy-posts/openapi/openapitest"
)

// searchCorpus are the posts the search tests find, created in this order, each in a millisecond
// of its own: their index is their place, oldest first. Titles are unique.
var searchCorpus = []struct{ key, title, body string }{
	{asAlice, "Edge caching with Caddy", "Serve the posts from the edge."}, // 0
	{asBob, "Edges of a graph", ""},                                        // 1
	{asAlice, "Un café à Paris", "Crème brûlée et café noir"},              // 2
	{asBob, "CAFE RACER", "A motorcycle"},                                  // 3
	{asAlice, "東京タワー", "夜の東京"},                                             // 4
	{asBob, "Don't panic", "l'avion part à l'heure"},                       // 5
	{asAlice, "caddy-posts", "Docs at https://caddyserver.com/docs"},       // 6
	{asBob, "Rocket launch 🚀", ""},                                         // 7
	{asAlice, "Straße", ""},                                                // 8
	{asBob, "NEAR the edge OR NOT", ""},                                    // 9
	{asAlice, "Ledger of edgy things", ""},                                 // 10
}

// postRequest is a POST /posts through siteURL of title and body ("" for none) as the user of
// key.
func postRequest(siteURL, key, title, body string) request {
	in := map[string]string{"title": title}
	if body != "" {
		in["body"] = body
	}
	b, _ := json.Marshal(in)
	return request{"POST", siteURL + "/posts", string(b), []string{key, jsonBody}}
}

// createPost makes a post of title and body ("" for none) through siteURL as the user of key.
func (c *client) createPost(siteURL, key, title, body string) postOut {
	c.t.Helper()
	r := postRequest(siteURL, key, title, body)
	res := c.do(r.method, r.url, r.body, r.header...)
	if res.status != http.StatusCreated {
		c.t.Fatalf("creating %q: status %d, body %s", title, res.status, res.body)
	}
	var p postOut
	res.decode(c.t, &p)
	return p
}

// createCorpus makes searchCorpus through siteURL, as the user of key when it is not "" (the
// MongoDB sites know alice alone), one millisecond apart at least so that the order of the
// corpus is the order of createdAt.
func (c *client) createCorpus(siteURL, key string) []postOut {
	c.t.Helper()
	var created []postOut
	for _, p := range searchCorpus {
		author := cmp.Or(key, p.key)
		for len(created) > 0 && created[len(created)-1].CreatedAt == time.Now().UTC().Format(timeFormat) {
			time.Sleep(100 * time.Microsecond)
		}
		created = append(created, c.createPost(siteURL, author, p.title, p.body))
	}
	for i := 1; i < len(created); i++ {
		if created[i].CreatedAt <= created[i-1].CreatedAt {
			c.t.Fatalf("post %d was created at %s, not after post %d at %s", i, created[i].CreatedAt, i-1, created[i-1].CreatedAt)
		}
	}
	return created
}

// timeFormat is the API's format of times.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// listPage GETs a page of /posts of siteURL at path (with its query), and returns its posts and
// the target of its Link ("" on the last page), which must name the same list: the query's
// every parameter but after, and an after.
func (c *client) listPage(siteURL, path string) ([]postOut, string) {
	c.t.Helper()
	res := c.do("GET", siteURL+path, "")
	if res.status != http.StatusOK {
		c.t.Fatalf("GET %s: %d %s", path, res.status, res.body)
	}
	var page []postOut
	res.decode(c.t, &page)
	next := nextLink(c.t, res.header.Get("Link"))
	if next != "" {
		asked, _ := url.Parse(path)
		link, err := url.Parse(next)
		if err != nil {
			c.t.Fatal(err)
		}
		want, got := asked.Query(), link.Query()
		if got.Get("after") == "" {
			c.t.Fatalf("GET %s: the Link %q has no after", path, next)
		}
		want.Set("after", got.Get("after"))
		if link.Path != "/posts" || !maps.EqualFunc(got, want, slices.Equal) {
			c.t.Fatalf("GET %s: the Link %q; want /posts with the query %v", path, next, want)
		}
	}
	return page, next
}

// listAll follows the Links from path to the last page of siteURL and returns every post.
func (c *client) listAll(siteURL, path string) []postOut {
	c.t.Helper()
	var all []postOut
	for pages := 0; path != ""; pages++ {
		if pages > 2000 {
			c.t.Fatalf("more than 2,000 pages from %s", path)
		}
		var page []postOut
		page, path = c.listPage(siteURL, path)
		all = append(all, page...)
	}
	return all
}

// listOrder says where posts break the order of a list, by createdAt then id, oldest first if
// oldest, or newest first; "" if they do not.
func listOrder(posts []postOut, oldest bool) string {
	for i := 1; i < len(posts); i++ {
		a, b := posts[i-1], posts[i]
		order := strings.Compare(a.CreatedAt+a.ID, b.CreatedAt+b.ID) // both of fixed width
		if oldest && order >= 0 || !oldest && order <= 0 {
			return fmt.Sprintf("post %d (%s %s) comes before post %d (%s %s)", i-1, a.CreatedAt, a.ID, i, b.CreatedAt, b.ID)
		}
	}
	return ""
}

// withParam is a copy of query with the parameter name set to value.
func withParam(query url.Values, name, value string) url.Values {
	q := maps.Clone(query)
	q.Set(name, value)
	return q
}

// titlesOf are the titles of posts, in their order.
func titlesOf(posts []postOut) []string {
	titles := make([]string, len(posts))
	for i, p := range posts {
		titles[i] = p.Title
	}
	return titles
}

// startSearchCaddy loads config() with graphQLSites(), whose mongoSite reaches FerretDB through
// commandLog, and holds every REST answer against openapi.yaml.
func startSearchCaddy(t *testing.T) *client {
	t.Helper()
	c := loadGraphQLConfig(t, config()+graphQLSites())
	c.http.Transport = openapitest.Checked{Base: c.http.Transport, Report: t.Errorf}
	return c
}

// TestSearchingPostsByTheirWordsTimeAndOrder runs every parameter of a list, alone and
// combined, on the corpus: each list whole, and paged through its Links a post at a time and
// three at a time, is the corpus's posts it names, in its order. On the main site max_limit is
// 5, so a list of more posts is paged anyway.
func TestSearchingPostsByTheirWordsTimeAndOrder(t *testing.T) {
	inProcess(t)
	c := startSearchCaddy(t)
	clearPosts(t)
	corpus := c.createCorpus(site, "")
	at := func(i int) time.Time {
		ts, err := time.Parse(time.RFC3339, corpus[i].CreatedAt)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	stamp := func(i int) string { return corpus[i].CreatedAt }
	all := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		name  string
		query url.Values
		want  []int // of the corpus, in any order: the list's order is checked apart
	}{
		// Words.
		{"a word finds the posts that hold it in the title or the body, whole or as the beginning of one", url.Values{"q": {"edge"}}, []int{0, 1, 9}},
		{"the last word is a prefix: edg finds edge, edges and edgy, but not ledger", url.Values{"q": {"edg"}}, []int{0, 1, 9, 10}},
		{"a last word of 9 letters is a prefix too", url.Values{"q": {"motorcycl"}}, []int{3}},
		{"a last word of 9 letters is matched in full", url.Values{"q": {"motorcyck"}}, nil},
		{"a word before the last is a whole word: edg caddy finds nothing", url.Values{"q": {"edg caddy"}}, nil},
		{"every word must be in the post, in any order", url.Values{"q": {"caddy edge"}}, []int{0}},
		{"case does not matter", url.Values{"q": {"EDGE CaChInG"}}, []int{0}},
		{"accents do not matter, in the post or the query", url.Values{"q": {"cafe"}}, []int{2, 3}},
		{"a query with accents finds the post without", url.Values{"q": {"CAFÉ"}}, []int{2, 3}},
		{"words of the body are found", url.Values{"q": {"creme brulee"}}, []int{2}},
		{"ß is ss", url.Values{"q": {"strasse"}}, []int{8}},
		{"each Chinese or Japanese character is a word, found wherever it is", url.Values{"q": {"夜東"}}, []int{4}},
		{"one character of a Japanese word finds it", url.Values{"q": {"京"}}, []int{4}},
		{"an apostrophe splits words: don't is don and t", url.Values{"q": {"don't"}}, []int{5}},
		{"l'avion is l and avion", url.Values{"q": {"avion"}}, []int{5}},
		{"a hyphen splits words: caddy-posts finds caddy and posts anywhere", url.Values{"q": {"caddy-posts"}}, []int{0, 6}},
		{"a URL is its parts", url.Values{"q": {"caddyserver.com/docs"}}, []int{6}},
		{"emoji are ignored", url.Values{"q": {"rocket 🚀"}}, []int{7}},
		{"quotes are plain text", url.Values{"q": {`"edge"`}}, []int{0, 1, 9}},
		{"a minus is no negation", url.Values{"q": {"-edge"}}, []int{0, 1, 9}},
		{"a star is no wildcard", url.Values{"q": {"edge*"}}, []int{0, 1, 9}},
		{"OR and NOT are words, not operators", url.Values{"q": {"edge OR NOT"}}, []int{9}},
		{"NEAR and parentheses are plain text", url.Values{"q": {"NEAR(edge)"}}, []int{9}},
		{"a column filter is plain text", url.Values{"q": {"title:edge"}}, nil},
		{"a word no post holds finds nothing", url.Values{"q": {"zebra"}}, nil},
		{"q with userId: that user's posts only", url.Values{"q": {"edg"}, "userId": {"bob"}}, []int{1, 9}},
		{"q with the other user", url.Values{"q": {"edg"}, "userId": {"alice"}}, []int{0, 10}},
		{"q with a user who has no posts", url.Values{"q": {"edg"}, "userId": {"carol"}}, nil},

		// Times and order.
		{"no parameter: every post, newest first", url.Values{}, all},
		{"since is inclusive", url.Values{"since": {stamp(3)}}, []int{3, 4, 5, 6, 7, 8, 9, 10}},
		{"until is exclusive", url.Values{"until": {stamp(3)}}, []int{0, 1, 2}},
		{"since and until", url.Values{"since": {stamp(2)}, "until": {stamp(9)}}, []int{2, 3, 4, 5, 6, 7, 8}},
		{"since in another offset is the same time", url.Values{"since": {at(3).In(time.FixedZone("", -5*3600)).Format(time.RFC3339Nano)}}, []int{3, 4, 5, 6, 7, 8, 9, 10}},
		{"since half a millisecond after a post leaves it out", url.Values{"since": {at(3).Add(500 * time.Microsecond).Format(time.RFC3339Nano)}}, []int{4, 5, 6, 7, 8, 9, 10}},
		{"until half a millisecond after a post keeps it", url.Values{"until": {at(3).Add(500 * time.Microsecond).Format(time.RFC3339Nano)}}, []int{0, 1, 2, 3}},
		{"a range no post is in", url.Values{"since": {at(10).Add(time.Hour).Format(time.RFC3339)}}, nil},
		{"sort=createdAt: oldest first", url.Values{"sort": {"createdAt"}}, all},
		{"sort=-createdAt: newest first, as without it", url.Values{"sort": {"-createdAt"}}, all},
		{"q with since and until", url.Values{"q": {"edg"}, "since": {stamp(1)}, "until": {stamp(10)}}, []int{1, 9}},
		{"q oldest first", url.Values{"q": {"edg"}, "sort": {"createdAt"}}, []int{0, 1, 9, 10}},
		{"userId oldest first", url.Values{"userId": {"alice"}, "sort": {"createdAt"}}, []int{0, 2, 4, 6, 8, 10}},
		{"userId, since and until", url.Values{"userId": {"bob"}, "since": {stamp(3)}, "until": {stamp(9)}}, []int{3, 5, 7}},
		{"everything at once", url.Values{"q": {"edg"}, "userId": {"bob"}, "since": {stamp(1)}, "until": {stamp(10)}, "sort": {"createdAt"}}, []int{1, 9}},
	}
	ofCorpus := map[string]int{}
	for i, p := range corpus {
		ofCorpus[p.ID] = i
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			oldest := tt.query.Get("sort") == "createdAt"
			want := slices.Clone(tt.want)
			if !oldest {
				slices.Reverse(want)
			}
			whole := c.listAll(site, "/posts?"+tt.query.Encode())
			var got []int
			for _, p := range whole {
				i, ok := ofCorpus[p.ID]
				if !ok {
					t.Fatalf("found %s %q, which is not of the corpus", p.ID, p.Title)
				}
				if !reflect.DeepEqual(p, corpus[i]) {
					t.Errorf("found %+v; the post is %+v", p, corpus[i])
				}
				got = append(got, i)
			}
			if !slices.Equal(got, want) {
				t.Errorf("found %v %q; want %v", got, titlesOf(whole), want)
			}
			if why := listOrder(whole, oldest); why != "" {
				t.Errorf("out of order: %s", why)
			}
			for _, limit := range []string{"1", "3"} {
				if paged := c.listAll(site, "/posts?"+withParam(tt.query, "limit", limit).Encode()); !slices.Equal(idsOf(paged), idsOf(whole)) {
					t.Errorf("paged %s at a time: %q; want %q", limit, titlesOf(paged), titlesOf(whole))
				}
			}
		})
	}

	t.Run("a page holds limit posts at most, and the Link of a search keeps q, since, until, sort and userId", func(t *testing.T) {
		q := url.Values{"q": {"edg"}, "userId": {"bob"}, "since": {stamp(0)}, "until": {stamp(10)}, "sort": {"createdAt"}, "limit": {"1"}}
		page, next := c.listPage(site, "/posts?"+q.Encode()) // listPage checks the Link's query
		if len(page) != 1 || page[0].ID != corpus[1].ID || next == "" {
			t.Fatalf("the first page: %q, Link %q; want Edges of a graph and a next page", titlesOf(page), next)
		}
		if page, next = c.listPage(site, next); len(page) != 1 || page[0].ID != corpus[9].ID || next != "" {
			t.Errorf("the second page: %q, Link %q; want the last of the list, without a Link", titlesOf(page), next)
		}
	})

	t.Run("HEAD takes the same parameters and answers the same Link", func(t *testing.T) {
		path := "/posts?q=edg&sort=createdAt&limit=2"
		get, head := c.do("GET", site+path, ""), c.do("HEAD", site+path, "")
		if head.status != 200 || len(head.body) != 0 || head.header.Get("Link") == "" || head.header.Get("Link") != get.header.Get("Link") {
			t.Errorf("HEAD %d %q Link %q; want 200, no body, GET's Link %q", head.status, head.body, head.header.Get("Link"), get.header.Get("Link"))
		}
	})

	t.Run("the same searches find the same posts on MongoDB", func(t *testing.T) {
		// The FerretDB holds other tests' posts too: the answers are compared on this corpus.
		mongo := c.createCorpus(mongoSite, asAlice)
		ofMongo := map[string]int{}
		for i, p := range mongo {
			ofMongo[p.ID] = i
		}
		for _, tt := range tests {
			if !tt.query.Has("q") || tt.query.Has("userId") || tt.query.Has("since") || tt.query.Has("until") {
				continue // of the corpus's authors and times on the main site, or of every post
			}
			var got []int
			for _, p := range c.listAll(mongoSite, "/posts?"+withParam(tt.query, "limit", "4").Encode()) {
				if i, ok := ofMongo[p.ID]; ok {
					got = append(got, i)
				}
			}
			want := slices.Clone(tt.want)
			if tt.query.Get("sort") != "createdAt" {
				slices.Reverse(want)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: MongoDB found %v; want %v, as the embedded store", tt.name, got, want)
			}
		}
	})
}

// TestASearchCursorPagesItsOwnListOnly: the after of one list's Link, used with another sort,
// userId, q, since or until, is a 400 naming after; with the same list (the same words in
// another case or with accents, another limit, the same time in another offset) it pages on.
func TestASearchCursorPagesItsOwnListOnly(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	clearPosts(t)
	corpus := c.createCorpus(site, "")
	since, until := corpus[0].CreatedAt, corpus[10].CreatedAt
	list := url.Values{"q": {"edg"}, "since": {since}, "until": {until}, "limit": {"1"}}
	_, next := c.listPage(site, "/posts?"+list.Encode())
	link, _ := url.Parse(next)
	after := link.Query().Get("after")
	_, plainNext := c.listPage(site, "/posts?limit=1")
	plain, _ := url.Parse(plainNext)
	oldestList := url.Values{"sort": {"createdAt"}, "limit": {"1"}}
	_, oldestNext := c.listPage(site, "/posts?"+oldestList.Encode())
	oldest, _ := url.Parse(oldestNext)

	with := func(change func(url.Values)) url.Values {
		q := withParam(list, "after", after)
		change(q)
		return q
	}
	inOffset := func(stamp string) string {
		ts, _ := time.Parse(time.RFC3339, stamp)
		return ts.In(time.FixedZone("", 9*3600)).Format(time.RFC3339Nano)
	}
	for _, tt := range []struct {
		name  string
		query url.Values
	}{
		{"a search's cursor without q", with(func(q url.Values) { q.Del("q") })},
		{"a search's cursor with other words", with(func(q url.Values) { q.Set("q", "edge") })},
		{"a search's cursor with one more word", with(func(q url.Values) { q.Set("q", "edg graph") })},
		{"a search's cursor oldest first", with(func(q url.Values) { q.Set("sort", "createdAt") })},
		{"a search's cursor with a userId", with(func(q url.Values) { q.Set("userId", "bob") })},
		{"a search's cursor without since", with(func(q url.Values) { q.Del("since") })},
		{"a search's cursor with another since", with(func(q url.Values) { q.Set("since", corpus[1].CreatedAt) })},
		{"a search's cursor without until", with(func(q url.Values) { q.Del("until") })},
		{"a search's cursor with another until", with(func(q url.Values) { q.Set("until", corpus[9].CreatedAt) })},
		{"a cursor of the list of every post, with q", url.Values{"q": {"edg"}, "after": {plain.Query().Get("after")}}},
		{"a cursor of the list of every post, oldest first", url.Values{"sort": {"createdAt"}, "after": {plain.Query().Get("after")}}},
		{"a cursor of the list oldest first, newest first", url.Values{"after": {oldest.Query().Get("after")}}},
	} {
		t.Run("400 for "+tt.name, func(t *testing.T) {
			before := stored(t)
			c.do("GET", site+"/posts?"+tt.query.Encode(), "").wantError(t, http.StatusBadRequest, "after is a cursor of another list")
			unchanged(t, before)
		})
	}
	for _, tt := range []struct {
		name  string
		query url.Values
	}{
		{"the same words in capitals", with(func(q url.Values) { q.Set("q", "EDG") })},
		{"the same words with accents and punctuation", with(func(q url.Values) { q.Set("q", `"Édg"!`) })},
		{"another limit", with(func(q url.Values) { q.Set("limit", "3") })},
		{"without a limit", with(func(q url.Values) { q.Del("limit") })},
		{"the same times in another offset", with(func(q url.Values) { q.Set("since", inOffset(since)); q.Set("until", inOffset(until)) })},
	} {
		t.Run("a search's cursor pages on with "+tt.name, func(t *testing.T) {
			page, _ := c.listPage(site, "/posts?"+tt.query.Encode())
			if len(page) == 0 || page[0].ID != corpus[1].ID {
				t.Errorf("got %q; want the list to go on at Edges of a graph", titlesOf(page))
			}
		})
	}
}

// TestBadSearchesAreRefusedNamingTheParameter: each bad parameter of a list is a 400 whose
// message names it, on both stores: on the embedded store nothing changed, and on MongoDB
// (mongoSite, through commandLog) no command reached the database.
func TestBadSearchesAreRefusedNamingTheParameter(t *testing.T) {
	inProcess(t)
	c := startSearchCaddy(t)
	clearPosts(t)
	c.create(asAlice, "edge of the store")
	c.createOn(mongoSite, asAlice, "edge of the other store")
	tests := []struct{ name, query, want string }{
		{"q over 256 bytes", "q=" + strings.Repeat("a", 257), "q is 257 bytes long; a search has at most 256"},
		{"q over 256 bytes in 129 characters", "q=" + url.QueryEscape(strings.Repeat("é", 129)), "q is 258 bytes long"},
		{"q of 9 words, over max_search_terms", "q=a+b+c+d+e+f+g+h+i", "q has 9 words; a search has at most 8"},
		{"q of punctuation alone", "q=" + url.QueryEscape(`"*" - : ^ ( )`), "q has no letter or digit"},
		{"q of emoji alone", "q=" + url.QueryEscape("🚀🔥"), "q has no letter or digit"},
		{"q of spaces alone", "q=+++", "q has no letter or digit"},
		{"an empty q", "q=", `query parameter "q" is empty`},
		{"q given twice", "q=edge&q=caddy", `query parameter "q" is given more than once`},
		{"since that is a word", "since=yesterday", "since must be an RFC 3339 time"},
		{"since that is a date alone", "since=2026-11-30", "since must be an RFC 3339 time"},
		{"since without an offset", "since=2026-11-30T10:00:00", "since must be an RFC 3339 time"},
		{"since whose + was not escaped, and reads as a space", "since=2026-11-30T10:00:00+01:00", "since must be an RFC 3339 time"},
		{"since in Unix seconds", "since=1764496800", "since must be an RFC 3339 time"},
		{"since given twice", "since=2026-11-30T10:00:00Z&since=2026-11-30T11:00:00Z", `query parameter "since" is given more than once`},
		{"an empty since", "since=", `query parameter "since" is empty`},
		{"until that is not a time", "until=tomorrow", "until must be an RFC 3339 time"},
		{"until with an hour 24", "until=2026-11-30T24:00:00Z", "until must be an RFC 3339 time"},
		{"since equal to until", "since=2026-11-30T10:00:00Z&until=2026-11-30T10:00:00Z", "since must be before until"},
		{"since after until", "since=2026-11-30T11:00:00Z&until=2026-11-30T10:00:00Z", "since must be before until"},
		{"since and until in one millisecond", "since=2026-11-30T10:00:00.0001Z&until=2026-11-30T10:00:00.0009Z", "since must be before until"},
		{"sort by another name", "sort=newest", "sort must be -createdAt (newest first, the default) or createdAt (oldest first)"},
		{"sort in another case", "sort=createdat", "sort must be -createdAt"},
		{"sort in snake case", "sort=-created_at", "sort must be -createdAt"},
		{"sort whose + reads as a space", "sort=+createdAt", "sort must be -createdAt"},
		{"sort by another field", "sort=title", "sort must be -createdAt"},
		{"sort given twice", "sort=createdAt&sort=createdAt", `query parameter "sort" is given more than once`},
		{"an empty sort", "sort=", `query parameter "sort" is empty`},
		{"a good q beside a bad sort", "q=edge&sort=up", "sort must be -createdAt"},
		{"a good q beside a bad since", "q=edge&since=now", "since must be an RFC 3339 time"},
		{"a bad q beside a good sort", "q=" + url.QueryEscape("🚀") + "&sort=createdAt", "q has no letter or digit"},
		{"a parameter of another API", "search=edge", `unknown query parameter "search"; allowed: userId, q, since, until, sort, limit, after`},
		{"a cursor this API never made, with q", "q=edge&after=not-a-cursor", "after is not a cursor"},
	}
	for _, tt := range tests {
		t.Run("400 for "+tt.name, func(t *testing.T) {
			before := stored(t)
			c.do("GET", site+"/posts?"+tt.query, "").wantError(t, http.StatusBadRequest, tt.want)
			if res := c.do("HEAD", site+"/posts?"+tt.query, ""); res.status != http.StatusBadRequest || len(res.body) != 0 {
				t.Errorf("HEAD: %d %q; want 400 without a body", res.status, res.body)
			}
			n := commands().count()
			c.do("GET", mongoSite+"/posts?"+tt.query, "").wantError(t, http.StatusBadRequest, tt.want)
			if got := commands().since(n); len(got) > 0 {
				t.Errorf("the MongoDB site sent %v; want no command", got)
			}
			unchanged(t, before)
		})
	}
}

// meanwhilePerWriter is how many posts each writer of
// TestPagingThroughASearchOf1000PostsWhilePostsAreWritten creates while a search is paged, at most.
const meanwhilePerWriter = 60

// TestPagingThroughASearchOf1000PostsWhilePostsAreWritten follows the Links of a search of
// 1,000 matching posts, among others that do not match, while writers create posts that match
// and posts that do not, in each order: no post comes twice, every matching post that existed
// when paging began comes, and every post comes in the order of the list.
func TestPagingThroughASearchOf1000PostsWhilePostsAreWritten(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	clearPosts(t)
	t.Cleanup(func() { clearPosts(t) }) // so that the checks of other tests read a small store

	// Matching posts hold the whole word harbor and a word that begins with light; the others
	// hold one of them, or a near miss.
	start := time.Now()
	var seed []request
	for i := range 1000 {
		key := []string{asAlice, asBob}[i%2]
		title, body := fmt.Sprintf("Harbor lights %d", i), ""
		switch i % 4 {
		case 1:
			title, body = fmt.Sprintf("Post %d", i), "the LIGHTHOUSE at the harbor"
		case 2:
			title, body = fmt.Sprintf("Harbor %d", i), "lights"
		}
		seed = append(seed, postRequest(site, key, title, body))
	}
	for i := range 300 {
		title := []string{"Harbor at night %d", "Lights out %d", "Harbors lights %d", "Alight at the harbor %d", "Harbor lig %d"}[i%5]
		seed = append(seed, postRequest(site, asAlice, fmt.Sprintf(title, i), ""))
	}
	existing := c.createAll(seed, 16)[:1000] // the matching posts there when a paging begins
	t.Logf("1,300 posts created through the API in %v", time.Since(start).Round(time.Millisecond))
	// isMatch is the search's rule for these posts' ASCII words: harbor whole, light a prefix.
	isMatch := func(p postOut) bool {
		words := strings.FieldsFunc(strings.ToLower(p.Title+" "+bodyOf(p)), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		return slices.Contains(words, "harbor") && slices.ContainsFunc(words, func(w string) bool { return strings.HasPrefix(w, "light") })
	}
	for _, oldest := range []bool{false, true} {
		order := map[bool]string{false: "-createdAt", true: "createdAt"}[oldest]
		t.Run("sort="+order, func(t *testing.T) {
			start := time.Now()
			stop := make(chan struct{})
			var (
				writers sync.WaitGroup
				mu      sync.Mutex
				written []postOut // matching or not
			)
			stopWriters := sync.OnceFunc(func() { close(stop); writers.Wait() })
			defer stopWriters()
			// Each writer creates meanwhilePerWriter posts at most, so that a list oldest first,
			// whose end they extend, has an end.
			for w := range 4 {
				writers.Go(func() {
					for n := range meanwhilePerWriter {
						select {
						case <-stop:
							return
						default:
						}
						title := fmt.Sprintf("Harbor lights written meanwhile %d-%d", w, n)
						if n%2 == 1 {
							title = fmt.Sprintf("Harbor written meanwhile %d-%d", w, n)
						}
						res, err := c.fetch(postRequest(site, asBob, title, ""))
						var p postOut
						if err == nil && res.status == http.StatusCreated {
							err = json.Unmarshal(res.body, &p)
						}
						if err != nil || res.status != http.StatusCreated {
							t.Errorf("creating %q meanwhile: %v %d %s", title, err, res.status, res.body)
							return
						}
						mu.Lock()
						written = append(written, p)
						mu.Unlock()
					}
				})
			}
			q := url.Values{"q": {"harbor light"}, "sort": {order}}
			seen := c.listAll(site, "/posts?"+q.Encode())
			stopWriters()
			t.Logf("paged through %d posts (%d pages) while %d were written, in %v", len(seen), (len(seen)+4)/5, len(written), time.Since(start).Round(time.Millisecond))
			defer func() {
				existing = append(existing, slices.DeleteFunc(written, func(p postOut) bool { return !isMatch(p) })...)
			}()

			ids := map[string]bool{}
			for _, p := range seen {
				if ids[p.ID] {
					t.Errorf("%s %q came twice", p.ID, p.Title)
				}
				ids[p.ID] = true
				if !isMatch(p) {
					t.Errorf("%s %q %q does not match", p.ID, p.Title, bodyOf(p))
				}
			}
			for _, p := range existing {
				if !ids[p.ID] {
					t.Errorf("%s %q, there before paging began, was skipped", p.ID, p.Title)
				}
			}
			if why := listOrder(seen, oldest); why != "" {
				t.Errorf("out of order: %s", why)
			}
		})
	}
}

// bodyOf is p's body, "" when it has none.
func bodyOf(p postOut) string {
	if p.Body == nil {
		return ""
	}
	return *p.Body
}

// createAll makes the creates of requests, workers at a time, and returns their posts in the
// order of requests.
func (c *client) createAll(requests []request, workers int) []postOut {
	c.t.Helper()
	created := make([]postOut, len(requests))
	errs := make([]error, len(requests))
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(requests); i = int(next.Add(1) - 1) {
				res, err := c.fetch(requests[i])
				switch {
				case err != nil:
					errs[i] = err
				case res.status != http.StatusCreated:
					errs[i] = fmt.Errorf("%s: %d %s", requests[i].body, res.status, res.body)
				default:
					errs[i] = json.Unmarshal(res.body, &created[i])
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.t.Fatal(err)
		}
	}
	return created
}
