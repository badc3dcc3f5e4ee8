package request

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/handlerstest"
)

func TestParseObject(t *testing.T) {
	t.Run("members come back in order with their raw values", func(t *testing.T) {
		members, err := Parse([]byte(` {"title": "t", "body": null, "n": {"$ne": 1}} `))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range members {
			got = append(got, m.Name+"="+string(m.Value))
		}
		if want := `title="t" body=null n={"$ne": 1}`; strings.Join(got, " ") != want {
			t.Errorf("members = %q; want %q", got, want)
		}
	})
	bad := []struct{ name, body, want string }{
		{"an empty body", "  ", "the body is empty"},
		{"a truncated object", `{"title": `, "not valid JSON"},
		{"a truncated member name", `{"tit`, "not valid JSON"},
		{"a missing colon", `{"title" "x"}`, "not valid JSON"},
		{"a trailing comma", `{"title": "x",}`, "not valid JSON"},
		{"an array", `[]`, "must be a JSON object"},
		{"null", `null`, "must be a JSON object"},
		{"a number", `7`, "must be a JSON object"},
		{"a duplicate member", `{"a": 1, "a": 2}`, `"a" is given more than once`},
		{"a second value after the object", `{} {}`, "nothing after it"},
		{"garbage after the object", `{}x`, "nothing after it"},
		{"a byte that is not UTF-8 in a string", "{\"title\": \"a\xffb\"}", "not valid UTF-8: byte 12 (0xff)"},
		{"a byte that is not UTF-8 in a member name", "{\"tit\xc3le\": \"x\"}", "not valid UTF-8: byte 5 (0xc3)"},
		{"a byte that is not UTF-8 between members", "{\"title\": \"x\",\xa0\"body\": null}", "not valid UTF-8: byte 14 (0xa0)"},
		{"a byte that is not UTF-8 after the object", "{}\x80", "not valid UTF-8: byte 2"},
		{"a UTF-8 sequence cut short", "{\"title\": \"\xe2\x82\"}", "not valid UTF-8"},
		{"an overlong encoding of a slash", "{\"title\": \"\xc0\xaf\"}", "not valid UTF-8"},
		{"a surrogate encoded in UTF-8 bytes", "{\"title\": \"\xed\xa0\x80\"}", "not valid UTF-8"},
		{"a lone high surrogate escape", `{"title": "a\ud83d"}`, `the escape \ud83d at byte 12 is half of a surrogate pair`},
		{"a lone low surrogate escape", `{"title": "\uDE00"}`, `the escape \uDE00 at byte 11`},
		{"a high surrogate escape followed by another", `{"title": "\ud83d\ud83d"}`, "half of a surrogate pair"},
		{"a lone surrogate escape in a member name", `{"\udc00": 1}`, "half of a surrogate pair"},
		{"a lone surrogate escape at the end of the body", `{"title": "\ud800`, "half of a surrogate pair"},
	}
	for _, tt := range bad {
		t.Run("400 for "+tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.body))
			he, ok := errors.AsType[*errcode.Error](err)
			if !ok || he.Code.Status != 400 || !strings.Contains(he.Message, tt.want) {
				t.Errorf("err = %v; want 400 containing %q", err, tt.want)
			}
		})
	}
}

func TestParseObjectKeepsWhatUTF8Spells(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"a surrogate pair escape is one character", `{"t": "\ud83d\ude00"}`, "😀"},
		{"an escaped backslash before u is no escape", `{"t": "\\ud800"}`, `\ud800`},
		{"U+FFFD sent as such is kept", "{\"t\": \"\\ufffd\xef\xbf\xbd\"}", "\ufffd\ufffd"},
		{"characters of every UTF-8 length are kept", "{\"t\": \"a\xc3\xa9\xe8\xaa\x9e\xf0\x9f\x99\x82\"}", "aé語🙂"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			members, err := Parse([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			s, ok := String(members[0].Value)
			if !ok || s != tt.want {
				t.Errorf("decoded %q, %v; want %q", s, ok, tt.want)
			}
		})
	}
}

