package auth

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxUserIDBytes is the longest user id accepted, in bytes.
const MaxUserIDBytes = 256

// The reasons ValidUserID gives. They are fixed sentences: the id itself is never part of them,
// so they may be shown to the client whose token carried it.
var (
	errUserIDEmpty     = errors.New("the user id is empty")
	errUserIDTooLong   = fmt.Errorf("the user id is longer than %d bytes", MaxUserIDBytes)
	errUserIDNotUTF8   = errors.New("the user id is not valid UTF-8")
	errUserIDControl   = errors.New("the user id has a control character")
	errUserIDInvisible = errors.New("the user id has an invisible formatting character")
)

// ValidUserID checks a user id where it enters (a token's user claim, a configured API key, the
// user of an earlier handler): 1 to MaxUserIDBytes bytes of valid UTF-8 without control
// characters (Unicode category Cc) or invisible formatting characters (categories Cf, Zl and
// Zp). Ids are written into posts, logs and GraphQL responses, where a control character breaks
// the line or the marshaller, and an invisible one makes two different ids look the same (a
// zero-width space, a soft hyphen) or shows an id reordered (bidirectional overrides). Ids are
// identifiers, not names: what this refuses (zero-width joiners among them) has no place in one.
// Spaces and unassigned code points are accepted, so that the answer does not change with the
// Unicode version of the Go release. The error names the reason, never the id.
func ValidUserID(id string) error {
	switch {
	case id == "":
		return errUserIDEmpty
	case len(id) > MaxUserIDBytes:
		return errUserIDTooLong
	case !utf8.ValidString(id):
		return errUserIDNotUTF8
	}
	for i := 0; i < len(id); {
		if c := id[i]; c < utf8.RuneSelf { // ASCII, the common case, without a table look-up
			if c < 0x20 || c == 0x7f {
				return errUserIDControl
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(id[i:])
		switch {
		case unicode.Is(unicode.Cc, r):
			return errUserIDControl
		case unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp):
			return errUserIDInvisible
		}
		i += size
	}
	return nil
}
