package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"go.uber.org/zap"
)

// restBodySeeds are request bodies for the fuzz targets of REST body decoding: valid posts and
// patches, and each kind of bad body the tests name.
var restBodySeeds = []string{
	`{"title": "Hello", "body": "First post."}`,
	`{"title": "Hello again", "body": null}`,
	`{"body": null}`,
	`{}`,
	`{"title": {"$ne": null}}`,
	`{"title": "t", "title": "u"}`,
	`{"id": "x", "userId": "mallory", "createdAt": 1}`,
	`{"title": "\ud83d\ude00 \\ud800 \u0000 \u2028"}`,
	`{"title": "\ud800"}`,
	`{"title": "\udc00\ud800"}`,
	`{"\ud83d": 1}`,
	"{\"title\": \"\xff\"}",
	"{\"ti\xc3tle\": \"x\"}",
	"{\"title\": \"x\"}\xa0",
	"\xef\xbb\xbf{\"title\": \"with a BOM\"}",
	`{"title": "x"} {"title": "y"}`,
	`{"title": ` + strings.Repeat("[", 1000) + `}`,
	`{"title": 1e999999}`,
	`[]`, `null`, `"title"`, `{`, ``, `   `,
}

// checkRefusal checks that err, written by the API, is a 4xx whose body is {"error": "..."}.
func checkRefusal(t *testing.T, a *API, err error) {
	t.Helper()
	w := httptest.NewRecorder()
	a.answer.Fail(w, httptest.NewRequest(http.MethodPost, "/posts", nil), err)
	var body map[string]string
	if w.Code < 400 || w.Code > 499 || json.Unmarshal(w.Body.Bytes(), &body) != nil || len(body) != 1 || body["error"] == "" {
		t.Fatalf("refused with %d %s; want a 4xx and {\"error\": \"...\"} (%v)", w.Code, w.Body, err)
	}
}

// checkText checks a string read from body: valid UTF-8, and U+FFFD only where body spells it.
func checkText(t *testing.T, body []byte, what, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("%s %q is not valid UTF-8", what, s)
	}
	if strings.ContainsRune(s, utf8.RuneError) && !bytes.ContainsRune(body, utf8.RuneError) && !bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`)) {
		t.Fatalf("%s %q holds U+FFFD, which the body %q does not", what, s, body)
	}
}

// FuzzReadObject reads hostile bodies as POST and PATCH do, with the media type and size
// checks: no panic, a refusal is a 4xx with {"error"}, allocation stays within a multiple of
// the limit, and what is read is one JSON object of distinct, valid UTF-8 members.
func FuzzReadObject(f *testing.F) {
	for _, seed := range restBodySeeds {
		f.Add([]byte(seed))
	}
	const limit = 4 << 10
	a := New(Config{MaxBodySize: limit, Logger: zap.NewNop()})
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/posts", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		members, err := a.readObject(httptest.NewRecorder(), r, "application/json")
		runtime.ReadMemStats(&after)
		// Reading, the decoder's buffer, the raw values and the names each copy the body
		// at most about twice; the rest is a few small structures.
		if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 32*uint64(min(len(body), limit+1))+64<<10 {
			t.Fatalf("%d bytes allocated for a body of %d", allocated, len(body))
		}
		if err != nil {
			checkRefusal(t, a, err)
			return
		}
		if len(body) > limit {
			t.Fatalf("a body of %d bytes was read; the limit is %d", len(body), limit)
		}
		seen := map[string]bool{}
		for _, m := range members {
			checkText(t, body, "the member name", m.name)
			if seen[m.name] {
				t.Fatalf("member %q read twice", m.name)
			}
			seen[m.name] = true
			if !json.Valid(m.value) || !utf8.Valid(m.value) {
				t.Fatalf("member %q has the value %q, not one valid JSON value", m.name, m.value)
			}
		}
	})
}

// FuzzDecodePost decodes hostile bodies into the input of a POST (newPost) and of a PATCH
// (changes): no panic, a refusal is a 4xx with {"error"}, and every string read is valid
// UTF-8 with no U+FFFD the body does not spell.
func FuzzDecodePost(f *testing.F) {
	for _, seed := range restBodySeeds {
		f.Add(seed)
	}
	a := New(Config{Logger: zap.NewNop()})
	f.Fuzz(func(t *testing.T, body string) {
		members, err := parseObject([]byte(body))
		if err != nil {
			checkRefusal(t, a, err)
			return
		}
		in, err := newPost(members)
		if err != nil {
			checkRefusal(t, a, err)
		} else {
			checkText(t, []byte(body), "the title", in.Title)
			if in.Body != nil {
				checkText(t, []byte(body), "the body", *in.Body)
			}
		}
		ch, err := changes(members)
		if err != nil {
			checkRefusal(t, a, err)
			return
		}
		for name, c := range map[string]struct {
			set   bool
			value *string
		}{"title": {ch.Title.Set, ch.Title.Value}, "body": {ch.Body.Set, ch.Body.Value}} {
			if c.value != nil {
				if !c.set {
					t.Fatalf("%s has a value but is not set", name)
				}
				checkText(t, []byte(body), name, *c.value)
			}
		}
	})
}

// FuzzSplitObject checks parseObject's way without a decoder against the decoder's: wherever
// splitObject reads a body, decodeObject reads the same members, names and raw values, in the
// same order; and a string member read by stringOrNull is what encoding/json decodes.
func FuzzSplitObject(f *testing.F) {
	for _, seed := range append(restBodySeeds,
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
			return // parseObject refuses it before either reads it
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
			if m.name != decoded[i].name || !bytes.Equal(m.value, decoded[i].value) {
				t.Fatalf("member %d of %q: splitObject %q=%q, decodeObject %q=%q", i, body, m.name, m.value, decoded[i].name, decoded[i].value)
			}
			var want *string
			if err := json.Unmarshal(m.value, &want); err != nil {
				continue // not a string or null: stringOrNull refuses it either way
			}
			got, err := stringOrNull(m)
			if err != nil || (got == nil) != (want == nil) || got != nil && *got != *want {
				t.Fatalf("stringOrNull(%q) = %v, %v; encoding/json decodes %v", m.value, got, err, want)
			}
		}
	})
}
