package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/request"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store"
)

func TestParseTags(t *testing.T) {
	valid := []struct {
		name  string
		lines []string
		want  string // the tags, W/ marking weak ones, | between them; * for any
	}{
		{"one strong tag", []string{`"3"`}, `3`},
		{"one weak tag", []string{`W/"3"`}, `W/3`},
		{"a list with spaces and tabs", []string{" \"1\" ,\tW/\"2\" , \"x-y\" "}, `1|W/2|x-y`},
		{"empty elements of a list", []string{`, "1",, "2" ,`}, `1|2`},
		{"a list over several lines", []string{`"1"`, `"2", "3"`}, `1|2|3`},
		{"an empty tag", []string{`""`}, ``},
		{"a tag of other characters, obs-text included", []string{`"a/b=c;é"`}, `a/b=c;é`},
		{"any", []string{" * "}, `*`},
		{"an empty field is an empty list", []string{""}, ``},
	}
	for _, tc := range valid {
		t.Run(tc.name+" is read", func(t *testing.T) {
			l, err := parseTags("If-Match", tc.lines)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			eachTag(l.lines, func(tag entityTag) bool {
				s := tag.opaque
				if tag.weak {
					s = "W/" + s
				}
				got = append(got, s)
				return true
			})
			text := strings.Join(got, "|")
			if l.any {
				text = "*"
			}
			if text != tc.want {
				t.Errorf("got %q; want %q", text, tc.want)
			}
		})
	}
	malformed := []struct {
		name  string
		lines []string
		why   string
	}{
		{"a tag without quotes", []string{`3`}, "double quotes"},
		{"a weak tag without quotes", []string{`W/3`}, "double quotes"},
		{"a lower-case weak prefix", []string{`w/"3"`}, "double quotes"},
		{"a tag without its closing quote", []string{`"3`}, "closing quote"},
		{"two tags without a comma", []string{`"3" "4"`}, "commas"},
		{"a tag with a space inside", []string{`"a b"`}, "space"},
		{"a tag with a control character", []string{"\"a\x01\""}, "control"},
		{"* in a list", []string{`*, "3"`}, "stands alone"},
		{"* on a second line", []string{`"3"`, `*`}, "stands alone"},
		{"two stars", []string{`**`}, "stands alone"},
	}
	for _, tc := range malformed {
		t.Run(tc.name+" is malformed", func(t *testing.T) {
			_, err := parseTags("If-Match", tc.lines)
			if err == nil || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "If-Match must be") {
				t.Errorf("error = %v; want one that says %q", err, tc.why)
			}
		})
	}
	t.Run("an absent field is not present", func(t *testing.T) {
		if l, err := parseTags("If-Match", nil); l.present || err != nil {
			t.Errorf("got %+v, %v", l, err)
		}
	})
}

func TestChangesTellNullFromAbsent(t *testing.T) {
	members, err := request.Parse([]byte(`{"body": null}`))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := changes(members)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Title.Set || !ch.Body.Set || ch.Body.Value != nil {
		t.Errorf("changes = %+v; want title absent and body set to null", ch)
	}
}

