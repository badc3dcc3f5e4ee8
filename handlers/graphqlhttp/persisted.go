// Persisted queries over HTTP: the statuses of their refusals. The persistedQuery extension of
// Apollo's automatic persisted queries is read with the request (request.GraphQL); the schema
// keeps the documents and decides (schema/persisted.go).

package graphqlhttp

import (
	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
)

// refusalStatus is the status of a refusal of Prepare: that of a request error, or of the row of
// a persisted query's refusal or a mutation by GET's (405), the same in either media type
// (PERSISTED_QUERY_NOT_FOUND is a 200, as Apollo Server answers it). Like every answer with
// errors, it is no-store (answer.SetFailed): the next request may register its document, a
// reload may change the manifest.
func refusalStatus(media string, refusal *gqlerrors.QueryError) int {
	e, persisted := refusal.Err.(*errcode.Error)
	if !persisted {
		return answer.RequestErrorStatus(media)
	}
	return e.Code.Status
}
