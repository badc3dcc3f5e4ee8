package schema

import (
	"context"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
)

// Do prepares and executes req, as a transport does: the response has the refusal of Prepare or
// the result.
func (s *Schema) Do(ctx context.Context, req Request) *graphql.Response {
	op, refusal := s.Prepare(req)
	if refusal != nil {
		return &graphql.Response{Errors: []*gqlerrors.QueryError{refusal}}
	}
	return s.Execute(ctx, op)
}
