package auth_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/postsedge/caddy-posts/auth"
)

func TestValidUserID(t *testing.T) {
	accepted := []struct {
		name string
		id   string
	}{
		{"a plain name is accepted", "alice"},
		{"an identity provider's subject with a pipe is accepted", "auth0|5f7c8ec7c33c6c004bbafe82"},
		{"an email address is accepted", "alice@example.com"},
		{"a UUID is accepted", "4b1d3c5e-9a8f-4e2b-8c7d-6f5e4d3c2b1a"},
		{"a name with a space is accepted", "Alice Liddell"},
		{"a name with accents is accepted", "Jöhn Ñúñez"},
		{"a name in CJK is accepted", "山田太郎"},
		{"a name in Arabic script is accepted", "مريم"},
		{"an emoji without joiners is accepted", "alice🐇"},
		{"a character of the private use area is accepted", "alice\ue000"},
		{"a user id of exactly 256 bytes is accepted", strings.Repeat("a", 256)},
		{"a user id of 256 bytes ending in a multi-byte character is accepted", strings.Repeat("a", 253) + "€"},
		{"a single character is accepted", "a"},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			if err := auth.ValidUserID(tc.id); err != nil {
				t.Errorf("ValidUserID(%q) = %v, want nil", tc.id, err)
			}
		})
	}

	refused := []struct {
		name   string
		id     string
		reason string // in the error
	}{
		{"an empty user id is refused", "", "empty"},
		{"a user id of 257 bytes is refused", strings.Repeat("a", 257), "256 bytes"},
		{"a user id of 257 bytes ending in a multi-byte character is refused", strings.Repeat("a", 254) + "€", "256 bytes"},
		{"a user id with a byte that is not UTF-8 is refused", "eve\xff", "UTF-8"},
		{"a user id with a multi-byte character cut short is refused", "eve\xe2\x82", "UTF-8"},
		{"a user id with a surrogate encoded in UTF-8 is refused", "eve\xed\xa0\x80", "UTF-8"},
		{"a user id with an over-long encoding is refused", "eve\xc0\xaf", "UTF-8"},
		{"a user id with U+0001 is refused", "eve\u0001", "control"},
		{"a user id with a NUL is refused", "eve\x00", "control"},
		{"a user id with a TAB is refused", "eve\tx", "control"},
		{"a user id with a newline is refused", "eve\nroot", "control"},
		{"a user id with a carriage return is refused", "eve\rroot", "control"},
		{"a user id with an escape (ANSI sequences) is refused", "eve\x1b[31m", "control"},
		{"a user id with DEL is refused", "eve\x7f", "control"},
		{"a user id with the C1 control NEL (U+0085) is refused", "eve\u0085", "control"},
		{"a user id with the C1 control CSI (U+009B) is refused", "eve\u009b", "control"},
		{"a user id with a zero-width space is refused", "al\u200bice", "invisible"},
		{"a user id with a zero-width non-joiner is refused", "al\u200cice", "invisible"},
		{"a user id with a zero-width joiner is refused", "al\u200dice", "invisible"},
		{"a user id with a word joiner is refused", "al\u2060ice", "invisible"},
		{"a user id with a byte order mark is refused", "\ufeffalice", "invisible"},
		{"a user id with a soft hyphen is refused", "al\u00adice", "invisible"},
		{"a user id with a right-to-left override is refused", "alice\u202etxt.exe", "invisible"},
		{"a user id with a right-to-left isolate is refused", "alice\u2067x", "invisible"},
		{"a user id with a left-to-right mark is refused", "alice\u200e", "invisible"},
		{"a user id with a language tag character is refused", "alice\U000e0001", "invisible"},
		{"a user id with a line separator is refused", "alice\u2028root", "invisible"},
		{"a user id with a paragraph separator is refused", "alice\u2029root", "invisible"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			err := auth.ValidUserID(tc.id)
			if err == nil {
				t.Fatalf("ValidUserID(%q) = nil, want an error", tc.id)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("ValidUserID(%q) = %v, want the reason %q", tc.id, err, tc.reason)
			}
			if tc.id != "" && strings.Contains(err.Error(), tc.id) {
				t.Errorf("the error %q echoes the user id", err)
			}
		})
	}
}

// FuzzValidUserID checks ValidUserID against the rule as its doc states it, written the plain
// way: length, UTF-8, then no rune of the refused categories.
func FuzzValidUserID(f *testing.F) {
	for _, seed := range []string{
		"", "alice", "auth0|123", "eve\u0001", "eve\x00", "eve\x7f", "eve\u0085", "al\u200bice", "\ufeff",
		"a\u202eb", "a\u2028b", "a\u2029b", "\U000e0001", "eve\xff", "eve\xed\xa0\x80", "山田", "alice🐇",
		strings.Repeat("a", 256), strings.Repeat("a", 257), strings.Repeat("a", 254) + "€",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := auth.ValidUserID(id)
		want := id != "" && len(id) <= auth.MaxUserIDBytes && utf8.ValidString(id)
		for _, r := range id {
			if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
				want = false
			}
		}
		if (err == nil) != want {
			t.Fatalf("ValidUserID(%q) = %v, want valid = %v", id, err, want)
		}
		if err != nil && len(id) >= 4 && strings.Contains(err.Error(), id) {
			t.Fatalf("the error %q echoes the user id", err)
		}
	})
}
