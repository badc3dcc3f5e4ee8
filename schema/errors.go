// What a client sees of an error: a resolver's error by errcode's table, a panic as a fault of
// the server, and at most MaxErrors errors in a response.

package schema

import (
	"context"
	"fmt"
	"slices"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/requestid"
)

// fail turns an error of posts.Service into the error the client gets, by errcode's table;
// causes of server faults are logged, never sent.
func (r *Resolver) fail(ctx context.Context, err error) error {
	e := errcode.Of(err)
	if e.Fault() {
		r.logger.Error("graphql resolver failed", requestid.Field(ctx), zap.String("code", e.Code.GraphQL), zap.Error(err))
	}
	return e
}

// LogPanic logs a resolver's panic; MakePanicError then answers it as a server fault, so neither
// the panic's value nor a stack reaches the client.
func (r *Resolver) LogPanic(ctx context.Context, value any) {
	r.logger.Error("graphql resolver panicked", requestid.Field(ctx), zap.String("code", errcode.Internal.GraphQL), zap.String("panic", fmt.Sprint(value)), zap.StackSkip("stack", 2))
}

// MakePanicError is the error a client gets for a resolver's panic.
func (r *Resolver) MakePanicError(context.Context, any) *gqlerrors.QueryError {
	return &gqlerrors.QueryError{Message: errcode.InternalMessage, Extensions: map[string]any{"code": errcode.Internal.GraphQL}}
}

// MaxErrors is the most errors of a response; past it, one more error says how many more
// there were, as graphql-js ends validation ("Too many validation errors, error limit
// reached").
const MaxErrors = 100

// capErrors keeps the first MaxErrors of errs and one more error that says how many were left
// out. The last error has no extensions: the caller gives it the code of the response.
func capErrors(errs []*gqlerrors.QueryError) []*gqlerrors.QueryError {
	if len(errs) <= MaxErrors {
		return errs
	}
	cut := len(errs) - MaxErrors
	errs = append(errs[:MaxErrors:MaxErrors], &gqlerrors.QueryError{
		Message: fmt.Sprintf("Too many errors, error limit reached: %d more were left out.", cut),
	})
	return errs
}

// capResponseErrors cuts the errors of res after MaxErrors (capErrors) and gives them their
// codes: the errors of a request that did not run (no data) are request errors, the one that
// ends the errors of an executed operation has errcode.TooManyErrors.GraphQL.
func capResponseErrors(res *graphql.Response) *graphql.Response {
	res.Errors = capErrors(res.Errors)
	if res.Data == nil {
		tagRequestErrors(res.Errors)
	} else if len(res.Errors) > MaxErrors {
		res.Errors[MaxErrors].Extensions = map[string]any{"code": errcode.TooManyErrors.GraphQL}
	}
	return res
}

// tagRequestErrors gives the errors of a request that did not run the code that says so.
func tagRequestErrors(errs []*gqlerrors.QueryError) {
	for _, e := range errs {
		if e.Extensions == nil {
			e.Extensions = map[string]any{"code": errcode.ValidationFailed.GraphQL}
		}
	}
}

// invalid says whether errs are all errors of validation, which say nothing ran.
func invalid(errs []*gqlerrors.QueryError) bool {
	return len(errs) > 0 && !slices.ContainsFunc(errs, func(e *gqlerrors.QueryError) bool { return e.Rule == "" })
}
