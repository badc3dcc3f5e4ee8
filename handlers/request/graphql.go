// The parameters of a GraphQL request and Apollo's persistedQuery extension of automatic
// persisted queries, read as a client sends them; the schema keeps the documents and decides
// (schema/persisted.go).

package request

import (
	"encoding/json"

	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// graphQLParams are the members of a GraphQL request, as JSON members or query parameters.
var graphQLParams = [...]string{"query", "operationName", "variables", "extensions"}

// GraphQL reads a GraphQL request from the parameters that param gives, as raw JSON values (nil
// when absent): a POST's members, a GET's query parameters (inQuery, which changes how errors
// name them), a WebSocket's subscribe payload.
func GraphQL(param func(name string) (json.RawMessage, error), inQuery bool) (req schema.Request, err error) {
	where := "member"
	if inQuery {
		where = "query parameter"
	}
	var raw [len(graphQLParams)]json.RawMessage
	for i, name := range graphQLParams {
		if raw[i], err = param(name); err != nil {
			return req, err
		}
		if string(raw[i]) == "null" {
			raw[i] = nil
		}
	}
	query, operationName, variables, extensions := raw[0], raw[1], raw[2], raw[3]
	var ok bool
	if query != nil {
		if req.Query, ok = String(query); !ok {
			return req, answer.BadRequest("the %s query must be a string", where)
		}
	}
	if operationName != nil {
		if req.OperationName, ok = String(operationName); !ok {
			return req, answer.BadRequest("the %s operationName must be a string", where)
		}
	}
	if variables != nil && (json.Unmarshal(variables, &req.Variables) != nil || req.Variables == nil) {
		return req, answer.BadRequest("the %s variables must be a JSON object", where)
	}
	var ext []Member
	if extensions != nil {
		if ext, ok = Members(extensions); !ok {
			return req, answer.BadRequest("the %s extensions must be a JSON object", where)
		}
	}
	if req.PersistedHash, err = persistedHash(Value(ext, "persistedQuery")); err != nil {
		return req, err
	}
	if resume := Value(ext, "resumeFrom"); string(resume) != "null" { // the schema reads it
		req.ResumeFrom = resume
	}
	if query == nil && req.PersistedHash == "" {
		return req, answer.BadRequest("the %s query is required: it holds the GraphQL document", where)
	}
	return req, nil
}

// persistedHash reads the sha256Hash of persistedQuery, the member of extensions (nil without
// it), {"version": 1, "sha256Hash": "<64 hex digits>"}, or "" when the request has none.
func persistedHash(persistedQuery json.RawMessage) (string, error) {
	if persistedQuery == nil || string(persistedQuery) == "null" {
		return "", nil
	}
	pq, ok := Members(persistedQuery)
	if !ok {
		return "", answer.BadRequest("extensions.persistedQuery must be a JSON object: {\"version\": 1, \"sha256Hash\": \"<the query's SHA-256 in hex>\"}")
	}
	var version float64
	if v := Value(pq, "version"); string(v) != "1" && (json.Unmarshal(v, &version) != nil || version != 1) {
		return "", answer.BadRequest("extensions.persistedQuery.version must be 1, the only version of persisted queries there is")
	}
	hash, ok := String(Value(pq, "sha256Hash"))
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

// ActionOf is what a GraphQL operation of type typ asks posts.Service.Allow for.
func ActionOf(typ string) posts.Action {
	switch typ {
	case "query":
		return posts.Read
	case "subscription":
		return posts.Subscribe
	}
	return posts.Write // a mutation; and the strictest for a type this code does not know
}
