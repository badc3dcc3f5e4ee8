package sqlite_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
	"github.com/postsedge/caddy-posts/store/words"
)

// FuzzSearchIsPlainText searches a few posts, whose words include FTS5's operators, for any
// text: FTS5 never reads it as its syntax (no query fails, none is an operator), and each finds
// what words.Query.Match finds.
func FuzzSearchIsPlainText(f *testing.F) {
	for _, seed := range []string{
		`"`, `""`, `"unterminated`, `*`, `edge*`, `-edge`, `^edge`, `title:edge`, `words:edge`, `(edge)`, `edge)`,
		`NEAR(edge caddy)`, `NEAR(edge caddy, 2)`, `edge AND caddy`, `edge OR proxy`, `NOT proxy`, `edge NOT proxy`,
		`and`, `OR`, `not near`, `{words}: edge`, `+edge`, `edge + caddy`, `·`, `·616c696365`, `\x00edge`, `é`, "日本",
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	s, err := sqlite.Open(dir, sqlite.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	texts := []string{"Edge and caddy", "not near the proxy", "OR words title", "日本の edge", "AND NOT NEAR", "alice's edges"}
	var all []store.Post
	for i, text := range texts {
		p := store.Post{ID: store.NewID(base), UserID: "alice", Title: text, CreatedAt: base.Add(time.Duration(i) * time.Second), UpdatedAt: base}
		if _, err := s.InsertPost(f.Context(), p); err != nil {
			f.Fatal(err)
		}
		all = append(all, p)
	}
	slices.Reverse(all) // newest first
	f.Fuzz(func(t *testing.T, q string) {
		query := words.Parse(q)
		if query.Empty() {
			return
		}
		for _, user := range []string{"", "alice", `"bob" OR *`} {
			found, err := s.ListPosts(t.Context(), store.Filter{UserID: user, Search: query, Limit: 10})
			if err != nil {
				t.Fatalf("a search of %q (user %q): %v", q, user, err)
			}
			var want []string
			for _, p := range all {
				if (user == "" || user == p.UserID) && query.Match(words.Of(p.Title)) {
					want = append(want, p.ID)
				}
			}
			var got []string
			for _, p := range found {
				got = append(got, p.ID)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("a search of %q (user %q) found %v; want %v", q, user, got, want)
			}
		}
	})
}

// The index of words keeps every prefix a query may have: 1 to words.MaxPrefix characters.
func TestTheIndexKeepsEveryPrefixAQueryMayHave(t *testing.T) {
	var lengths []string
	for n := 1; n <= words.MaxPrefix; n++ {
		lengths = append(lengths, strconv.Itoa(n))
	}
	if want := "prefix = '" + strings.Join(lengths, " ") + "'"; !strings.Contains(sqlite.Migrations[7], want) {
		t.Errorf("migration 8 does not create post_words with %s", want)
	}
}
