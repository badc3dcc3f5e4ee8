package answer

import (
	"encoding/json"
	"net/http"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/errcode"
)

// The media types of GraphQL responses (GraphQL over HTTP): the first is the spec's own, the
// second the one older clients accept.
const (
	GraphQLResponseJSON = "application/graphql-response+json"
	ApplicationJSON     = "application/json"
)

// RequestErrorStatus is the status of a request that is well-formed HTTP but was refused
// before it ran (a syntax error, an invalid operation, a limit): 400 in the spec's own media
// type; 200 in application/json, which older clients read only on 200.
func RequestErrorStatus(media string) int {
	if media == GraphQLResponseJSON {
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// QueryError is e as one error of a GraphQL response.
func QueryError(e *errcode.Error) *gqlerrors.QueryError {
	return &gqlerrors.QueryError{Message: e.Message, Extensions: e.Extensions()}
}

// WriteGraphQL writes res as the GraphQL response in media with status: no-store when it has
// errors (SetFailed), and its code noted for the metrics.
func WriteGraphQL(w http.ResponseWriter, media string, status int, res *graphql.Response) {
	if x := ExchangeOf(w); x != nil {
		x.Code = ResponseCode(res)
	}
	h := w.Header()
	h["Content-Type"], h["X-Content-Type-Options"] = graphQLHeaders(media)
	if len(res.Errors) > 0 {
		SetFailed(w)
	}
	w.WriteHeader(status)
	if cursor, plain := cursorOnly(res.Extensions); len(res.Errors) == 0 && plain && res.Data != nil {
		// What the encoder below writes of data, and of a cursor, without its check of data,
		// which the schema wrote as compact JSON; in one Write, as REST's answers.
		b := GetBuffer()
		*b = append(append(*b, `{"data":`...), res.Data...)
		if cursor != "" {
			*b = append(append(append(*b, `,"extensions":{"cursor":"`...), cursor...), `"}`...)
		}
		*b = append(*b, "}\n"...)
		_, _ = w.Write(*b)
		PutBuffer(b)
		return
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(res)
}

// graphQLHeaders are the Content-Type and X-Content-Type-Options of a GraphQL response in media:
// one array for both, each capped, as SetJSONHeaders does.
func graphQLHeaders(media string) (contentType, noSniff []string) {
	var typ string
	switch media { // the common ones cost no concatenation
	case GraphQLResponseJSON:
		typ = GraphQLResponseJSON + "; charset=utf-8"
	case ApplicationJSON:
		typ = ApplicationJSON + "; charset=utf-8"
	default:
		typ = media + "; charset=utf-8"
	}
	values := []string{typ, "nosniff"}
	return values[:1:1], values[1:]
}

// cursorOnly says whether extensions are none, or a cursor alone (a query's, schema.Schema.Execute)
// that JSON writes as it is, and returns that cursor.
func cursorOnly(extensions map[string]any) (cursor string, plain bool) {
	if len(extensions) == 0 {
		return "", true
	}
	cursor, ok := extensions["cursor"].(string)
	if !ok || len(extensions) != 1 || cursor == "" {
		return "", false
	}
	for _, c := range []byte(cursor) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return "", false
		}
	}
	return cursor, true
}
