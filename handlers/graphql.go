package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

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
)

// graphqlPath is the GraphQL endpoint.
const graphqlPath = "/graphql"

// graphQLMethods are the methods of /graphql over HTTP, its Allow.
const graphQLMethods = "GET, HEAD, POST"

// serveGraphQL serves /graphql but for WebSocket upgrades: GraphiQL to browsers, and GraphQL
// over HTTP (POST for every operation, GET for queries) to everyone else.
func (a *API) serveGraphQL(w http.ResponseWriter, r *http.Request) {
	a.vary.Set(w, true)
	if a.cors.Preflight(w, r, graphQLMethods, a.failPreflight) {
		return
	}
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	if !get && r.Method != http.MethodPost {
		w.Header().Set("Allow", graphQLMethods)
		a.answer.FailGraphQL(w, r, answer.GraphQLResponseJSON, errcode.New(errcode.MethodNotAllowed, r.Method+" is not allowed here; allowed: "+graphQLMethods))
		return
	}
	accept := accepting(r.Header.Get("Accept"))
	if get && accept.prefersHTML() {
		if x := answer.ExchangeOf(w); x != nil {
			x.Operation = "graphiql"
		}
		serveGraphiQL(w, r)
		return
	}
	media := accept.responseType()
	framing := streamRequested(r.Header.Get("Accept"))
	if media == "" && framing == nil {
		a.answer.FailGraphQL(w, r, answer.ApplicationJSON, errcode.New(errcode.NotAcceptable, "the response can only be "+answer.GraphQLResponseJSON+", "+answer.ApplicationJSON+
			", text/event-stream or (for a subscription) multipart/mixed;subscriptionSpec=1.0"))
		return
	}
	// What is answered before the operation is known, to a client that takes only a stream: JSON.
	plain := cmp.Or(media, answer.ApplicationJSON)
	caller, err := a.cfg.Auth.Authenticate(r)
	if err != nil {
		a.answer.FailGraphQL(w, r, plain, err)
		return
	}
	if !caller.Anonymous() && a.cfg.Identified != nil {
		a.cfg.Identified(r, caller)
	}
	answer.SetCacheControl(w, caller) // answer.WriteGraphQL makes it no-store if errors come
	var req schema.Request
	if get {
		req, err = graphQLQuery(r.URL.RawQuery)
	} else {
		req, err = a.graphQLBody(w, r)
	}
	if err != nil {
		a.answer.FailGraphQL(w, r, plain, err)
		return
	}
	if _, ok := framing.(stream.SSE); ok && r.Header.Get("Last-Event-ID") != "" {
		// EventSource sends the id of the last event it received when it reconnects: resume.
		req.ResumeFrom = answer.MustJSON(r.Header.Get("Last-Event-ID"))
	}
	req.NoMutation = get
	op, refusal := a.cfg.GraphQL.Prepare(req)
	if op != nil {
		a.operationKnown(w, r, op)
	}
	// A stream carries subscriptions, and the other operations of a client that takes nothing else.
	streamed := framing != nil && (media == "" || op != nil && op.Type == "subscription")
	switch {
	case refusal != nil && isMethodNotAllowed(refusal): // a mutation by GET, whatever else the request holds
		w.Header().Set("Allow", http.MethodPost)
		a.answer.FailGraphQL(w, r, plain, refusal.Err)
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
		a.answer.FailGraphQL(w, r, plain, errcode.New(errcode.MethodNotAllowed, "a subscription cannot be sent with GET but to a stream; use POST"))
		return
	case op.Type == "subscription" && !streamed:
		a.answer.FailGraphQL(w, r, plain, answer.BadRequest("a subscription is served over a WebSocket to this URL (subprotocol graphql-transport-ws), or streamed over HTTP to a request that accepts text/event-stream or multipart/mixed;subscriptionSpec=1.0"))
		return
	case streamed && !answer.OriginAllowed(r, a.cfg.Subscriptions.OriginPatterns):
		a.answer.FailGraphQL(w, r, plain, errcode.New(errcode.Forbidden, "the Origin of this request is not allowed to subscribe (allowed_origins)"))
		return
	case streamed && op.Type == "mutation" && r.Header[answer.IdempotencyKeyHeader] != nil:
		a.answer.FailGraphQL(w, r, plain, answer.BadRequest("a mutation with an Idempotency-Key is answered in JSON: accept %s", answer.GraphQLResponseJSON))
		return
	}
	if err := a.cfg.Posts.Allow(caller, request.ActionOf(op.Type)); err != nil {
		a.answer.FailGraphQL(w, r, plain, err)
		return
	}
	if streamed {
		a.streams.Serve(w, r, framing, plain, caller, op)
		return
	}
	// The id made now, on the request's goroutine: resolvers that log run on others.
	ctx := requestid.With(auth.NewContext(r.Context(), caller), a.answer.ID(r))
	if op.Type == "mutation" && r.Header[answer.IdempotencyKeyHeader] != nil { // a query, which writes nothing, ignores it
		a.serveGraphQLOnce(ctx, w, r, media, caller, op)
		return
	}
	a.executeGraphQL(ctx, w, media, op)
}

