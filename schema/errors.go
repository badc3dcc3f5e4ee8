package schema

import (
	"context"
	"errors"
	"fmt"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/posts"
)

// The codes of extensions.code, one per error of posts.Service.
const (
	CodeBadUserInput    = "BAD_USER_INPUT"
	CodeUnauthenticated = "UNAUTHENTICATED"
	CodeForbidden       = "FORBIDDEN"
	CodeNotFound        = "NOT_FOUND"
	CodeUnavailable     = "UNAVAILABLE"
	CodeInternal        = "INTERNAL_SERVER_ERROR"
	// CodeBadRequest is a request whose HTTP shape is refused (not JSON, no query, a method or
	// media type the endpoint does not take); the message says what to change.
	CodeBadRequest = "BAD_REQUEST"
)

// Error is an error a client can branch on: its code goes to extensions.code, and, for bad input,
// the argument at fault to extensions.field.
type Error struct {
	Code    string
	Message string
	Field   string
}

func (e *Error) Error() string { return e.Message }

// Extensions is what graphql-go writes as the error's extensions.
func (e *Error) Extensions() map[string]any {
	ext := map[string]any{"code": e.Code}
	if e.Field != "" {
		ext["field"] = e.Field
	}
	return ext
}

// fail turns an error of posts.Service into the error the client gets. This is the one place
// where errors become codes; causes of server faults are logged, never sent.
func (r *Resolver) fail(err error) error {
	var invalid *posts.InvalidError
	switch {
	case errors.As(err, &invalid):
		return &Error{Code: CodeBadUserInput, Message: invalid.Message, Field: invalid.Field}
	case errors.Is(err, posts.ErrUnauthenticated):
		return &Error{Code: CodeUnauthenticated, Message: err.Error()}
	case errors.Is(err, posts.ErrForbidden):
		return &Error{Code: CodeForbidden, Message: err.Error()}
	case errors.Is(err, posts.ErrNotFound):
		return &Error{Code: CodeNotFound, Message: err.Error()}
	case errors.Is(err, posts.ErrUnavailable):
		r.logger.Error("graphql resolver failed", zap.String("code", CodeUnavailable), zap.Error(err))
		return &Error{Code: CodeUnavailable, Message: posts.ErrUnavailable.Error()}
	}
	r.logger.Error("graphql resolver failed", zap.String("code", CodeInternal), zap.Error(err))
	return &Error{Code: CodeInternal, Message: "internal server error"}
}

// LogPanic logs a resolver's panic; MakePanicError then answers it as a server fault, so neither
// the panic's value nor a stack reaches the client.
func (r *Resolver) LogPanic(_ context.Context, value any) {
	r.logger.Error("graphql resolver panicked", zap.String("code", CodeInternal), zap.String("panic", fmt.Sprint(value)), zap.StackSkip("stack", 2))
}

// MakePanicError is the error a client gets for a resolver's panic.
func (r *Resolver) MakePanicError(context.Context, any) *gqlerrors.QueryError {
	return &gqlerrors.QueryError{Message: "internal server error", Extensions: map[string]any{"code": CodeInternal}}
}
