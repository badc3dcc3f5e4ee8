package posts

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/words"
)

// legacyCursor is the cursor of p that the releases before search gave: its place, no digest.
func legacyCursor(p Post) string {
	b, _ := cursorEncoding.DecodeString(Cursor(p))
	return cursorEncoding.EncodeToString(b[:keySize])
}

var cursorPost = Post{CreatedAt: time.UnixMilli(1_700_000_000_123).UTC(), ID: "6b011fa03aa928307595aeda"}

func TestCursorHasOneSpelling(t *testing.T) {
	for _, valid := range []string{Cursor(cursorPost), legacyCursor(cursorPost)} {
		last := strings.IndexByte(base64URL, valid[len(valid)-1])
		refused := []struct{ name, cursor string }{
			{"the last character with its unused bits set", valid[:len(valid)-1] + string(base64URL[last|1])},
			{"a newline inside, which base64 would skip", valid[:10] + "\n" + valid[10:len(valid)-1]},
			{"a carriage return in place of a character", valid[:len(valid)-1] + "\r"},
			{"padding in place of the last character", valid[:len(valid)-1] + "="},
			{"a megabyte of base64", strings.Repeat("A", 1<<20)},
		}
		if _, _, ok := (ListQuery{}).cursorOf(valid); !ok {
			t.Fatalf("the valid cursor %q is refused", valid)
		}
		for _, tc := range refused {
			t.Run("a cursor with "+tc.name+" is refused", func(t *testing.T) {
				if k, _, ok := (ListQuery{}).cursorOf(tc.cursor); ok {
					t.Errorf("decoded to %+v; want it refused", k)
				}
			})
		}
	}
	t.Run("a cursor of the wrong length costs no allocation", func(t *testing.T) {
		long := strings.Repeat("A", 1<<20)
		if n := testing.AllocsPerRun(10, func() { (ListQuery{}).cursorOf(long) }); n != 0 {
			t.Errorf("%v allocations; want 0", n)
		}
	})
}

// A cursor belongs to its list: the same list (its search's words compared, not their case)
// takes it, and any other sort, user, search or time range refuses it. A cursor without a
// digest, of the releases before search, is taken for the lists they had alone.
func TestACursorIsOfItsList(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lists := []ListQuery{
		{},
		{Oldest: true},
		{UserID: "alice"},
		{Search: words.Parse("edge")},
		{Search: words.Parse("edge caddy")},
		{Since: since},
		{Until: since},
		{Since: since, Until: since.Add(time.Hour)},
		{Since: since.Add(time.Millisecond)},
	}
	for i, q := range lists {
		cursor := q.Cursor(cursorPost)
		for j, other := range lists {
			k, ofAnother, ok := other.cursorOf(cursor)
			if !ok || ofAnother != (i != j) {
				t.Errorf("a cursor of list %d read by list %d: ok %v, of another %v; want ok, of another %v", i, j, ok, ofAnother, i != j)
			}
			if ok && (k.ID != cursorPost.ID || !k.CreatedAt.Equal(cursorPost.CreatedAt)) {
				t.Errorf("a cursor of list %d read by list %d gives %+v", i, j, k)
			}
		}
		if _, ofAnother, ok := q.cursorOf(legacyCursor(cursorPost)); !ok || ofAnother != !q.legacy() {
			t.Errorf("a cursor of an earlier release read by list %d: ok %v, of another %v", i, ok, ofAnother)
		}
	}
	same := ListQuery{Search: words.Parse("EDGE Caddy"), Limit: 3, After: "x"}
	if _, ofAnother, _ := same.cursorOf(lists[4].Cursor(cursorPost)); ofAnother {
		t.Error("a search in other cases, with another limit, refuses the cursor of its list")
	}
	sub := ListQuery{Since: since.Add(time.Microsecond)} // the same list: times are kept to the millisecond, rounded up
	if _, ofAnother, _ := sub.cursorOf(lists[8].Cursor(cursorPost)); ofAnother {
		t.Error("a since within the millisecond refuses the cursor of its list")
	}
}

// base64URL is the alphabet of cursors, in the order of the values of its characters.
const base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// FuzzCursor feeds strings to the cursor decoder: it never panics, and a string it accepts is
// the cursor of what it decodes to, so each place in the list has one cursor.
func FuzzCursor(f *testing.F) {
	for _, seed := range []string{
		Cursor(cursorPost),
		legacyCursor(cursorPost),
		Cursor(Post{CreatedAt: time.UnixMilli(0).UTC(), ID: strings.Repeat("0", 24)}),
		Cursor(Post{CreatedAt: time.UnixMilli(-1).UTC(), ID: strings.Repeat("f", 24)}),
		base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat("\xff", cursorSize))),
		base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat("\x80", keySize))),
		base64.URLEncoding.EncodeToString(make([]byte, cursorSize)),
		base64.RawStdEncoding.EncodeToString([]byte(strings.Repeat("\xfb", cursorSize))),
		strings.Repeat("A", 26) + "B",
		strings.Repeat("A", 26) + "\n",
		strings.Repeat("A", 38),
		"", "=", "not a cursor!", "6b011fa03aa928307595aeda",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, ofAnother, ok := (ListQuery{}).cursorOf(s)
		if !ok || ofAnother {
			return
		}
		if !store.ValidID(k.ID) || k.CreatedAt.Location() != time.UTC {
			t.Fatalf("decoded %q to %+v: not a stored id, or not in UTC", s, k)
		}
		p := Post{ID: k.ID, CreatedAt: k.CreatedAt}
		if back := Cursor(p); back != s && legacyCursor(p) != s {
			t.Fatalf("%q decodes to %+v, whose cursor is %q", s, k, back)
		}
	})
}
