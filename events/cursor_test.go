package events_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/events"
)

func TestCursors(t *testing.T) {
	mine := events.NewCursors([]byte("0123456789abcdef"))
	other := events.NewCursors([]byte("fedcba9876543210"))
	for _, p := range []int64{1, 2, 1 << 40, 1<<63 - 1} {
		c := mine.Make(p)
		if len(c) != events.CursorLength {
			t.Fatalf("Make(%d) = %q, %d characters, want %d", p, c, len(c), events.CursorLength)
		}
		if got, err := mine.Read(c); err != nil || got != p {
			t.Fatalf("Read(Make(%d)) = %d, %v", p, got, err)
		}
		if _, err := other.Read(c); !errors.Is(err, events.ErrBadCursor) {
			t.Fatalf("another log read %q: %v, want ErrBadCursor", c, err)
		}
	}
	c := mine.Make(42)
	bad := map[string]string{
		"empty":                 "",
		"too short":             c[:len(c)-1],
		"too long":              c + "A",
		"not base64url":         strings.Repeat("*", events.CursorLength),
		"padded":                c[:len(c)-1] + "=",
		"a character changed":   flip(c, 5),
		"the signature changed": flip(c, len(c)-2),
		"the last bits changed": flip(c, len(c)-1),
	}
	for name, cursor := range bad {
		t.Run("a cursor "+name+" is refused", func(t *testing.T) {
			if p, err := mine.Read(cursor); !errors.Is(err, events.ErrBadCursor) {
				t.Fatalf("Read(%q) = %d, %v; want ErrBadCursor", cursor, p, err)
			}
		})
	}
	if _, err := events.NewCursors(nil).Read(c); !errors.Is(err, events.ErrBadCursor) {
		t.Fatalf("cursors with no key read %q: %v", c, err)
	}
}

// flip changes the character at i of s to another of base64url.
func flip(s string, i int) string {
	r := byte('A')
	if s[i] == 'A' {
		r = 'B'
	}
	return s[:i] + string(r) + s[i+1:]
}

// FuzzReadCursor: no input makes Read panic, and whatever it accepts is a cursor that Make
// makes again.
func FuzzReadCursor(f *testing.F) {
	mine := events.NewCursors([]byte("0123456789abcdef"))
	f.Add(mine.Make(1))
	f.Add(mine.Make(1 << 50))
	f.Add("")
	f.Add(strings.Repeat("A", events.CursorLength))
	f.Fuzz(func(t *testing.T, cursor string) {
		p, err := mine.Read(cursor)
		if err == nil && mine.Make(p) != cursor {
			t.Fatalf("Read(%q) accepted position %d, whose cursor is %q", cursor, p, mine.Make(p))
		}
	})
}
