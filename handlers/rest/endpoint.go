// The REST endpoints' common way: the methods of a path, CORS, the caller, posts.Service.Allow,
// and the labels of the metrics.

package rest

import (
	"cmp"
	"net/http"
	"strings"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/request"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/requestid"
	"github.com/postsedge/caddy-posts/spans"
)

// postID is the {id} of a /posts/{id} request.
func postID(r *http.Request) string { return strings.TrimPrefix(r.URL.Path, "/posts/") }

// methods maps the methods of one path to their handlers; HEAD is served by GET.
type methods map[string]func(http.ResponseWriter, *http.Request) error

// endpoint serves one path, route in the metrics and spans: it refuses other methods,
// authenticates the caller (on every request, so that bad credentials are refused even where
// none are needed), and writes any error. A traced request gets a span named as its metrics'
// operation (GET /posts/{id}), with http.route, OpenTelemetry's attribute for the route, set on
// Caddy's span of the request too.
func (h *Handler) endpoint(route string, m methods) http.HandlerFunc {
	allow := allowed(m)
	labels, other := routeLabels(route, m)
	byAccept := route == "/posts" && h.ServeChanges != nil // its GET streams to text/event-stream
	return func(w http.ResponseWriter, r *http.Request) {
		operation := cmp.Or(labels[r.Method], other)
		if x := answer.ExchangeOf(w); x != nil {
			x.Operation = operation
		}
		if ctx, span := spans.Start(r.Context(), operation); span.On() { // named as the metrics label it
			defer span.End()
			span.String("http.route", route)
			spans.Current(r.Context()).String("http.route", route) // Caddy's, the server's span
			r = r.WithContext(ctx)
		}
		h.Vary.Set(w, byAccept)
		if h.CORS.Preflight(w, r, allow, h.Answer.Fail) {
			return
		}
		method := r.Method
		if method == http.MethodHead {
			method = http.MethodGet
		}
		serve, ok := m[method]
		if !ok {
			w.Header().Set("Allow", allow)
			h.Answer.Fail(w, r, errcode.New(errcode.MethodNotAllowed, r.Method+" is not allowed here; allowed: "+allow))
			return
		}
		caller, err := h.Auth.Authenticate(r)
		if err != nil {
			h.Answer.Fail(w, r, err)
			return
		}
		answer.SetCacheControl(w, caller) // a failure from here on is Answer.Fail's: no-store
		// Before the body is read: a request its caller may not make costs no more work.
		action := actionOfMethod(method)
		if err := h.Posts.Allow(caller, action); err != nil {
			h.Answer.Fail(w, r, err)
			return
		}
		if action == posts.Write && method != http.MethodPost { // the one write a key is for (idempotency.go)
			if err := request.RefuseIdempotencyKey(r, method+" "+route); err != nil {
				h.Answer.Fail(w, r, err)
				return
			}
		}
		// An anonymous caller is what auth.FromContext finds in a context that carries none, so
		// only an identified one costs a copy of the request; a write's carries the request's
		// id too, for what the service logs of it.
		if !caller.Anonymous() {
			if h.Identified != nil {
				h.Identified(r, caller)
			}
			ctx := auth.NewContext(r.Context(), caller)
			if action == posts.Write {
				ctx = requestid.With(ctx, h.Answer.ID(r))
			}
			r = r.WithContext(ctx)
		}
		if err := serve(w, r); err != nil {
			h.Answer.Fail(w, r, err)
		}
	}
}

// actionOfMethod is what a REST method asks posts.Service.Allow for.
func actionOfMethod(method string) posts.Action {
	if method == http.MethodGet {
		return posts.Read
	}
	return posts.Write
}

// allowed is the Allow header of a path, in a fixed order.
func allowed(m methods) string {
	var names []string
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		if _, ok := m[method]; ok || (method == http.MethodHead && m[http.MethodGet] != nil) {
			names = append(names, method)
		}
	}
	return strings.Join(names, ", ")
}

// routeLabels are the REST operations of a route as label values: "GET /posts" and so on, and
// "other /posts" for a method it does not take.
func routeLabels(route string, m methods) (labels map[string]string, other string) {
	labels = map[string]string{http.MethodHead: http.MethodHead + " " + route}
	for method := range m {
		labels[method] = method + " " + route
	}
	return labels, "other " + route
}
