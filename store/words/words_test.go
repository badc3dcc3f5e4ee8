package words_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/postsedge/caddy-posts/store/words"
)

func TestOf(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"Hello, World! hello", []string{"hello", "world"}},
		{"Ünïcödé TEXT", []string{"unicode", "text"}},
		{"Straße STRASSE", []string{"strasse"}},
		{"İstanbul ıi", []string{"istanbul", "ii"}},
		{"ΣΊΣΥΦΟΣ σίσυφος", []string{"σισυφοσ"}},
		{"don't l'avion", []string{"don", "t", "l", "avion"}},
		{"caddy-posts v2.11", []string{"caddy", "posts", "v2", "11"}},
		{"https://caddyserver.com/docs?x=1 me@example.org", []string{"https", "caddyserver", "com", "docs", "x", "1", "me", "example", "org"}},
		{"🎉 party 🎉🎉", []string{"party"}},
		{"ＡＢＣ ﬁle x²", []string{"abc", "file", "x2"}},
		{"東京タワーへ", []string{"東", "京", "タ", "ワ", "ー", "へ"}},
		{"안녕하세요 세계", []string{"안녕하세요", "세계"}},
		{norm.NFD.String("서울의 날씨"), []string{"서울의", "날씨"}}, // its letters written apart

		{"Привет МИР", []string{"привет", "мир"}},
		{"नमस्ते", []string{"नमसत"}},
		{"", nil},
		{"  \t\n ...", nil},
	} {
		slices.Sort(c.want) // Of returns them sorted
		if got := words.Of(c.text); !slices.Equal(got, c.want) {
			t.Errorf("Of(%q) = %q; want %q", c.text, got, c.want)
		}
	}
}

func TestOfCutsALongRunAtACharactersBoundary(t *testing.T) {
	for _, run := range []string{strings.Repeat("x", 50_000), strings.Repeat("é", 100), "a" + strings.Repeat("ж", 40)} {
		got := words.Of(run)
		if len(got) != 1 || len(got[0]) > words.MaxBytes || len(got[0]) < words.MaxBytes-3 || !utf8.ValidString(got[0]) {
			t.Errorf("Of(%.20q…) = %q; want one word of %d bytes at most, valid", run, got, words.MaxBytes)
		}
		if !words.Parse(run).Match(got) {
			t.Errorf("the run %.20q… does not find itself", run)
		}
	}
}

// A post is found by its first MaxWords distinct words, and no more.
func TestOfKeepsTheFirstMaxWords(t *testing.T) {
	var text strings.Builder
	for i := range words.MaxWords + 10 {
		fmt.Fprintf(&text, "w%d ", i)
	}
	got := words.Of(text.String())
	if len(got) != words.MaxWords {
		t.Fatalf("Of kept %d words; want %d", len(got), words.MaxWords)
	}
	last, over := fmt.Sprint("w", words.MaxWords-1), fmt.Sprint("w", words.MaxWords)
	if !words.Parse(last+" w0").Match(got) || words.Parse(over+" w0").Match(got) {
		t.Errorf("the words kept are not the first %d", words.MaxWords)
	}
}

// The last word of a query is a prefix up to MaxPrefix characters, and a whole word past them.
func TestALongLastWordIsWhole(t *testing.T) {
	long := strings.Repeat("x", words.MaxPrefix)
	post := words.Of(long + "a " + long + "bc")
	for _, c := range []struct {
		q     string
		match bool
	}{
		{long, true},        // MaxPrefix characters: a prefix of both
		{long + "a", true},  // longer: the whole word
		{long + "b", false}, // longer, and no word is it
		{long + "bc", true},
	} {
		if got := words.Parse(c.q).Match(post); got != c.match {
			t.Errorf("Parse(%d characters).Match = %v; want %v", utf8.RuneCountInString(c.q), got, c.match)
		}
	}
}

func TestQuery(t *testing.T) {
	post := words.Of("The edge of Caddy: posts, GraphQL and live subscriptions")
	for _, c := range []struct {
		q     string
		match bool
	}{
		{"edge", true},
		{"edg", true}, // the last word is a prefix
		{"EDGE caddy", true},
		{"ed caddy", false}, // only the last word is a prefix
		{"caddy ed", true},
		{"graphql subscriptions", true},
		{"graphql websocket", false},
		{"\"edge\" AND NOT caddy*", false}, // syntax is text: "and" and "not" are words it lacks
		{"edge -caddy", true},              // "-" separates, it does not exclude
		{"", true},
	} {
		if got := words.Parse(c.q).Match(post); got != c.match {
			t.Errorf("Parse(%q).Match = %v; want %v", c.q, got, c.match)
		}
	}
}

func TestParse(t *testing.T) {
	q := words.Parse("Edge caddy EDGE ca")
	if !slices.Equal(q.Words, []string{"caddy", "edge", "ca"}) || q.Prefix() != "ca" || !slices.Equal(q.Whole(), []string{"caddy", "edge"}) {
		t.Errorf("Parse = %q, whole %q, prefix %q", q.Words, q.Whole(), q.Prefix())
	}
	for _, text := range []string{"", "🎉 ... ---", "\u0301"} {
		if q := words.Parse(text); !q.Empty() || q.Prefix() != "" || len(q.Whole()) != 0 {
			t.Errorf("Parse(%q) = %q; want no word", text, q.Words)
		}
	}
}

// FuzzWords checks the rules every search depends on, for any text: each word is
// non-empty, valid, at most MaxBytes and its own only word, so a query of it finds it; and
// a post is found by a query of its own text.
func FuzzWords(f *testing.F) {
	for _, s := range []string{"Hello, World", "Straße", "東京タワー", "İı", "ﬁ²", strings.Repeat("é", 70), "a\u0301b", "ǅ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) || len(text) > 4096 {
			return // Match compares each word of a query with each of a post's: queries are short
		}
		ws := words.Of(text)
		for _, w := range ws {
			if w == "" || len(w) > words.MaxBytes || !utf8.ValidString(w) {
				t.Fatalf("Of(%q) has the word %q", text, w)
			}
			if again := words.Of(w); !slices.Equal(again, []string{w}) {
				t.Fatalf("Of(%q) has %q, whose words are %q", text, w, again)
			}
		}
		if !words.Parse(text).Match(ws) {
			t.Fatalf("Of(%q) = %q is not found by its own text (%q)", text, ws, words.Parse(text).Words)
		}
	})
}

// BenchmarkOf measures the words of a large post's body: what a write pays for its index.
func BenchmarkOf(b *testing.B) {
	for _, c := range []struct{ name, body string }{
		{"ascii-40KB", strings.Repeat("The edge serves posts, GraphQL and live subscriptions. ", 40_000/55)},
		{"mixed-40KB", strings.Repeat("Ünïcödé Straße 東京 привет мир caddy-posts ", 40_000/60)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				words.Of("a title", c.body)
			}
		})
	}
}
