package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store"
)

func badRequest(format string, args ...any) error {
	return errcode.New(errcode.BadRequest, fmt.Sprintf(format, args...))
}

func unprocessable(format string, args ...any) error {
	return errcode.New(errcode.BadUserInput, fmt.Sprintf(format, args...))
}

// retryAfter is the Retry-After of a 503 of something other than the store (key sets not fetched
// yet, a server full of WebSockets), in seconds.
const retryAfter = "5"

// storeRetryAfter is the Retry-After of a 503 of a store that did not answer, whether it timed
// out or its breaker refused the call: the breaker says when it is worth asking again, and the
// first refusals of an outage (time-outs) say the same as the later ones.
var storeRetryAfter = strconv.Itoa(int(store.BreakerRetryAfter / time.Second))

// retryAfterOf is the Retry-After of err, a 503.
func retryAfterOf(err error) string {
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, posts.ErrUnavailable) {
		return storeRetryAfter
	}
	return retryAfter
}

// fail writes err as {"error": "..."} with its status.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := a.problem(w, r, err)
	writeJSON(w, e.Code.Status, map[string]string{"error": e.Message})
}

// problem gives err its row of errcode's table and sets the headers that go with its status:
// the challenge of a 401 or of a refused credential, the Retry-After of a 503, and for every
// failure the Cache-Control of one. A server fault is logged, and its cause never reaches the
// client.
func (a *API) problem(w http.ResponseWriter, r *http.Request, err error) *errcode.Error {
	e := errcode.Of(err)
	setFailed(w)
	if authErr, ok := errors.AsType[*auth.Error](err); ok {
		w.Header().Set("WWW-Authenticate", authErr.Challenge())
	} else if e.Code.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", auth.Challenge)
	}
	if e.Code.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfterOf(err))
	}
	if e.Fault() {
		a.logFailure(r, e.Code.Status, err)
	}
	return e
}

func (a *API) logFailure(r *http.Request, status int, err error) {
	a.cfg.Logger.Error("request failed", zap.String("uuid", a.requestID(r)),
		zap.Int("status", status), zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
}

// requestID is the id r is logged under (Caddy's uuid, as its access log shows), or "".
func (a *API) requestID(r *http.Request) string {
	if a.cfg.RequestID == nil {
		return ""
	}
	return a.cfg.RequestID(r)
}
