package request

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
)

func TestIdempotencyKeySyntax(t *testing.T) {
	long := strings.Repeat("k", 255)
	valid := []struct{ name, header, key string }{
		{"a bare key, as Stripe takes it", "8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{"a quoted string, as the IETF draft writes it", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{"a quoted string with spaces and escapes", `"a \"b\" \\ c"`, `a "b" \ c`},
		{"white space around the value", " \tk1 \t", "k1"},
		{"a key of 255 characters", long, long},
		{"a quoted key of 255 characters", `"` + long + `"`, long},
	}
	for _, tc := range valid {
		t.Run(tc.name+" is read", func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/posts", nil)
			r.Header.Set(answer.IdempotencyKeyHeader, tc.header)
			if key, ok, err := IdempotencyKey(r); key != tc.key || !ok || err != nil {
				t.Errorf("got %q, %v, %v; want %q", key, ok, err, tc.key)
			}
		})
	}
	invalid := []struct{ name, header string }{
		{"an empty value", ""},
		{"an empty quoted string", `""`},
		{"a key of 256 characters", long + "k"},
		{"a bare key with a space", "a b"},
		{"a key with a control character", "a\x01b"},
		{"a quoted key with a tab", "\"a\tb\""},
		{"a key that is not ASCII", "clé"},
		{"a quoted string without its end", `"abc`},
		{"a quoted string with parameters", `"abc";p=1`},
		{"a list of two keys", `"a", "b"`},
		{"an escape of anything but a quote or a backslash", `"a\nb"`},
	}
	for _, tc := range invalid {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/posts", nil)
			r.Header.Set(answer.IdempotencyKeyHeader, tc.header)
			if key, ok, err := IdempotencyKey(r); !ok || err == nil || errcode.Of(err).Code != errcode.BadIdempotencyKey {
				t.Errorf("got %q, %v, %v; want a refusal", key, ok, err)
			}
		})
	}
	t.Run("a key given twice is refused", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodPost, "/posts", nil)
		r.Header.Add(answer.IdempotencyKeyHeader, "a")
		r.Header.Add(answer.IdempotencyKeyHeader, "a")
		if _, ok, err := IdempotencyKey(r); !ok || err == nil {
			t.Errorf("got %v, %v; want a refusal", ok, err)
		}
	})
	t.Run("no key is none", func(t *testing.T) {
		if key, ok, err := IdempotencyKey(httptest.NewRequest(http.MethodPost, "/posts", nil)); key != "" || ok || err != nil {
			t.Errorf("got %q, %v, %v", key, ok, err)
		}
	})
}