func TestListQuery(t *testing.T) {
	h := &Handler{Posts: posts.NewService(posts.Config{})}
	_, q, err := h.listQuery("userId=alice&limit=7&after=abc&q=Edge+caddy&since=2026-11-30T10:00:00Z&until=2026-11-30T12:00:00.5%2B01:00&sort=createdAt", false)
	since, until := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 11, 0, 0, 500_000_000, time.UTC)
	if err != nil || q.UserID != "alice" || q.Limit != 7 || q.After != "abc" || strings.Join(q.Search.Words, " ") != "edge caddy" ||
		!q.Since.Equal(since) || !q.Until.Equal(until) || !q.Oldest {
		t.Errorf("listQuery = %+v, %v", q, err)
	}
	for _, tc := range []struct{ raw, names string }{
		{"limit=", "limit"},
		{"limit=1.5", "limit"},
		{"limit=0", "limit"},
		{"x=1", "x"},
		{"userId=a&userId=b", "userId"},
		{"%zz", "malformed"},
		{"q=" + strings.Repeat("a", posts.MaxSearchBytes+1), "q"},
		{"q=a+b+c+d+e+f+g+h+i", "q"},
		{"q=%22*%22+-+:+%5E+()", "q"},
		{"q=a&q=b", "q"},
		{"since=yesterday", "since"},
		{"until=2026-11-30", "until"},
		{"since=2026-11-30T10:00:00", "since"},
		{"sort=-created_at", "sort"},
		{"sort=newest", "sort"},
		{"sort=createdAt&sort=createdAt", "sort"},
	} {
		t.Run("400 naming "+tc.names+" for "+tc.raw, func(t *testing.T) {
			_, _, err := h.listQuery(tc.raw, false)
			if e := errcode.Of(err); e.Code.Status != 400 || !strings.Contains(e.Message, tc.names) {
				t.Errorf("err = %v; want a 400 that names %s", err, tc.names)
			}
		})
	}
}

func TestPageFitsMeasuresThePageExactly(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	page := []posts.Post{
		{ID: store.NewID(created), UserID: "alice", Title: "plain", Body: new("text"), CreatedAt: created, UpdatedAt: created, Version: 1},
		{ID: store.NewID(created), UserID: "b\"o\\b", Title: "<&> \u2028\u2029 \x00\x1f\x7f\b\f\n\r\t", CreatedAt: created, UpdatedAt: created.Add(time.Hour), Version: 10},
		{ID: store.NewID(created), UserID: "", Title: "stored before UTF-8 was checked: \xff\xc3", Body: new(""), CreatedAt: created, UpdatedAt: created, Version: 999},
		{ID: store.NewID(created), UserID: "x", Title: "far future", Body: new("語🙂é\u0085"), CreatedAt: time.Date(12345, 1, 1, 0, 0, 0, 0, time.UTC), UpdatedAt: created.In(time.FixedZone("UTC+2", 7200)), Version: 1 << 62},
	}
	for n := 1; n <= len(page); n++ {
		t.Run(fmt.Sprintf("a page of %d posts", n), func(t *testing.T) {
			w := httptest.NewRecorder()
			writePage(w, http.StatusOK, page[:n])
			if pageFits(page[:n], int64(w.Body.Len())) != n || n > 1 && pageFits(page[:n], int64(w.Body.Len()-1)) != n-1 {
				t.Errorf("pageFits does not measure the page of %d bytes exactly", w.Body.Len())
			}
		})
	}
}

// FuzzPostSize checks that postSize, by which a page is cut before it is written, is the size
// encoding/json writes, and appendPost the bytes it writes, whatever the strings hold.
func FuzzPostSize(f *testing.F) {
	for _, seed := range []string{"", "plain", "\"\\/", "<>&", "\x00\x01\b\t\n\f\r\x1f\x7f", "\u2028\u2029\u0085", "\xff\xfe\xc3", "\xed\xa0\x80", "é語🙂", "\xf4\x90\x80\x80"} {
		f.Add(seed, seed, true, uint32(len(seed)*1000))
	}
	f.Fuzz(func(t *testing.T, title, body string, withBody bool, version uint32) {
		p := posts.Post{ID: "6b011fa03aa928307595aeda", UserID: title + body, Title: title, CreatedAt: time.UnixMilli(1), UpdatedAt: time.UnixMilli(2),
			Version: 1 + int64(version)}
		if withBody {
			p.Body = &body
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(toJSON(p)); err != nil {
			t.Fatal(err)
		}
		if got, want := postSize(p), b.Len()-1; got != want {
			t.Fatalf("postSize = %d; encoding/json writes %d bytes: %s", got, want, b.Bytes())
		}
		if got := appendPost(nil, p); !bytes.Equal(append(got, '\n'), b.Bytes()) {
			t.Fatalf("appendPost writes %s; encoding/json writes %s", got, b.Bytes())
		}
	})
}
