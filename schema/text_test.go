package schema_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/schema"
)

func TestHalfSurrogatesAreRefusedNotReadAsReplacementCharacters(t *testing.T) {
	s := newSchema(t)
	for _, tt := range []struct {
		name, query string
		refused     bool
	}{
		{"a high half alone in a string", `{posts(after:"a\uD800b"){id}}`, true},
		{"a low half alone in a string", `{posts(after:"\udc00"){id}}`, true},
		{"a high half before another high half", `{posts(after:"\uD83D\uD83D"){id}}`, true},
		{"a pair in a string", `{posts(after:"\uD83D\uDE00"){id}}`, false},
		{"an escaped backslash before u", `{posts(after:"\\uD800"){id}}`, false},
		{`the text \uD800 in a block string`, `{posts(after:"""\uD800"""){id}}`, false},
		{`the text \uD800 in a comment`, "# \\uD800\n{posts{id}}", false},
		{"a half after an escaped quote", `{posts(after:"\"\uD800"){id}}`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, refusal := s.Prepare(schema.Request{Query: tt.query})
			switch {
			case tt.refused && (refusal == nil || refusal.Extensions["code"] != errcode.ParseFailed.GraphQL):
				t.Errorf("got %v; want %s", refusal, errcode.ParseFailed.GraphQL)
			case !tt.refused && refusal != nil:
				t.Errorf("refused: %v", refusal)
			}
		})
	}
	if i := schema.HalfSurrogate([]byte(`{"a":"\ud800"}`)); i != 6 {
		t.Errorf("HalfSurrogate of JSON = %d; want 6", i)
	}
}

// FuzzJSONStringSizeIsWhatEncodingJSONWrites checks JSONStringSize and AppendJSONString against
// encoding/json, with and without its escape of HTML, on any bytes: invalid UTF-8 included.
func FuzzJSONStringSizeIsWhatEncodingJSONWrites(f *testing.F) {
	for _, s := range []string{"", "plain", `"\<>&` + "\b\f\n\r\t\x00\x1f\x7f", "é\u2028\u2029😀", "\xff\xc3(\xed\xa0\x80", strings.Repeat("x", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, escapeHTML := range []bool{false, true} {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(escapeHTML)
			if err := enc.Encode(s); err != nil {
				t.Fatal(err)
			}
			written := bytes.TrimSuffix(want.Bytes(), []byte("\n"))
			if got := schema.JSONStringSize(s, escapeHTML); got != len(written) {
				t.Errorf("JSONStringSize(%q, %v) = %d; encoding/json writes %d bytes: %s", s, escapeHTML, got, len(written), written)
			}
			if got := schema.AppendJSONString(nil, s, escapeHTML); !bytes.Equal(got, written) {
				t.Errorf("AppendJSONString(%q, %v) = %s; encoding/json writes %s", s, escapeHTML, got, written)
			}
		}
	})
}

// BenchmarkJSONStringSize measures a 40,000-byte body of plain text, as every subscription's
// budget does for each event that carries one, with encoding/json's writing of it beside.
func BenchmarkJSONStringSize(b *testing.B) {
	body := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40_000/45)
	b.Run("JSONStringSize", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			schema.JSONStringSize(body, true)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			_, _ = json.Marshal(body)
		}
	})
}
