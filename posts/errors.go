package posts

import (
	"errors"
	"fmt"
)

// The errors every caller of the Service branches on. Transports map each to one status (REST)
// or one extensions.code (GraphQL).
var (
	// ErrNotFound: no post has the id (a malformed id included).
	ErrNotFound = errors.New("post not found")
	// ErrForbidden: the post exists but belongs to another user.
	ErrForbidden = errors.New("post belongs to another user")
	// ErrUnauthenticated: the operation needs a caller and the request named none.
	ErrUnauthenticated = errors.New("authentication required: send a bearer token or an API key")
	// ErrVersionConflict: the write expected the post at another version (Expect) than the one
	// it is at; nothing changed. The error is a *ConflictError naming the post's version.
	ErrVersionConflict = errors.New("the post is not at the version the write expects")
	// ErrInvalid: the input breaks a rule; the error is an *InvalidError naming the field.
	ErrInvalid = errors.New("invalid input")
	// ErrUnavailable: the database could not be reached or did not answer in time; nothing was
	// reported as done.
	ErrUnavailable = errors.New("the database is unavailable, try again shortly")
	// ErrIndexing: a search asked a store that is still building its search index from the
	// posts it held before it had one; nothing was read, as the answer would miss some.
	ErrIndexing = errors.New("the search index is being built from the posts stored before it, and a search would miss some of them: try again shortly")
	// ErrNotTried: the database is known to be down (its breaker is open), so the call was not
	// sent to it: no post was written, and a write may be sent again as it is. It matches
	// ErrUnavailable too.
	ErrNotTried = fmt.Errorf("%w: it is down, and this request was not sent to it (no post was written)", ErrUnavailable)
)

// InvalidError is input that breaks a rule. It matches ErrInvalid with errors.Is.
type InvalidError struct {
	// Field names the input member at fault.
	Field string
	// Message says what is wrong, for a person.
	Message string
}

func (e *InvalidError) Error() string { return e.Message }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// ConflictError is a write refused because the post is not at the version it expects. It
// matches ErrVersionConflict with errors.Is.
type ConflictError struct {
	// Version is the post's version when the write was refused. Anyone may read it (a post's
	// version is part of it), and only the post's owner gets this error.
	Version int64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("the post has changed: it is at version %d, not as this request expects; nothing was changed (read it again, then retry)", e.Version)
}

// Is makes errors.Is(err, ErrVersionConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrVersionConflict }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Message: fmt.Sprintf(format, args...)}
}
