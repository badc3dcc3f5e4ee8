package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/words"
)

// searchCorpus is the text of the search's posts: several scripts, accents, cases, CJK written
// without spaces, apostrophes, hyphens, URLs, e-mail addresses and emoji, and words that many
// posts share, so that a search pages.
var searchCorpus = []string{
	"Caddy serves the edge: a proxy at the edge of the network",
	"Édge caching with Cäddy, naïve café façade",
	"STRASSE und Straße, Größe und GRÖSSE",
	"Σίσυφος και ΣΊΣΥΦΟΣ: ο μύθος",
	"Москва и Ёлка, ПРОКСИ-сервер",
	"東京の天気は晴れです",
	"北京欢迎你，上海也欢迎你",
	"カタカナとひらがな、漢字",
	"서울의 날씨는 맑음",
	"مرحبا بالعالم العربي",
	"don't stop: l'avion d'Air France",
	"caddy-posts and caddy_posts and caddyposts",
	"see https://caddyserver.com/docs/caddyfile and mail ops@example.org",
	"emoji 🚀🔥 rocket fire 👍🏽 thumbs",
	"ﬁne ﬂow ＦＵＬＬ ｗｉｄｔｈ ²³",
	"version 2.11 released 2026-11-30 at 10:00",
	"edge edgy edges hedge",
	"the quick brown fox jumps over the lazy dog",
	"AND OR NOT NEAR \"quoted\" * - : ^ ( )",
	"Zürich Genève São Paulo Kraków",
}

// searchPosts is the corpus as posts of three users, each title and body two of its lines; a
// few share a millisecond, so the order within one is by id, and some have no body.
func searchPosts() []store.Post {
	r := rand.New(rand.NewPCG(39, 1))
	users := []string{"alice", "bob", "carol"}
	var posts []store.Post
	created := base
	for n := range 150 {
		if n%4 != 0 {
			created = created.Add(time.Duration(1+r.IntN(3)) * time.Second)
		}
		p := newPost(1000+r.IntN(1_000_000)*150+n, users[r.IntN(len(users))], created)
		p.Title = searchCorpus[r.IntN(len(searchCorpus))]
		if r.IntN(5) != 0 {
			p.Body = ptr(searchCorpus[r.IntN(len(searchCorpus))] + " " + searchCorpus[r.IntN(len(searchCorpus))])
		}
		posts = append(posts, p)
	}
	return posts
}

// searchModel is what a list should return: the posts f selects, by the rules of store.Filter,
// read from all, with no index.
func searchModel(all []store.Post, f store.Filter) []store.Post {
	var found []store.Post
	for _, p := range all {
		var body string
		if p.Body != nil {
			body = *p.Body
		}
		if (f.UserID == "" || p.UserID == f.UserID) &&
			(f.Since.IsZero() || !p.CreatedAt.Before(f.Since)) &&
			(f.Until.IsZero() || p.CreatedAt.Before(f.Until)) &&
			f.Search.Match(words.Of(p.Title, body)) &&
			(f.After == nil || f.Follows(p, *f.After)) {
			found = append(found, p)
		}
	}
	slices.SortFunc(found, func(a, b store.Post) int {
		switch {
		case f.Follows(a, store.KeyOf(b)):
			return 1
		case f.Follows(b, store.KeyOf(a)):
			return -1
		}
		return 0
	})
	return found[:min(len(found), f.Limit)]
}