func TestByteCount(t *testing.T) {
	for n, want := range map[int64]string{1 << 20: "1 MiB", 64 << 10: "64 KiB", 1500: "1500 bytes", 3 << 20: "3 MiB"} {
		if got := byteCount(n); got != want {
			t.Errorf("byteCount(%d) = %q; want %q", n, got, want)
		}
	}
}

// FuzzReadObject reads hostile bodies as POST and PATCH do, with the media type and size
// checks: no panic, a refusal is a 4xx with {"error"}, allocation stays within a multiple of
// the limit, and what is read is one JSON object of distinct, valid UTF-8 members.
func FuzzReadObject(f *testing.F) {
	for _, seed := range handlerstest.BodySeeds {
		f.Add([]byte(seed))
	}
	const limit = 4 << 10
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/posts", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		members, err := Object(httptest.NewRecorder(), r, limit, "application/json")
		runtime.ReadMemStats(&after)
		// Reading, the decoder's buffer, the raw values and the names each copy the body
		// at most about twice; the rest is a few small structures.
		if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 32*uint64(min(len(body), limit+1))+64<<10 {
			t.Fatalf("%d bytes allocated for a body of %d", allocated, len(body))
		}
		if err != nil {
			handlerstest.CheckRefusal(t, err)
			return
		}
		if len(body) > limit {
			t.Fatalf("a body of %d bytes was read; the limit is %d", len(body), limit)
		}
		seen := map[string]bool{}
		for _, m := range members {
			handlerstest.CheckText(t, body, "the member name", m.Name)
			if seen[m.Name] {
				t.Fatalf("member %q read twice", m.Name)
			}
			seen[m.Name] = true
			if !json.Valid(m.Value) || !utf8.Valid(m.Value) {
				t.Fatalf("member %q has the value %q, not one valid JSON value", m.Name, m.Value)
			}
		}
	})
}

// FuzzSplitObject checks Parse's way without a decoder against the decoder's: wherever
// splitObject reads a body, decodeObject reads the same members, names and raw values, in the
// same order; and a string member read by stringOrNull is what encoding/json decodes.
func FuzzSplitObject(f *testing.F) {
	for _, seed := range append(handlerstest.BodySeeds,
		` { "title" : "a \"quoted\" \\ title" , "body":null,"n":-1.5e+3, "t":true,"f" :false } `,
		`{"a":{"b":[1,{"c":"}]"}],"d":"\\"},"e":[[],{}],"":"empty name"}`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}`,
		"{\"title\":\"\t\"}", `{"tit\u006ce": 1}`, `{"a":"x","a":"y"}`,
	) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		data := []byte(body)
		if !utf8.Valid(data) {
			return // Parse refuses it before either reads it
		}
		split, ok := splitObject(data)
		if !ok {
			return
		}
		decoded, err := decodeObject(data)
		if err != nil {
			t.Fatalf("splitObject read %q, which decodeObject refuses: %v", body, err)
		}
		if len(split) != len(decoded) {
			t.Fatalf("splitObject read %d members of %q, decodeObject %d", len(split), body, len(decoded))
		}
		for i, m := range split {
			if m.Name != decoded[i].Name || !bytes.Equal(m.Value, decoded[i].Value) {
				t.Fatalf("member %d of %q: splitObject %q=%q, decodeObject %q=%q", i, body, m.Name, m.Value, decoded[i].Name, decoded[i].Value)
			}
			var want *string
			if err := json.Unmarshal(m.Value, &want); err != nil {
				continue // not a string or null: String refuses it either way
			}
			if got, ok := String(m.Value); want != nil && (!ok || got != *want) {
				t.Fatalf("String(%q) = %q, %v; encoding/json decodes %q", m.Value, got, ok, *want)
			}
		}
	})
}
