package posts

import (
	"strings"
	"unicode/utf8"
)

// Limits on the text of a post.
const (
	MaxTitleLength = 300    // characters, after trimming surrounding white space
	MaxBodyLength  = 50_000 // characters
)

// validTitle returns the title as it is stored, trimmed, or an *InvalidError for "title".
func validTitle(title string) (string, error) {
	if !utf8.ValidString(title) {
		return "", invalid("title", "title must be valid UTF-8")
	}
	title = strings.TrimSpace(title)
	if title == "" {
		return "", invalid("title", "title is required and cannot be blank")
	}
	if n := utf8.RuneCountInString(title); n > MaxTitleLength {
		return "", invalid("title", "title must be 1 to %d characters after trimming white space, not %d", MaxTitleLength, n)
	}
	if r, at, found := forbiddenRune(title, true); found {
		if r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029' {
			return "", invalid("title", "title must be one line: it cannot hold the line break U+%04X (character %d)", r, at)
		}
		return "", invalid("title", "title cannot hold the control character U+%04X (character %d); of the controls, only tab is allowed", r, at)
	}
	return title, nil
}

// validBody returns nil for a body that may be stored as it is (nil, no body, included), or an
// *InvalidError for "body".
func validBody(body *string) error {
	if body != nil {
		if !utf8.ValidString(*body) {
			return invalid("body", "body must be valid UTF-8")
		}
		if n := utf8.RuneCountInString(*body); n > MaxBodyLength {
			return invalid("body", "body must be at most %d characters, not %d", MaxBodyLength, n)
		}
		if r, at, found := forbiddenRune(*body, false); found {
			return invalid("body", "body cannot hold the control character U+%04X (character %d); of the controls, only tab, newline and carriage return are allowed", r, at)
		}
	}
	return nil
}

// forbiddenRune finds the first character of s, valid UTF-8, that no text may hold: a C0
// control other than tab, newline and carriage return, DEL, or a C1 control (U+0080 to U+009F).
// Such characters print nothing, or move a terminal's cursor, and are never what a person wrote.
// oneLine also forbids the line breaks: newline, carriage return, U+2028 and U+2029 (NEL,
// U+0085, is a C1 control). at counts characters from 1.
func forbiddenRune(s string, oneLine bool) (r rune, at int, found bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\t':
		case c == '\n' || c == '\r':
			r, found = rune(c), oneLine
		case c < 0x20 || c == 0x7f:
			r, found = rune(c), true
		case c == 0xc2 || c == 0xe2 && oneLine: // the first byte of U+0080 to U+009F; of U+2028 and U+2029
			r, _ = utf8.DecodeRuneInString(s[i:])
			found = 0x80 <= r && r < 0xa0 || r == '\u2028' || r == '\u2029'
		}
		if found {
			return r, utf8.RuneCountInString(s[:i]) + 1, true
		}
	}
	return 0, 0, false
}
