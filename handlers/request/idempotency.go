// The Idempotency-Key header (the IETF httpapi draft, as Stripe and others use it): what it may
// hold, and the requests that may not carry one. The creates it makes safe to retry are REST's
// and GraphQL's; posts.Service.CreateOnce and RunOnce keep the rule.

package request

import (
	"net/http"
	"strings"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
)

const (
	// maxKeyLength is the longest key, Stripe's bound.
	maxKeyLength = 255
)

var errKeySyntax = errcode.New(errcode.BadIdempotencyKey,
	`Idempotency-Key must be 1 to 255 printable ASCII characters, bare (as Stripe takes it) or as a quoted string ("...", as the IETF draft writes it)`)

// IdempotencyKey reads the Idempotency-Key of r; ok is false when r has none. The value is a
// Structured Field string, "..." with \" and \\ as its only escapes, or the bare key; either way
// the key is 1 to 255 characters of printable ASCII (a bare one without spaces), and "k" is the
// same key as k.
func IdempotencyKey(r *http.Request) (key string, ok bool, err error) {
	values := r.Header.Values(answer.IdempotencyKeyHeader)
	switch {
	case len(values) == 0:
		return "", false, nil
	case len(values) > 1:
		return "", true, errcode.New(errcode.BadIdempotencyKey, "Idempotency-Key is given more than once; send one key")
	}
	v := strings.Trim(values[0], " \t")
	if strings.HasPrefix(v, `"`) {
		key, ok = unquote(v)
	} else {
		key, ok = v, strings.IndexFunc(v, func(c rune) bool { return c < 0x21 || c > 0x7e }) < 0
	}
	if !ok || len(key) == 0 || len(key) > maxKeyLength {
		return "", true, errKeySyntax
	}
	return key, true, nil
}

// unquote reads a Structured Field string (RFC 9651 §3.3.3) that is the whole of v.
func unquote(v string) (string, bool) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' && i+1 < len(v) && (v[i+1] == '"' || v[i+1] == '\\'):
			i++
			b.WriteByte(v[i])
		case c == '"':
			return b.String(), i == len(v)-1 // nothing may follow, parameters included
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return "", false // no closing quote
}

// RefuseIdempotencyKey refuses r if it carries an Idempotency-Key: a write the key cannot make
// safe to retry, whose client must not believe it can.
func RefuseIdempotencyKey(r *http.Request, what string) error {
	if r.Header[answer.IdempotencyKeyHeader] == nil {
		return nil
	}
	return errcode.New(errcode.BadIdempotencyKey, "Idempotency-Key makes a create safe to retry (POST /posts, or a GraphQL mutation of one createPost); "+
		what+" does not take one: send it without")
}
