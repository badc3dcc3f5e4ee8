// The Idempotency-Key header (the IETF httpapi draft, as Stripe and others use it): what it may
// hold, the creates it makes safe to retry (POST /posts, and a GraphQL mutation of one
// createPost), and the answers kept and sent again. posts.Service.CreateOnce and RunOnce keep
// the rule.

package handlers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

const (
	// maxKeyLength is the longest key, Stripe's bound.
	maxKeyLength = 255
)

var errKeySyntax = errcode.New(errcode.BadIdempotencyKey,
	`Idempotency-Key must be 1 to 255 printable ASCII characters, bare (as Stripe takes it) or as a quoted string ("...", as the IETF draft writes it)`)

// idempotencyKey reads the Idempotency-Key of r; ok is false when r has none. The value is a
// Structured Field string, "..." with \" and \\ as its only escapes, or the bare key; either way
// the key is 1 to 255 characters of printable ASCII (a bare one without spaces), and "k" is the
// same key as k.
func idempotencyKey(r *http.Request) (key string, ok bool, err error) {
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

// refuseIdempotencyKey refuses r if it carries an Idempotency-Key: a write the key cannot make
// safe to retry, whose client must not believe it can.
func refuseIdempotencyKey(r *http.Request, what string) error {
	if r.Header[answer.IdempotencyKeyHeader] == nil {
		return nil
	}
	return errcode.New(errcode.BadIdempotencyKey, "Idempotency-Key makes a create safe to retry (POST /posts, or a GraphQL mutation of one createPost); "+
		what+" does not take one: send it without")
}

// createOnce serves POST /posts with an Idempotency-Key: in is the post asked for, read and
// checked like any POST's.
func (a *API) createOnce(w http.ResponseWriter, r *http.Request, caller posts.Caller, in posts.NewPost, key string) error {
	k := posts.Keyed{Key: key, Fingerprint: restFingerprint(r, in)}
	kept, replayed, err := a.cfg.Posts.CreateOnce(r.Context(), caller, in, k, func(p posts.Post) posts.Answer {
		rec := newRecorder()
		writeCreated(rec, p)
		return rec.answer()
	})
	if err != nil {
		retryAfterKey(w, err)
		return err
	}
	writeAnswer(w, kept, replayed)
	return nil
}

// restFingerprint is what a POST asks for: its method and path, and the post as read, so that
// white space, the order of the members and escapes in the JSON do not count.
func restFingerprint(r *http.Request, in posts.NewPost) string {
	post, _ := json.Marshal(struct {
		Title string  `json:"title"`
		Body  *string `json:"body"`
	}{in.Title, in.Body})
	sum := sha256.Sum256(append([]byte(r.Method+" "+r.URL.Path+"\n"), post...))
	return hex.EncodeToString(sum[:])
}

// serveGraphQLOnce runs op, a mutation sent with an Idempotency-Key, for caller, whose context
// ctx carries, and writes its answer in media: the kept one to a retry.
func (a *API) serveGraphQLOnce(ctx context.Context, w http.ResponseWriter, r *http.Request, media string, caller posts.Caller, op *schema.Operation) {
	key, _, err := idempotencyKey(r)
	if err == nil && !op.CreatesOnePost() {
		err = refuseIdempotencyKey(r, "a mutation other than one createPost field (not beside other fields, nor in a fragment)")
	}
	if err != nil {
		a.answer.FailGraphQL(w, r, media, err)
		return
	}
	var code string // of the response run writes, for the metrics
	kept, replayed, err := a.cfg.Posts.RunOnce(ctx, caller, posts.Keyed{Key: key, Fingerprint: op.Fingerprint()},
		func(ctx context.Context) (posts.Answer, error) {
			rec := newRecorder()
			x := &answer.Exchange{ResponseWriter: rec}
			a.executeGraphQL(ctx, x, media, op)
			code = x.Code
			return rec.answer(), nil
		})
	if err != nil {
		retryAfterKey(w, err)
		a.answer.FailGraphQL(w, r, media, err)
		return
	}
	if code == "" { // a kept answer: its code is read from it
		code = graphQLCode(kept.Body)
	}
	if x := answer.ExchangeOf(w); x != nil {
		x.Code = code
	}
	writeAnswer(w, kept, replayed)
}

// graphQLCode is the code of a GraphQL response in the metrics, as answer.ResponseCode finds it, read
// from its JSON.
func graphQLCode(body []byte) string {
	var res struct {
		Errors []struct {
			Extensions struct {
				Code string `json:"code"`
			} `json:"extensions"`
		} `json:"errors"`
	}
	switch {
	case json.Unmarshal(body, &res) != nil:
		return "ERROR"
	case len(res.Errors) == 0:
		return "OK"
	case res.Errors[0].Extensions.Code == "":
		return "ERROR"
	}
	return res.Errors[0].Extensions.Code
}

// retryAfterKey sets the Retry-After of a key held by a request under way: the seconds until
// its hold ends at the latest, rounded up.
func retryAfterKey(w http.ResponseWriter, err error) {
	if inUse, ok := errors.AsType[*posts.KeyInUseError](err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(inUse.RetryAfter, time.Second).Seconds()))))
	}
}

// writeAnswer writes a, with the header that says it is sent again if replayed.
func writeAnswer(w http.ResponseWriter, a posts.Answer, replayed bool) {
	h := w.Header()
	for name, values := range a.Header {
		h[name] = values
	}
	if replayed {
		h.Set(answer.ReplayedHeader, "true")
	}
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body) // the status is sent; a client that went away is no one's fault
}

// recorder is a response writer that keeps what is written, to make a posts.Answer of it.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (rec *recorder) Header() http.Header { return rec.header }

func (rec *recorder) WriteHeader(status int) {
	if rec.status == 0 {
		rec.status = status
	}
}

func (rec *recorder) Write(b []byte) (int, error) {
	rec.WriteHeader(http.StatusOK)
	return rec.body.Write(b)
}

func (rec *recorder) answer() posts.Answer {
	return posts.Answer{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}
}
