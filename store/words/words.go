// Package words is the one tokenizer of the posts' search: the words a post is found by and
// those of a query, by the same rules for both stores and for live subscriptions, so that the
// same query finds the same posts wherever it runs.
//
// A word is a run of letters and digits of any script, after Unicode's compatibility
// decomposition (the ligature "ﬁ" is "fi", a full-width "Ａ" is "a", "²" is "2"), with its
// diacritics removed ("Ünïcödé" is "unicode") and its case folded: each letter is the lower
// case of its upper case ("ΣΊΣΥΦΟΣ" and "σίσυφος" are one word, Turkish "ı" is "i"), and "ß"
// is "ss" ("Straße" is "strasse").
// Everything else separates words:
//   - apostrophes and hyphens: "don't" is "don" and "t", "l'avion" is "l" and "avion",
//     "caddy-posts" is "caddy" and "posts";
//   - URLs and e-mail addresses are their parts: "https://caddyserver.com/docs" is "https",
//     "caddyserver", "com" and "docs";
//   - emoji and other symbols are nothing: a query of them alone has no word.
//
// Korean is found in its syllables, however its letters were written (composed or apart).
// Chinese and Japanese are written without spaces: each Han ideograph, Hiragana and Katakana
// character is a word of its own, so a query of several finds the posts that hold each of them,
// wherever they are. Korean (Hangul), whose words are spaced, and every other script are runs
// as above; a script written without spaces whose characters are not one word each (Thai, say)
// is found by the run a query starts, through its last word's prefix.
//
// A word is at most MaxBytes long: a longer run is cut there (at a character's boundary), in a
// post and in a query alike, so that a 50,000-character run is indexed as its first MaxBytes.
// A post is found by its first MaxWords distinct words, which bounds what one write indexes.
// The last word of a query is a prefix when it has at most MaxPrefix characters, and a whole
// word when it has more: the index keeps the prefixes up to that length.
package words

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

const (
	// MaxBytes is the longest a word is, in bytes of UTF-8: a longer run is cut.
	MaxBytes = 64
	// MaxWords is how many distinct words of a post it is found by: those that come first.
	MaxWords = 4096
	// MaxPrefix is the longest, in characters, that the last word of a query is a prefix: a
	// longer one is a whole word.
	MaxPrefix = 31
)

// Of returns the distinct words of texts (a post's title and body), the first MaxWords of them,
// in ascending byte order, as Query.Match takes them.
func Of(texts ...string) []string {
	var words []string
	seen := make(map[string]struct{})
	for _, text := range texts {
		split(text, func(w []byte) {
			if _, ok := seen[string(w)]; !ok && len(words) < MaxWords {
				word := string(w)
				seen[word] = struct{}{}
				words = append(words, word)
			}
		})
	}
	slices.Sort(words)
	return words
}

// Query is what a search asks for: posts whose words hold each of Words, the last as a prefix
// of one (search as you type: "edg" finds "edge").
type Query struct {
	Words []string
}

// Parse returns the query of q: its words, as Of finds them, in their order; a word that comes
// again is kept once, where it last comes (so that the last word stays the prefix).
func Parse(q string) Query {
	var all []string
	split(q, func(w []byte) { all = append(all, string(w)) })
	// Kept where each last comes: the words read from the end, reversed.
	var words []string
	seen := make(map[string]struct{}, len(all))
	for _, w := range slices.Backward(all) {
		if _, ok := seen[w]; !ok {
			seen[w] = struct{}{}
			words = append(words, w)
		}
	}
	slices.Reverse(words)
	return Query{Words: words}
}

// Empty says whether q has no word: the text it was parsed from had no letter or digit.
func (q Query) Empty() bool { return len(q.Words) == 0 }

// Whole returns the words that must each be one of a post's: all but the last, and the last
// too when it is longer than MaxPrefix characters.
func (q Query) Whole() []string {
	if q.Prefix() == "" {
		return q.Words
	}
	return q.Words[:len(q.Words)-1]
}

// Prefix is the last word, which a post's word must begin with; "" for an empty query, and for
// a last word longer than MaxPrefix characters, which is whole.
func (q Query) Prefix() string {
	if q.Empty() {
		return ""
	}
	last := q.Words[len(q.Words)-1]
	if utf8.RuneCountInString(last) > MaxPrefix {
		return ""
	}
	return last
}

// Match says whether a post whose words are words, as Of returns them (sorted), is found by q:
// each of Whole is one of them, and Prefix begins one. An empty query matches every post. It
// costs a binary search of words for each word of q.
func (q Query) Match(words []string) bool {
	for _, w := range q.Whole() {
		if _, found := slices.BinarySearch(words, w); !found {
			return false
		}
	}
	if p := q.Prefix(); p != "" {
		i, _ := slices.BinarySearch(words, p)
		return i < len(words) && strings.HasPrefix(words[i], p)
	}
	return true
}

// split calls word with each word of text, in order: the bytes are word's until it returns.
// Each character is decomposed as NFKD does, one at a time (a diacritic is a character of its
// own then, and removed), and folded; text of ASCII only takes none of those steps' tables.
func split(text string, word func([]byte)) {
	if strings.ContainsFunc(text, jamo) {
		// Hangul stays in syllables, which the decomposition of one character at a time leaves
		// whole: letters written apart (as some systems write them) are composed first.
		text = norm.NFC.String(text)
	}
	var w []byte // the word under way
	flush := func() {
		if len(w) > 0 {
			word(cut(w))
			w = w[:0]
		}
	}
	add := func(r rune) {
		switch {
		case r < utf8.RuneSelf:
			switch c := byte(r); {
			case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
				w = append(w, c)
			case 'A' <= c && c <= 'Z':
				w = append(w, c+'a'-'A')
			default:
				flush()
			}
		case unicode.In(r, unicode.Mn, unicode.Me):
			// A diacritic, decomposed from its letter: removed.
		case r == 'ß' || r == 'ẞ':
			w = append(w, "ss"...) // the one full case folding that the decomposition leaves
		case alone(r):
			flush()
			word(utf8.AppendRune(w, r))
		case unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mc, r):
			w = utf8.AppendRune(w, unicode.ToLower(unicode.ToUpper(r)))
		default:
			flush()
		}
	}
	for i := 0; i < len(text); {
		if c := text[i]; c < utf8.RuneSelf {
			add(rune(c))
			i++
			continue
		}
		props := norm.NFKD.PropertiesString(text[i:])
		size := max(props.Size(), 1)
		decomposed := props.Decomposition()
		if decomposed == nil {
			decomposed = []byte(text[i : i+size])
		}
		for _, r := range string(decomposed) {
			add(r)
		}
		i += size
	}
	flush()
}

// jamo says whether r is a letter of Hangul written apart from its syllable.
func jamo(r rune) bool {
	return 0x1100 <= r && r <= 0x11FF || 0xA960 <= r && r <= 0xA97F || 0xD7B0 <= r && r <= 0xD7FF
}

// alone says whether r is a word of its own: a character of a script written without spaces
// between its words, each of whose characters is a word or a part of one that a reader would
// search for (Han ideographs, Hiragana, Katakana).
func alone(r rune) bool {
	return r >= 0x2E80 && unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana)
}

// cut returns w cut to MaxBytes at a character's boundary.
func cut(w []byte) []byte {
	if len(w) <= MaxBytes {
		return w
	}
	n := MaxBytes
	for n > 0 && !utf8.RuneStart(w[n]) {
		n--
	}
	return w[:n]
}
