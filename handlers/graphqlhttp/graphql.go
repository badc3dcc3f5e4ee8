// Package graphqlhttp serves GraphQL over HTTP (GET and POST on /graphql, GraphQL over HTTP's
// spec): the request read, the operation prepared, allowed and run, the response in the media
// type the Accept header picks (media.go), and a subscription, or the operations of a client
// that takes only a stream, handed to stream.Handler. A mutation under an Idempotency-Key is
// answered once (idempotency.go); a persisted query's refusals have their statuses
// (persisted.go).
package graphqlhttp

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/request"
	"github.com/postsedge/caddy-posts/handlers/stream"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/requestid"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/spans"
)

// graphQLMethods are the methods of /graphql over HTTP, its Allow.
const graphQLMethods = "GET, HEAD, POST"

// Handler serves GraphQL over HTTP.
type Handler struct {
	// Posts decides who may do what (Allow), and keeps the answers of keyed mutations.
	Posts *posts.Service
	// GraphQL prepares and runs the operations.
	GraphQL *schema.Schema
	// Auth finds the caller of each request.
	Auth *auth.Authenticator
	// MaxBodySize is the largest request body read, in bytes.
	MaxBodySize int64
	// OriginPatterns are the origins besides the site's own whose pages may subscribe
	// (answer.OriginAllowed).
	OriginPatterns []string
	// Identified, if set, is told the caller of every authenticated request.
	Identified func(*http.Request, auth.Identity)
	// AccessLog, if set, adds a field to the access log line of a request: the operation's type
	// and name.
	AccessLog func(*http.Request, zap.Field)
	// Answer writes failures.
	Answer *answer.Failer
	// Vary is the Vary of the answers.
	Vary answer.Varies
	// CORS lets the allowed origins' pages read the answers.
	CORS *answer.CORS
	// Streams serves a subscription, and the operations of a client that takes only a stream.
	Streams *stream.Handler
	// GraphiQL serves the page a browser gets for a GET it would rather read as HTML.
	GraphiQL http.HandlerFunc
}

// ServeHTTP serves /graphql but for WebSocket upgrades: GraphiQL to browsers, and GraphQL over
// HTTP (POST for every operation, GET for queries) to everyone else.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.Vary.Set(w, true)
	if h.CORS.Preflight(w, r, graphQLMethods, h.failPreflight) {
		return
	}
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	if !get && r.Method != http.MethodPost {
		w.Header().Set("Allow", graphQLMethods)
		h.Answer.FailGraphQL(w, r, answer.GraphQLResponseJSON, errcode.New(errcode.MethodNotAllowed, r.Method+" is not allowed here; allowed: "+graphQLMethods))
		return
	}
	accept := accepting(r.Header.Get("Accept"))
	if get && accept.prefersHTML() {
		if x := answer.ExchangeOf(w); x != nil {
			x.Operation = "graphiql"
		}
		h.GraphiQL(w, r)
		return
	}
	media := accept.responseType()
	framing := StreamRequested(r.Header.Get("Accept"))
	if media == "" && framing == nil {
		h.Answer.FailGraphQL(w, r, answer.ApplicationJSON, errcode.New(errcode.NotAcceptable, "the response can only be "+answer.GraphQLResponseJSON+", "+answer.ApplicationJSON+
			", text/event-stream or (for a subscription) multipart/mixed;subscriptionSpec=1.0"))
		return
	}
	// What is answered before the operation is known, to a client that takes only a stream: JSON.
	plain := cmp.Or(media, answer.ApplicationJSON)
	caller, err := h.Auth.Authenticate(r)
	if err != nil {
		h.Answer.FailGraphQL(w, r, plain, err)
		return
	}
	if !caller.Anonymous() && h.Identified != nil {
		h.Identified(r, caller)
	}
	answer.SetCacheControl(w, caller) // answer.WriteGraphQL makes it no-store if errors come
	var req schema.Request
	if get {
		req, err = graphQLQuery(r.URL.RawQuery)
	} else {
		req, err = h.graphQLBody(w, r)
	}
	if err != nil {
		h.Answer.FailGraphQL(w, r, plain, err)
		return
	}
	if _, ok := framing.(stream.SSE); ok && r.Header.Get("Last-Event-ID") != "" {
		// EventSource sends the id of the last event it received when it reconnects: resume.
		req.ResumeFrom = answer.MustJSON(r.Header.Get("Last-Event-ID"))
	}
	req.NoMutation = get
	// ctx carries the operation's span when the request is traced: what runs it is its part.
	ctx, span, op, refusal := h.GraphQL.PrepareIn(r.Context(), req)
	defer span.End()
	tr := r // r, or a traced request's copy carrying the span: not r itself, which a closure below holds
	if span.On() {
		tr = r.WithContext(ctx)
	}
	if op != nil {
		h.operationKnown(w, r, op)
	}
	// A stream carries subscriptions, and the other operations of a client that takes nothing else.
	streamed := framing != nil && (media == "" || op != nil && op.Type == "subscription")
	switch {
	case refusal != nil && isMethodNotAllowed(refusal): // a mutation by GET, whatever else the request holds
		w.Header().Set("Allow", http.MethodPost)
		h.Answer.FailGraphQL(w, tr, plain, refusal.Err)
		return
	case refusal != nil && media == "": // a client that takes only a stream
		// As graphql-sse's reference server does: the errors as the stream's one result.
		stream.Result(w, framing, &graphql.Response{Errors: []*gqlerrors.QueryError{refusal}})
		return
	case refusal != nil:
		answer.WriteGraphQL(w, plain, refusalStatus(plain, refusal), &graphql.Response{Errors: []*gqlerrors.QueryError{refusal}})
		return
	case get && op.Type == "subscription" && !streamed: // GET streams a subscription only
		w.Header().Set("Allow", http.MethodPost)
		h.Answer.FailGraphQL(w, tr, plain, errcode.New(errcode.MethodNotAllowed, "a subscription cannot be sent with GET but to a stream; use POST"))
		return
	case op.Type == "subscription" && !streamed:
		h.Answer.FailGraphQL(w, tr, plain, answer.BadRequest("a subscription is served over a WebSocket to this URL (subprotocol graphql-transport-ws), or streamed over HTTP to a request that accepts text/event-stream or multipart/mixed;subscriptionSpec=1.0"))
		return
	case streamed && !answer.OriginAllowed(r, h.OriginPatterns):
		h.Answer.FailGraphQL(w, tr, plain, errcode.New(errcode.Forbidden, "the Origin of this request is not allowed to subscribe (allowed_origins)"))
		return
	case streamed && op.Type == "mutation" && r.Header[answer.IdempotencyKeyHeader] != nil:
		h.Answer.FailGraphQL(w, tr, plain, answer.BadRequest("a mutation with an Idempotency-Key is answered in JSON: accept %s", answer.GraphQLResponseJSON))
		return
	}
	if err := h.Posts.Allow(caller, request.ActionOf(op.Type)); err != nil {
		h.Answer.FailGraphQL(w, tr, plain, err)
		return
	}
	if streamed {
		h.Streams.Serve(w, tr, framing, plain, caller, op)
		return
	}
	// The id made only for a resolver that logs: the operation's resolvers have all returned
	// before the request's goroutine goes on, when Caddy may read its replacer.
	ctx = requestid.WithLazy(auth.NewContext(ctx, caller), func() string { return h.Answer.ID(r) })
	if op.Type == "mutation" && r.Header[answer.IdempotencyKeyHeader] != nil { // a query, which writes nothing, ignores it
		h.serveGraphQLOnce(ctx, w, tr, media, caller, op)
		return
	}
	h.executeGraphQL(ctx, w, media, op)
}

