package schema

import (
	"context"
	"fmt"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/errcode"
)

// fail turns an error of posts.Service into the error the client gets, by errcode's table;
// causes of server faults are logged, never sent.
func (r *Resolver) fail(err error) error {
	e := errcode.Of(err)
	if e.Fault() {
		r.logger.Error("graphql resolver failed", zap.String("code", e.Code.GraphQL), zap.Error(err))
	}
	return e
}

// LogPanic logs a resolver's panic; MakePanicError then answers it as a server fault, so neither
// the panic's value nor a stack reaches the client.
func (r *Resolver) LogPanic(_ context.Context, value any) {
	r.logger.Error("graphql resolver panicked", zap.String("code", errcode.Internal.GraphQL), zap.String("panic", fmt.Sprint(value)), zap.StackSkip("stack", 2))
}

// MakePanicError is the error a client gets for a resolver's panic.
func (r *Resolver) MakePanicError(context.Context, any) *gqlerrors.QueryError {
	return &gqlerrors.QueryError{Message: errcode.InternalMessage, Extensions: map[string]any{"code": errcode.Internal.GraphQL}}
}