// searchQueries are the texts searched for: pieces of the corpus as a user would type them
// (one to three of a post's words, the last often cut short, in other cases and accents), and
// the texts that match nothing or must not be read as syntax.
func searchQueries(posts []store.Post) []string {
	r := rand.New(rand.NewPCG(39, 2))
	queries := []string{"edg", "EDGE", "edge caddy", "strasse", "GROSSE", "σισυφος", "ёлка", "елка", "東", "天気", "欢迎",
		"ひら", "서울", "مرحبا", "don", "l avion", "caddyserver.com", "ops@example", "fi", "full width", "23",
		"2026-11-30", "quoted", "AND", "NOT near", "\"quoted\" *", "zurich geneve", "sao", "cafe facade", "nothingmatches",
		"edge nothingmatches", "x", "e", "ed", "caddyserver", "caddyserv", "caddypos", "caddyposts", "caddypostsx",
		"ΣΊΣΥΦΟΣ", "rewritten", "rewrittenx", "edge rewritte"}
	for len(queries) < 200 {
		p := posts[r.IntN(len(posts))]
		text := p.Title
		if p.Body != nil && r.IntN(2) == 0 {
			text = *p.Body
		}
		fields := strings.Fields(text)
		at := r.IntN(len(fields))
		picked := fields[at:min(len(fields), at+1+r.IntN(3))]
		last := []rune(picked[len(picked)-1])
		if r.IntN(2) == 0 {
			picked[len(picked)-1] = string(last[:1+r.IntN(len(last))])
		}
		q := strings.Join(picked, " ")
		if r.IntN(4) == 0 {
			q = strings.ToUpper(q)
		}
		if !words.Parse(q).Empty() {
			queries = append(queries, q)
		}
	}
	return queries
}

// testSearchMatchesTheModel searches the corpus for 200 queries, alone and with a user, a time
// range, either order and pages of several sizes, after updates that change posts' words and
// deletes, and requires of each page the posts the model finds, in its order.
func testSearchMatchesTheModel(t *testing.T, open Open) {
	s := open(t)
	posts := searchPosts()
	copied := 20 // the first posts go in through a copy, if the store takes one
	if target, ok := s.(store.CopyTarget); ok {
		if _, err := target.InsertPosts(t.Context(), posts[:copied]); err != nil {
			t.Fatal(err)
		}
	} else {
		copied = 0
	}
	insert(t, s, posts[copied:]...)
	live := map[string]store.Post{}
	for _, p := range posts {
		live[p.ID] = get(t, s, p.ID)
	}
	for i := 0; i < len(posts); i += 7 { // updates of the title, the body, or both
		p := live[posts[i].ID]
		u := store.Update{UpdatedAt: p.UpdatedAt.Add(time.Second)}
		switch i % 3 {
		case 0:
			u.Title = ptr(searchCorpus[(i/7)%len(searchCorpus)])
		case 1:
			u.Body = ptr("rewritten hedge " + searchCorpus[(i/7+3)%len(searchCorpus)])
		default:
			u.UnsetBody = true
		}
		e, err := s.UpdatePost(t.Context(), p.ID, p.UserID, store.AnyVersion, u)
		if err != nil {
			t.Fatal(err)
		}
		live[p.ID] = e.Post
	}
	for i := 3; i < len(posts); i += 11 {
		p := posts[i]
		if _, err := s.DeletePost(t.Context(), p.ID, p.UserID, store.AnyVersion); err != nil {
			t.Fatal(err)
		}
		delete(live, p.ID)
	}
	all := make([]store.Post, 0, len(live))
	for _, p := range live {
		all = append(all, p)
	}

	r := rand.New(rand.NewPCG(39, 3))
	first, last := posts[0].CreatedAt, posts[len(posts)-1].CreatedAt
	span := last.Sub(first)
	for n, q := range searchQueries(posts) {
		f := store.Filter{Search: words.Parse(q), Oldest: n%2 == 1, Limit: []int{1, 3, 7, 50}[r.IntN(4)]}
		if r.IntN(4) == 0 {
			f.UserID = []string{"alice", "bob", "carol", "nobody"}[r.IntN(4)]
		}
		if r.IntN(3) == 0 {
			f.Since = first.Add(time.Duration(r.Int64N(int64(span))))
		}
		if r.IntN(3) == 0 {
			f.Until = first.Add(time.Duration(r.Int64N(int64(span)))).Add(span / 3)
		}
		got := pageAsTheModel(t, s, all, f)
		for _, p := range got {
			if d := diff(p, live[p.ID]); d != "" {
				t.Fatalf("search %d, %q: post %s: %s", n, q, p.ID, d)
			}
		}
	}
}