// isMethodNotAllowed says whether refusal is Prepare's of a mutation by GET (schema.Request's
// NoMutation).
func isMethodNotAllowed(refusal *gqlerrors.QueryError) bool {
	e, ok := refusal.Err.(*errcode.Error)
	return ok && e.Code == errcode.MethodNotAllowed
}

// executeGraphQL runs op and writes its response in media, the span graphql.write when the
// request is traced.
func (h *Handler) executeGraphQL(ctx context.Context, w http.ResponseWriter, media string, op *schema.Operation) {
	res := h.GraphQL.Execute(ctx, op)
	status := http.StatusOK
	if res.Data == nil { // it did not run: a request error
		status = answer.RequestErrorStatus(media)
	}
	var span spans.Span
	if op.Span().On() {
		_, span = spans.Start(ctx, "graphql.write")
	}
	answer.WriteGraphQL(w, media, status, res)
	span.End()
}

// failPreflight refuses a preflight of /graphql with err, as a GraphQL error.
func (h *Handler) failPreflight(w http.ResponseWriter, r *http.Request, err error) {
	h.Answer.FailGraphQL(w, r, answer.GraphQLResponseJSON, err)
}

// graphQLBody reads the request of a POST: a JSON object with the members of graphQLParams.
// Other members are ignored, as clients add their own (Relay's id).
func (h *Handler) graphQLBody(w http.ResponseWriter, r *http.Request) (schema.Request, error) {
	members, err := request.Object(w, r, h.MaxBodySize, answer.ApplicationJSON)
	if err != nil {
		return schema.Request{}, err
	}
	return request.GraphQL(func(name string) (json.RawMessage, error) {
		for _, m := range members { // request.Parse refused a member given twice
			if m.Name == name {
				return m.Value, nil
			}
		}
		return nil, nil
	}, false)
}

// graphQLQuery reads the request of a GET from its query string: query, and optionally
// variables and extensions as JSON objects, and operationName.
func graphQLQuery(raw string) (schema.Request, error) {
	values, err := url.ParseQuery(raw)
	if err != nil {
		return schema.Request{}, answer.BadRequest("the query string is malformed")
	}
	return request.GraphQL(func(name string) (json.RawMessage, error) {
		vs := values[name]
		switch {
		case len(vs) == 0:
			return nil, nil
		case len(vs) > 1:
			return nil, answer.BadRequest("query parameter %q is given more than once", name)
		case name == "query" || name == "operationName":
			if err := request.CheckUTF8("query parameter "+name, vs[0]); err != nil {
				return nil, err
			}
			return json.Marshal(vs[0]) // a JSON string, to be read as a POST's member is
		}
		if err := request.CheckJSONText("query parameter "+name, []byte(vs[0])); err != nil {
			return nil, err
		}
		return json.RawMessage(vs[0]), nil
	}, true)
}

// logField adds field to Caddy's access log line of r, when the config says how.
func (h *Handler) logField(r *http.Request, field zap.Field) {
	if h.AccessLog != nil {
		h.AccessLog(r, field)
	}
}

// operationKnown labels the answer.Exchange of a GraphQL request with its operation's type, and adds
// the type and name to its access log line.
func (h *Handler) operationKnown(w http.ResponseWriter, r *http.Request, op *schema.Operation) {
	if x := answer.ExchangeOf(w); x != nil {
		x.Operation = op.Type
	}
	h.logField(r, zap.String("graphql_operation_type", op.Type))
	if op.Name != "" {
		h.logField(r, zap.String("graphql_operation_name", answer.Truncate(op.Name)))
	}
}
