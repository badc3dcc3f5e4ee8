package schema

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/postsedge/caddy-posts/posts"
)

// The rules of text and its size that JSON and GraphQL share, written once for the handlers and
// the schema.

// JSONStringSize is the length of s as a JSON string, quotes included, as encoding/json writes
// it: control characters escaped, each byte of invalid UTF-8 as \ufffd, U+2028 and U+2029 as
// \u2028, and with escapeHTML (as graphql-go writes every string) <, > and & as \u003c, 6
// bytes for 1. The REST handlers, which do not escape HTML, size their pages with it too.
func JSONStringSize(s string, escapeHTML bool) int {
	extra := &jsonExtra[0]
	if escapeHTML {
		extra = &jsonExtra[1]
	}
	n := len(`""`) + len(s)
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			n += int(extra[c])
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += len(`\ufffd`) - 1
		case r == '\u2028' || r == '\u2029':
			n += len(`\u2028`) - size
		}
		i += size
	}
	return n
}

// jsonExtra is, for each ASCII byte, how many bytes more than one encoding/json writes for it
// in a string: [0] without escapeHTML, [1] with. A table read per byte is what keeps
// JSONStringSize quick on the long bodies that every subscription's budget measures.
var jsonExtra = func() (t [2][utf8.RuneSelf]uint8) {
	for c := range utf8.RuneSelf {
		n := 0
		switch {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			n = len(`\n`) - 1
		case c < 0x20:
			n = len(`\u0000`) - 1
		}
		html := n
		if c == '<' || c == '>' || c == '&' {
			html = len(`\u003c`) - 1
		}
		t[0][c], t[1][c] = uint8(n), uint8(html)
	}
	return t
}()

// AppendJSONString appends s to dst as a JSON string, as encoding/json writes it: the rules
// JSONStringSize counts.
func AppendJSONString(dst []byte, s string, escapeHTML bool) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0 // of the bytes not yet appended
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!escapeHTML || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// TimeSize is the length of t as the API writes a time (posts.TimeFormat, in UTC), quotes left
// out: the REST handlers and the GraphQL budget both size answers with it.
func TimeSize(t time.Time) int {
	t = t.UTC()
	if y := t.Year(); 0 <= y && y <= 9999 {
		return len(posts.TimeFormat) - len("Z07:00") + len("Z") // the zone of UTC is Z
	}
	var b [64]byte
	return len(t.AppendFormat(b[:0], posts.TimeFormat))
}

// HalfSurrogate is the offset of the first \uD800 to \uDFFF escape in the JSON text data that
// is not a high half followed by a low half, or -1. Such an escape encodes no character, and
// encoding/json (like gqlparser) reads it as U+FFFD: text that says it is refused, not changed.
// A backslash outside a string is not JSON, which the decoder reports, so data is not parsed:
// only escapes are read.
func HalfSurrogate[T ~string | ~[]byte](data T) int {
	for i := 0; i < len(data); {
		if data[i] != '\\' {
			i++
			continue
		}
		r, ok := unicodeEscape(data, i)
		if !ok {
			i += 2 // \" or \\ or another escape of one character
			continue
		}
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if low, ok := unicodeEscape(data, i+6); ok && low >= 0xDC00 && low < 0xE000 {
				i += 12
				continue
			}
			return i
		case r >= 0xDC00 && r < 0xE000:
			return i
		}
		i += 6
	}
	return -1
}

// unicodeEscape reads the \uXXXX escape at data[i:], if there is one.
func unicodeEscape[T ~string | ~[]byte](data T, i int) (rune, bool) {
	if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return 0, false
	}
	var r rune
	for j := i + 2; j < i+6; j++ {
		c := data[j]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// halfSurrogateInQuery is HalfSurrogate for the strings of a GraphQL document: the offset of the
// first escape of half a surrogate pair in a string, or -1. A block string takes no escapes but
// \""" (\u in it is text), and a comment none.
func halfSurrogateInQuery(q string) int {
	for i := 0; i < len(q); i++ {
		switch {
		case q[i] == '#':
			for i < len(q) && q[i] != '\n' && q[i] != '\r' {
				i++
			}
		case strings.HasPrefix(q[i:], `"""`):
			j := i + 3
			for j < len(q) && !strings.HasPrefix(q[j:], `"""`) {
				if strings.HasPrefix(q[j:], `\"""`) {
					j += 3
				}
				j++
			}
			i = j + 2
		case q[i] == '"':
			j := i + 1
			for j < len(q) && q[j] != '"' && q[j] != '\n' {
				if q[j] == '\\' {
					j++
				}
				j++
			}
			if k := HalfSurrogate(q[i+1 : min(j, len(q))]); k >= 0 {
				return i + 1 + k
			}
			i = j
		}
	}
	return -1
}
