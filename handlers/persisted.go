// Persisted queries over HTTP and WebSocket: the persistedQuery extension of Apollo's automatic
// persisted queries, and the statuses of their refusals. The schema keeps the documents and
// decides (schema/persisted.go).

package handlers

import (
	"encoding/json"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
)

// persistedHash reads the sha256Hash of persistedQuery, the member of extensions (nil without
// it), {"version": 1, "sha256Hash": "<64 hex digits>"}, or "" when the request has none.
func persistedHash(persistedQuery json.RawMessage) (string, error) {
	if persistedQuery == nil || string(persistedQuery) == "null" {
		return "", nil
	}
	pq, ok := objectMembers(persistedQuery)
	if !ok {
		return "", answer.BadRequest("extensions.persistedQuery must be a JSON object: {\"version\": 1, \"sha256Hash\": \"<the query's SHA-256 in hex>\"}")
	}
	var version float64
	if v := memberValue(pq, "version"); string(v) != "1" && (json.Unmarshal(v, &version) != nil || version != 1) {
		return "", answer.BadRequest("extensions.persistedQuery.version must be 1, the only version of persisted queries there is")
	}
	hash, ok := jsonString(memberValue(pq, "sha256Hash"))
	if !ok || !isSHA256Hex(hash) {
		return "", answer.BadRequest("extensions.persistedQuery.sha256Hash must be the SHA-256 of the query, as 64 lowercase hexadecimal digits")
	}
	return hash, nil
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// refusalStatus is the status of a refusal of Prepare: that of a request error, or of the row of
// a persisted query's refusal or a mutation by GET's (405), the same in either media type
// (PERSISTED_QUERY_NOT_FOUND is a 200, as Apollo Server answers it). Like every answer with errors, it is no-store (answer.SetFailed):
// the next request may register its document, a reload may change the manifest.
func refusalStatus(media string, refusal *gqlerrors.QueryError) int {
	e, persisted := refusal.Err.(*errcode.Error)
	if !persisted {
		return answer.RequestErrorStatus(media)
	}
	return e.Code.Status
}