// isMethodNotAllowed says whether refusal is Prepare's of a mutation by GET (schema.Request's
// NoMutation).
func isMethodNotAllowed(refusal *gqlerrors.QueryError) bool {
	e, ok := refusal.Err.(*errcode.Error)
	return ok && e.Code == errcode.MethodNotAllowed
}

// executeGraphQL runs op and writes its response in media.
func (a *API) executeGraphQL(ctx context.Context, w http.ResponseWriter, media string, op *schema.Operation) {
	res := a.cfg.GraphQL.Execute(ctx, op)
	status := http.StatusOK
	if res.Data == nil { // it did not run: a request error
		status = answer.RequestErrorStatus(media)
	}
	answer.WriteGraphQL(w, media, status, res)
}

// failPreflight refuses a preflight of /graphql with err, as a GraphQL error.
func (a *API) failPreflight(w http.ResponseWriter, r *http.Request, err error) {
	a.answer.FailGraphQL(w, r, answer.GraphQLResponseJSON, err)
}

// graphQLBody reads the request of a POST: a JSON object with the members of graphQLParams.
// Other members are ignored, as clients add their own (Relay's id).
func (a *API) graphQLBody(w http.ResponseWriter, r *http.Request) (schema.Request, error) {
	members, err := request.Object(w, r, a.cfg.MaxBodySize, answer.ApplicationJSON)
	if err != nil {
		return schema.Request{}, err
	}
	return request.GraphQL(func(name string) (json.RawMessage, error) {
		for _, m := range members { // parseObject refused a member given twice
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

// streamRequested is the framing an Accept header asks for, or nil for none: of the media
// ranges text/event-stream and multipart/mixed;subscriptionSpec=1.0 (Apollo's protocol, the one
// version of it served), the one with the higher weight, the first listed of two alike. A
// multipart/mixed of another subscriptionSpec, or of none, asks for no stream: alone, it is
// answered 406 (serveGraphQL).
func streamRequested(accept string) stream.Framing {
	var f stream.Framing
	best := 0.0
	for _, r := range mediaRanges(accept) {
		var this stream.Framing
		switch {
		case r.name == "text/event-stream":
			this = stream.SSE{}
		case r.name == "multipart/mixed" && r.params["subscriptionspec"] == "1.0":
			this = stream.Multipart{}
		default:
			continue
		}
		if r.q > best {
			f, best = this, r.q
		}
	}
	return f
}

// acceptance is what an Accept header says of the media types /graphql answers with, read once
// per request.
type acceptance struct {
	given             bool    // the request has an Accept header
	own, legacy, html float64 // the q of graphQLResponseJSON, applicationJSON and text/html
}

// mediaRange is one media range of an Accept header, with its parameters and its q.
type mediaRange struct {
	name   string            // lower case, as mime.ParseMediaType gives it
	params map[string]string // their names in lower case, their values unquoted
	q      float64
}

// mediaRanges reads an Accept header: each element parsed by mime.ParseMediaType, one it
// cannot parse left out (a duplicated parameter, a value no token and no quoted string), and a
// q that is no weight (not 0 to 1) read as 0, not acceptable.
func mediaRanges(header string) []mediaRange {
	var ranges []mediaRange
	for item := range strings.SplitSeq(header, ",") {
		name, params, err := mime.ParseMediaType(strings.TrimSpace(item))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f <= 1 {
				q = f
			} else {
				q = 0
			}
		}
		ranges = append(ranges, mediaRange{name, params, q})
	}
	return ranges
}

func accepting(header string) acceptance {
	ranges := mediaRanges(header)
	return acceptance{
		given:  strings.TrimSpace(header) != "",
		own:    quality(ranges, answer.GraphQLResponseJSON),
		legacy: quality(ranges, answer.ApplicationJSON),
		html:   quality(ranges, "text/html"),
	}
}

// responseType is the media type of the response the Accept header asks for: the spec's own
// when the client takes it at least as gladly as application/json (or says nothing), else
// application/json, else "" (406).
func (a acceptance) responseType() string {
	switch {
	case !a.given || a.own > 0 && a.own >= a.legacy:
		return answer.GraphQLResponseJSON
	case a.legacy > 0:
		return answer.ApplicationJSON
	}
	return ""
}

// prefersHTML says whether the client (a browser) takes text/html more gladly than JSON.
func (a acceptance) prefersHTML() bool {
	return a.html > 0 && a.html > max(a.own, a.legacy)
}

// quality is the q that ranges give media, from the most specific range that matches it (RFC
// 9110 §12.5.1); 0 when none matches.
func quality(ranges []mediaRange, media string) float64 {
	typ, _, _ := strings.Cut(media, "/")
	best, q := -1, 0.0
	for _, r := range ranges {
		specificity := -1
		switch r.name {
		case media:
			specificity = 2
		case typ + "/*":
			specificity = 1
		case "*/*":
			specificity = 0
		}
		if specificity > best {
			best, q = specificity, r.q
		}
	}
	return q
}

// logField adds field to Caddy's access log line of r, when the config says how.
func (a *API) logField(r *http.Request, field zap.Field) {
	if a.cfg.AccessLog != nil {
		a.cfg.AccessLog(r, field)
	}
}

// operationKnown labels the answer.Exchange of a GraphQL request with its operation's type, and adds
// the type and name to its access log line.
func (a *API) operationKnown(w http.ResponseWriter, r *http.Request, op *schema.Operation) {
	if x := answer.ExchangeOf(w); x != nil {
		x.Operation = op.Type
	}
	a.logField(r, zap.String("graphql_operation_type", op.Type))
	if op.Name != "" {
		a.logField(r, zap.String("graphql_operation_name", answer.Truncate(op.Name)))
	}
}

// serveGraphQLOnce runs op, a mutation sent with an Idempotency-Key, for caller, whose context
// ctx carries, and writes its answer in media: the kept one to a retry.
func (a *API) serveGraphQLOnce(ctx context.Context, w http.ResponseWriter, r *http.Request, media string, caller posts.Caller, op *schema.Operation) {
	key, _, err := request.IdempotencyKey(r)
	if err == nil && !op.CreatesOnePost() {
		err = request.RefuseIdempotencyKey(r, "a mutation other than one createPost field (not beside other fields, nor in a fragment)")
	}
	if err != nil {
		a.answer.FailGraphQL(w, r, media, err)
		return
	}
	var code string // of the response run writes, for the metrics
	kept, replayed, err := a.cfg.Posts.RunOnce(ctx, caller, posts.Keyed{Key: key, Fingerprint: op.Fingerprint()},
		func(ctx context.Context) (posts.Answer, error) {
			rec := answer.NewRecorder()
			x := &answer.Exchange{ResponseWriter: rec}
			a.executeGraphQL(ctx, x, media, op)
			code = x.Code
			return rec.Kept(), nil
		})
	if err != nil {
		answer.RetryAfterKey(w, err)
		a.answer.FailGraphQL(w, r, media, err)
		return
	}
	if code == "" { // a kept answer: its code is read from it
		code = graphQLCode(kept.Body)
	}
	if x := answer.ExchangeOf(w); x != nil {
		x.Code = code
	}
	answer.WriteKept(w, kept, replayed)
}

// graphQLCode is the code of a GraphQL response in the metrics, as answer.ResponseCode finds it, read
// from its JSON.
func graphQLCode(body []byte) string {
	var res struct {
		Errors []struct {
			Extensions struct {
				Code string `json:"code"`
			} `json:"extensions"`
		} `json:"errors"`
	}
	switch {
	case json.Unmarshal(body, &res) != nil:
		return "ERROR"
	case len(res.Errors) == 0:
		return "OK"
	case res.Errors[0].Extensions.Code == "":
		return "ERROR"
	}
	return res.Errors[0].Extensions.Code
}
