package handlers

import (
	"errors"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/posts"
)

// httpError is a fault in the HTTP or JSON shape of a request, found before posts.Service sees it.
type httpError struct {
	status  int
	message string
}

func (e *httpError) Error() string { return e.message }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func unprocessable(format string, args ...any) error {
	return &httpError{http.StatusUnprocessableEntity, fmt.Sprintf(format, args...)}
}

// retryAfter is the Retry-After of a 503, in seconds.
const retryAfter = "5"

// fail writes err as {"error": "..."} with its status.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, message := a.problem(w, r, err)
	writeJSON(w, status, map[string]string{"error": message})
}

// problem is the one place where errors become statuses: it gives err's status and the message
// the client may see, and sets the headers that go with them. A 5xx is logged and its cause
// never reaches the client.
func (a *API) problem(w http.ResponseWriter, r *http.Request, err error) (status int, message string) {
	var (
		httpErr *httpError
		authErr *auth.Error
	)
	message = err.Error()
	switch {
	case errors.As(err, &httpErr):
		status = httpErr.status
	case errors.As(err, &authErr):
		status = authErr.Status
		w.Header().Set("WWW-Authenticate", authErr.Challenge())
	case errors.Is(err, posts.ErrUnauthenticated):
		status = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", auth.Challenge)
	case errors.Is(err, posts.ErrInvalid):
		status = http.StatusUnprocessableEntity
	case errors.Is(err, posts.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, posts.ErrForbidden):
		status = http.StatusForbidden
	case errors.Is(err, posts.ErrUnavailable):
		status, message = http.StatusServiceUnavailable, posts.ErrUnavailable.Error()
		w.Header().Set("Retry-After", retryAfter)
	case errors.Is(err, auth.ErrKeysUnavailable):
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", retryAfter)
	default:
		status, message = http.StatusInternalServerError, "internal server error"
	}
	if status >= 500 {
		a.logFailure(r, status, err)
	}
	return status, message
}

func (a *API) logFailure(r *http.Request, status int, err error) {
	fields := []zap.Field{zap.Int("status", status), zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err)}
	if a.cfg.RequestID != nil {
		fields = append(fields, zap.String("uuid", a.cfg.RequestID(r)))
	}
	a.cfg.Logger.Error("request failed", fields...)
}
