// Package answer writes what the API's transports answer alike: an error as JSON or as a
// GraphQL response, with the status, challenge and Retry-After of its row of errcode's table
// (Failer); the line of every request in the metrics and the fields it adds to the access log
// (Exchange, Observed); and what caches may do with each answer (caching.go). Every package
// under handlers/ imports it; it imports none of them.
package answer

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/requestid"
	"github.com/postsedge/caddy-posts/spans"
	"github.com/postsedge/caddy-posts/store"
)

// BadRequest is a 400 (BAD_REQUEST) that says what is wrong, as fmt.Sprintf(format, args...).
func BadRequest(format string, args ...any) error {
	return errcode.New(errcode.BadRequest, fmt.Sprintf(format, args...))
}

// Unprocessable is a 422 (BAD_USER_INPUT) that says what is wrong, as fmt.Sprintf(format, args...).
func Unprocessable(format string, args ...any) error {
	return errcode.New(errcode.BadUserInput, fmt.Sprintf(format, args...))
}

// RetryAfter is the Retry-After of a 503 of something other than the store (key sets not fetched
// yet, a server full of WebSockets), in seconds.
const RetryAfter = "5"

// StoreRetryAfter is the Retry-After of a 503 of a store that did not answer, whether it timed
// out or its breaker refused the call: the breaker says when it is worth asking again, and the
// first refusals of an outage (time-outs) say the same as the later ones.
var StoreRetryAfter = strconv.Itoa(int(store.BreakerRetryAfter / time.Second))

// retryAfterOf is the Retry-After of err, a 503.
func retryAfterOf(err error) string {
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, posts.ErrUnavailable) {
		return StoreRetryAfter
	}
	return RetryAfter
}

// Failer writes failures: their answers, and a log line of each server fault.
type Failer struct {
	// Logger receives the failures the client is not told about (5xx).
	Logger *zap.Logger
	// RequestID, if set, returns the id a request is logged under (Caddy's uuid, as its access
	// log shows), so that a 5xx in the log can be matched with the access log.
	RequestID func(*http.Request) string
}

// Fail writes err as {"error": "..."} with its status.
func (f *Failer) Fail(w http.ResponseWriter, r *http.Request, err error) {
	e := f.Problem(w, r, err)
	WriteJSON(w, e.Code.Status, map[string]string{"error": e.Message})
}

// FailGraphQL writes err as a GraphQL error in media, with the status and headers Problem
// gives it.
func (f *Failer) FailGraphQL(w http.ResponseWriter, r *http.Request, media string, err error) {
	e := f.Problem(w, r, err)
	WriteGraphQL(w, media, e.Code.Status, &graphql.Response{Errors: []*gqlerrors.QueryError{QueryError(e)}})
}

// Problem gives err its row of errcode's table and sets the headers that go with its status:
// the challenge of a 401 or of a refused credential, the Retry-After of a 503, and for every
// failure the Cache-Control of one (SetFailed). It is recorded on the request's span
// (RecordError). A server fault is logged, and its cause never reaches the
// client.
func (f *Failer) Problem(w http.ResponseWriter, r *http.Request, err error) *errcode.Error {
	e := errcode.Of(err)
	SetFailed(w)
	RecordError(spans.Current(r.Context()), err, e)
	if authErr, ok := errors.AsType[*auth.Error](err); ok {
		w.Header().Set("WWW-Authenticate", authErr.Challenge())
	} else if e.Code.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", auth.Challenge)
	}
	if e.Code.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfterOf(err))
	}
	if e.Fault() {
		f.Logger.Error("request failed", requestid.Field(requestid.With(r.Context(), f.ID(r))),
			zap.Int("status", e.Code.Status), zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
	}
	return e
}

// RecordError records e, the row of err, on span: its GraphQL code as error.type, and a 5xx as
// the span's failure too; a client's error does not fail it, as OpenTelemetry's HTTP conventions
// say.
func RecordError(span spans.Span, err error, e *errcode.Error) {
	if e.Code.Status >= 500 {
		span.Fail(err, e.Code.GraphQL)
	} else {
		span.String("error.type", e.Code.GraphQL)
	}
}

// ID is the id r is logged under (Failer.RequestID's), or "".
func (f *Failer) ID(r *http.Request) string {
	if f.RequestID == nil {
		return ""
	}
	return f.RequestID(r)
}
