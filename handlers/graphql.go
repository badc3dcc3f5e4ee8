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

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/requestid"
	"github.com/postsedge/caddy-posts/schema"
)

// graphqlPath is the GraphQL endpoint.
const graphqlPath = "/graphql"

// The media types of GraphQL responses (GraphQL over HTTP): the first is the spec's own, the
// second the one older clients accept.
const (
	graphQLResponseJSON = "application/graphql-response+json"
	applicationJSON     = "application/json"
)

// graphQLMethods are the methods of /graphql over HTTP, its Allow.
const graphQLMethods = "GET, HEAD, POST"

// graphQLParams are the members of a GraphQL request, as JSON members or query parameters.
var graphQLParams = [...]string{"query", "operationName", "variables", "extensions"}

// serveGraphQL serves /graphql but for WebSocket upgrades: GraphiQL to browsers, and GraphQL
// over HTTP (POST for every operation, GET for queries) to everyone else.
func (a *API) serveGraphQL(w http.ResponseWriter, r *http.Request) {
	a.setVary(w, true)
	if a.crossOrigin(w, r, graphQLMethods, a.failPreflight) {
		return
	}
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	if !get && r.Method != http.MethodPost {
		w.Header().Set("Allow", graphQLMethods)
		a.failGraphQL(w, r, graphQLResponseJSON, errcode.New(errcode.MethodNotAllowed, r.Method+" is not allowed here; allowed: "+graphQLMethods))
		return
	}
	accept := accepting(r.Header.Get("Accept"))
	if get && accept.prefersHTML() {
		if x := exchangeOf(w); x != nil {
			x.operation = "graphiql"
		}
		serveGraphiQL(w, r)
		return
	}
	media := accept.responseType()
	stream := streamRequested(r.Header.Get("Accept"))
	if media == "" && stream == nil {
		a.failGraphQL(w, r, applicationJSON, errcode.New(errcode.NotAcceptable, "the response can only be "+graphQLResponseJSON+", "+applicationJSON+
			", text/event-stream or (for a subscription) multipart/mixed;subscriptionSpec=1.0"))
		return
	}
	// What is answered before the operation is known, to a client that takes only a stream: JSON.
	plain := cmp.Or(media, applicationJSON)
	caller, err := a.cfg.Auth.Authenticate(r)
	if err != nil {
		a.failGraphQL(w, r, plain, err)
		return
	}
	if !caller.Anonymous() && a.cfg.Identified != nil {
		a.cfg.Identified(r, caller)
	}
	setCacheControl(w, caller) // writeGraphQL makes it no-store if errors come
	var req schema.Request
	if get {
		req, err = graphQLQuery(r.URL.RawQuery)
	} else {
		req, err = a.graphQLBody(w, r)
	}
	if err != nil {
		a.failGraphQL(w, r, plain, err)
		return
	}
	if _, ok := stream.(sse); ok && r.Header.Get("Last-Event-ID") != "" {
		// EventSource sends the id of the last event it received when it reconnects: resume.
		req.ResumeFrom = mustJSON(r.Header.Get("Last-Event-ID"))
	}
	req.NoMutation = get
	op, refusal := a.cfg.GraphQL.Prepare(req)
	if op != nil {
		a.operationKnown(w, r, op)
	}
	// A stream carries subscriptions, and the other operations of a client that takes nothing else.
	streamed := stream != nil && (media == "" || op != nil && op.Type == "subscription")
	switch {
	case refusal != nil && isMethodNotAllowed(refusal): // a mutation by GET, whatever else the request holds
		w.Header().Set("Allow", http.MethodPost)
		a.failGraphQL(w, r, plain, refusal.Err)
		return
	case refusal != nil && media == "": // a client that takes only a stream
		// As graphql-sse's reference server does: the errors as the stream's one result.
		a.serveStreamed(w, stream, &graphql.Response{Errors: []*gqlerrors.QueryError{refusal}})
		return
	case refusal != nil:
		writeGraphQL(w, plain, refusalStatus(plain, refusal), &graphql.Response{Errors: []*gqlerrors.QueryError{refusal}})
		return
	case get && op.Type == "subscription" && !streamed: // GET streams a subscription only
		w.Header().Set("Allow", http.MethodPost)
		a.failGraphQL(w, r, plain, errcode.New(errcode.MethodNotAllowed, "a subscription cannot be sent with GET but to a stream; use POST"))
		return
	case op.Type == "subscription" && !streamed:
		a.failGraphQL(w, r, plain, badRequest("a subscription is served over a WebSocket to this URL (subprotocol graphql-transport-ws), or streamed over HTTP to a request that accepts text/event-stream or multipart/mixed;subscriptionSpec=1.0"))
		return
	case streamed && !originAllowed(r, a.cfg.Subscriptions.OriginPatterns):
		a.failGraphQL(w, r, plain, errcode.New(errcode.Forbidden, "the Origin of this request is not allowed to subscribe (allowed_origins)"))
		return
	case streamed && op.Type == "mutation" && r.Header[idempotencyKeyHeader] != nil:
		a.failGraphQL(w, r, plain, badRequest("a mutation with an Idempotency-Key is answered in JSON: accept %s", graphQLResponseJSON))
		return
	}
	if err := a.cfg.Posts.Allow(caller, actionOf(op.Type)); err != nil {
		a.failGraphQL(w, r, plain, err)
		return
	}
	if streamed {
		a.serveStream(w, r, stream, plain, caller, op)
		return
	}
	// The id made now, on the request's goroutine: resolvers that log run on others.
	ctx := requestid.With(auth.NewContext(r.Context(), caller), a.requestID(r))
	if op.Type == "mutation" && r.Header[idempotencyKeyHeader] != nil { // a query, which writes nothing, ignores it
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
		status = requestErrorStatus(media)
	}
	writeGraphQL(w, media, status, res)
}