// pageAsTheModel lists f's pages from s until one is short, requires of each the posts the
// model finds in all, and returns them all.
func pageAsTheModel(t *testing.T, s store.Store, all []store.Post, f store.Filter) []store.Post {
	t.Helper()
	name := fmt.Sprintf("search %q user %q since %s until %s oldest %v limit %d", f.Search.Words, f.UserID, stamp(f.Since), stamp(f.Until), f.Oldest, f.Limit)
	var got []store.Post
	for range len(all) + 1 {
		found := list(t, s, f)
		if want := searchModel(all, f); !slices.Equal(ids(found), ids(want)) {
			t.Fatalf("%s, after %v:\ngot  %v\nwant %v", name, f.After, titles(found), titles(want))
		}
		got = append(got, found...)
		if len(found) < f.Limit {
			f.After, f.Limit = nil, len(all)
			if want := searchModel(all, f); !slices.Equal(ids(got), ids(want)) {
				t.Fatalf("%s: the pages hold %v, want %v", name, titles(got), titles(want))
			}
			return got
		}
		f.After = new(store.KeyOf(found[len(found)-1]))
	}
	t.Fatalf("%s: paging does not end", name)
	return nil
}

// titles describes posts briefly, for a failure.
func titles(posts []store.Post) []string {
	out := make([]string, len(posts))
	for i, p := range posts {
		out[i] = fmt.Sprintf("%s %s %.20q", p.ID[16:], p.CreatedAt.Format("15:04:05.000"), p.Title)
	}
	return out
}

// testTimeRangesAndOrders lists without a search, in both orders, between times that fall on
// posts and between them, and requires of each page what the model finds.
func testTimeRangesAndOrders(t *testing.T, open Open) {
	s := open(t)
	var all []store.Post
	for n := range 30 {
		p := newPost(n, []string{"alice", "bob"}[n%2], base.Add(time.Duration(n/3)*time.Second)) // three posts a second
		insert(t, s, p)
		all = append(all, get(t, s, p.ID))
	}
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	for _, tc := range []store.Filter{
		{},
		{Oldest: true},
		{Since: at(3)},
		{Until: at(3)},
		{Since: at(3), Until: at(7)},
		{Since: at(3), Until: at(7), Oldest: true},
		{Since: at(3).Add(time.Millisecond), Until: at(7).Add(time.Millisecond)},
		{Since: at(20), Oldest: true},
		{Until: at(-1)},
		{Since: at(4), Until: at(4)},
		{UserID: "bob", Since: at(2), Until: at(8), Oldest: true},
		{UserID: "alice", Until: at(5)},
	} {
		for _, limit := range []int{1, 2, 4, 100} {
			f := tc
			f.Limit = limit
			pageAsTheModel(t, s, all, f)
		}
	}
}

// testSearchOfAnyTime searches posts created from the year 1000 to 9000, several in one
// millisecond, in both orders and pages of several sizes, between bounds that fall among them.
func testSearchOfAnyTime(t *testing.T, open Open) {
	s := open(t)
	var all []store.Post
	for n, year := range []int{1000, 1000, 1600, 1690, 1969, 1970, 2026, 2249, 2300, 2300, 9000} {
		p := newPost(100-n, "alice", time.Date(year, 6, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n%3)*time.Millisecond))
		p.Title = fmt.Sprint("edge of the year ", year)
		insert(t, s, p)
		all = append(all, get(t, s, p.ID))
	}
	year := func(y int) time.Time { return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC) }
	for _, tc := range []store.Filter{{}, {Since: year(1500)}, {Until: year(2250)}, {Since: year(1650), Until: year(2500)}, {Since: year(2300)}} {
		for _, oldest := range []bool{false, true} {
			for _, limit := range []int{1, 3, 20} {
				f := tc
				f.Search, f.Oldest, f.Limit = words.Parse("edge year"), oldest, limit
				pageAsTheModel(t, s, all, f)
			}
		}
	}
}
