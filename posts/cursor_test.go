package posts

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

func TestCursorHasOneSpelling(t *testing.T) {
	valid := encodeCursor(store.Key{CreatedAt: time.UnixMilli(1_700_000_000_123).UTC(), ID: "6b011fa03aa928307595aeda"})
	last := strings.IndexByte(base64URL, valid[len(valid)-1])
	refused := []struct{ name, cursor string }{
		{"the last character with its unused bits set", valid[:len(valid)-1] + string(base64URL[last|1])},
		{"a newline inside, which base64 would skip", valid[:10] + "\n" + valid[10:len(valid)-1]},
		{"a carriage return in place of a character", valid[:len(valid)-1] + "\r"},
		{"padding in place of the last character", valid[:len(valid)-1] + "="},
		{"a megabyte of base64", strings.Repeat("A", 1<<20)},
	}
	if _, ok := decodeCursor(valid); !ok {
		t.Fatalf("the valid cursor %q is refused", valid)
	}
	for _, tc := range refused {
		t.Run("a cursor with "+tc.name+" is refused", func(t *testing.T) {
			if k, ok := decodeCursor(tc.cursor); ok {
				t.Errorf("decoded to %+v; want it refused", k)
			}
		})
	}
	t.Run("a cursor of the wrong length costs no allocation", func(t *testing.T) {
		long := strings.Repeat("A", 1<<20)
		if n := testing.AllocsPerRun(10, func() { decodeCursor(long) }); n != 0 {
			t.Errorf("%v allocations; want 0", n)
		}
	})
}

// base64URL is the alphabet of cursors, in the order of the values of its characters.
const base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// FuzzCursor feeds strings to the cursor decoder: it never panics, and a string it accepts is
// the cursor of what it decodes to, so each place in the list has one cursor.
func FuzzCursor(f *testing.F) {
	for _, seed := range []string{
		encodeCursor(store.Key{CreatedAt: time.UnixMilli(1_700_000_000_123).UTC(), ID: "6b011fa03aa928307595aeda"}),
		encodeCursor(store.Key{CreatedAt: time.UnixMilli(0).UTC(), ID: strings.Repeat("0", 24)}),
		encodeCursor(store.Key{CreatedAt: time.UnixMilli(-1).UTC(), ID: strings.Repeat("f", 24)}),
		base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat("\xff", cursorSize))),
		base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat("\x80", cursorSize))),
		base64.URLEncoding.EncodeToString(make([]byte, cursorSize)),
		base64.RawStdEncoding.EncodeToString([]byte(strings.Repeat("\xfb", cursorSize))),
		strings.Repeat("A", 26) + "B",
		strings.Repeat("A", 26) + "\n",
		strings.Repeat("A", 28),
		"", "=", "not a cursor!", "6b011fa03aa928307595aeda",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, ok := decodeCursor(s)
		if !ok {
			return
		}
		if !store.ValidID(k.ID) || k.CreatedAt.Location() != time.UTC {
			t.Fatalf("decoded %q to %+v: not a stored id, or not in UTC", s, k)
		}
		if back := encodeCursor(k); back != s {
			t.Fatalf("%q decodes to %+v, which encodes to %q", s, k, back)
		}
		if back := Cursor(Post{ID: k.ID, CreatedAt: k.CreatedAt}); back != s {
			t.Fatalf("Cursor of the post at %+v is %q; want %q", k, back, s)
		}
	})
}