// actionOf is what an operation of type typ asks posts.Service.Allow for.
func actionOf(typ string) posts.Action {
	switch typ {
	case "query":
		return posts.Read
	case "subscription":
		return posts.Subscribe
	}
	return posts.Write // a mutation; and the strictest for a type this code does not know
}

// requestErrorStatus is the status of a request that is well-formed HTTP but was refused
// before it ran (a syntax error, an invalid operation, a limit): 400 in the spec's own media
// type; 200 in application/json, which older clients read only on 200.
func requestErrorStatus(media string) int {
	if media == graphQLResponseJSON {
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// failGraphQL writes err as a GraphQL error, with the status and headers problem gives it.
func (a *API) failGraphQL(w http.ResponseWriter, r *http.Request, media string, err error) {
	e := a.problem(w, r, err)
	writeGraphQL(w, media, e.Code.Status, &graphql.Response{Errors: []*gqlerrors.QueryError{queryError(e)}})
}

// failPreflight refuses a preflight of /graphql with err, as a GraphQL error.
func (a *API) failPreflight(w http.ResponseWriter, r *http.Request, err error) {
	a.failGraphQL(w, r, graphQLResponseJSON, err)
}

// queryError is e as one error of a GraphQL response.
func queryError(e *errcode.Error) *gqlerrors.QueryError {
	return &gqlerrors.QueryError{Message: e.Message, Extensions: e.Extensions()}
}

func writeGraphQL(w http.ResponseWriter, media string, status int, res *graphql.Response) {
	if x := exchangeOf(w); x != nil {
		x.code = responseCode(res)
	}
	h := w.Header()
	h["Content-Type"], h["X-Content-Type-Options"] = graphQLHeaders(media)
	if len(res.Errors) > 0 {
		setFailed(w)
	}
	w.WriteHeader(status)
	if len(res.Errors) == 0 && res.Extensions == nil && res.Data != nil {
		// What the encoder below writes of data alone, without its check of data, which the
		// schema wrote as compact JSON; in one Write, as REST's answers.
		b := getBuffer()
		*b = append(append(append(*b, `{"data":`...), res.Data...), "}\n"...)
		_, _ = w.Write(*b)
		putBuffer(b)
		return
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(res)
}

// graphQLHeaders are the Content-Type and X-Content-Type-Options of a GraphQL response in media:
// one array for both, each capped, as setJSONHeaders does.
func graphQLHeaders(media string) (contentType, noSniff []string) {
	var typ string
	switch media { // the common ones cost no concatenation
	case graphQLResponseJSON:
		typ = graphQLResponseJSON + "; charset=utf-8"
	case applicationJSON:
		typ = applicationJSON + "; charset=utf-8"
	default:
		typ = media + "; charset=utf-8"
	}
	values := []string{typ, "nosniff"}
	return values[:1:1], values[1:]
}

// graphQLBody reads the request of a POST: a JSON object with the members of graphQLParams.
// Other members are ignored, as clients add their own (Relay's id).
func (a *API) graphQLBody(w http.ResponseWriter, r *http.Request) (schema.Request, error) {
	members, err := a.readObject(w, r, applicationJSON)
	if err != nil {
		return schema.Request{}, err
	}
	return graphQLRequest(func(name string) (json.RawMessage, error) {
		for _, m := range members { // parseObject refused a member given twice
			if m.name == name {
				return m.value, nil
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
		return schema.Request{}, badRequest("the query string is malformed")
	}
	return graphQLRequest(func(name string) (json.RawMessage, error) {
		vs := values[name]
		switch {
		case len(vs) == 0:
			return nil, nil
		case len(vs) > 1:
			return nil, badRequest("query parameter %q is given more than once", name)
		case name == "query" || name == "operationName":
			if err := checkUTF8("query parameter "+name, vs[0]); err != nil {
				return nil, err
			}
			return json.Marshal(vs[0]) // a JSON string, to be read as a POST's member is
		}
		if err := checkJSONText("query parameter "+name, []byte(vs[0])); err != nil {
			return nil, err
		}
		return json.RawMessage(vs[0]), nil
	}, true)
}

// graphQLRequest reads the parameters that param gives, as raw JSON values (nil when absent).
// inQuery says they come from a query string, which changes how errors name them.
func graphQLRequest(param func(name string) (json.RawMessage, error), inQuery bool) (req schema.Request, err error) {
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
		if req.Query, ok = jsonString(query); !ok {
			return req, badRequest("the %s query must be a string", where)
		}
	}
	if operationName != nil {
		if req.OperationName, ok = jsonString(operationName); !ok {
			return req, badRequest("the %s operationName must be a string", where)
		}
	}
	if variables != nil && (json.Unmarshal(variables, &req.Variables) != nil || req.Variables == nil) {
		return req, badRequest("the %s variables must be a JSON object", where)
	}
	var ext []member
	if extensions != nil {
		if ext, ok = objectMembers(extensions); !ok {
			return req, badRequest("the %s extensions must be a JSON object", where)
		}
	}
	if req.PersistedHash, err = persistedHash(memberValue(ext, "persistedQuery")); err != nil {
		return req, err
	}
	if resume := memberValue(ext, "resumeFrom"); string(resume) != "null" { // the schema reads it
		req.ResumeFrom = resume
	}
	if query == nil && req.PersistedHash == "" {
		return req, badRequest("the %s query is required: it holds the GraphQL document", where)
	}
	return req, nil
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
		own:    quality(ranges, graphQLResponseJSON),
		legacy: quality(ranges, applicationJSON),
		html:   quality(ranges, "text/html"),
	}
}

// responseType is the media type of the response the Accept header asks for: the spec's own
// when the client takes it at least as gladly as application/json (or says nothing), else
// application/json, else "" (406).
func (a acceptance) responseType() string {
	switch {
	case !a.given || a.own > 0 && a.own >= a.legacy:
		return graphQLResponseJSON
	case a.legacy > 0:
		return applicationJSON
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
