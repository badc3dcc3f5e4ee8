// Cross-origin requests from browsers (CORS): which origins may use the API from a page, and what
// tells a browser so. One set of origins, Subscriptions.OriginPatterns (allowed_origins) and the
// request's own host, for every route and transport: the WebSocket upgrade (coder/websocket's
// Accept holds it to them), the streams over HTTP (serveGraphQL refuses another Origin 403), and
// the reading of any answer of /posts, /posts/{id}, /graphql and the OpenAPI path (allowOrigin).
//
// An allowed Origin gets Access-Control-Allow-Origin with its own value, never *, and
// Access-Control-Allow-Credentials: true: the operator named it, and a browser's user reaches the
// API with cookies (trust_caddy_auth) or a credential header, which a page of another origin
// sends only with credentials allowed. Its preflight (crossOrigin) is answered 204 with the
// route's methods and the request headers the API reads. Another Origin gets no CORS header, so
// its page can read nothing; its preflight is refused 403, so a request that needs one (JSON, a
// credential header) is never sent; a simple request is served as before, and runs nothing: a
// body that is not JSON is 415 (json.go), and a GraphQL GET runs no mutation. A request with no
// Origin is not a browser's and gets none of this. Every answer these routes give varies on
// Origin (answer.NewVaries), refusals included, so that a cache never hands one origin's answer to
// another.

package handlers

import (
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
)

// corsExposed are the response headers a page may read besides the safelisted ones: the
// validators, where a post was created, the next page, when to retry, why a credential was
// refused, what a 405's path takes, and that a create was an earlier one's answer.
const corsExposed = "ETag, Last-Modified, Location, Link, Retry-After, WWW-Authenticate, Allow, " + replayedHeader

// corsMaxAge is how long a browser may keep a preflight's answer, in seconds: ten minutes, below
// Chromium's cap of two hours, so that a reload that drops an origin is soon felt.
const corsMaxAge = "600"

// corsRequestHeaders are the request headers the API reads that a page must ask for in a
// preflight (Accept among them: Apollo's multipart value holds a quote, which is not safelisted).
const corsRequestHeaders = "Accept, Authorization, Content-Type, " + idempotencyKeyHeader +
	", If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since, Last-Event-ID"

// corsAllowHeaders is the Access-Control-Allow-Headers of a preflight: corsRequestHeaders and the
// API key header of authn, if it names one.
func corsAllowHeaders(authn *auth.Authenticator) string {
	if authn != nil && authn.APIKeyHeader != "" {
		return corsRequestHeaders + ", " + http.CanonicalHeaderKey(authn.APIKeyHeader)
	}
	return corsRequestHeaders
}

// originAllowed says whether a browser on the Origin of r may use the API: the site's own
// origin (the request's scheme and host: a page of the same host over plain HTTP, which a
// network attacker can forge, is not the HTTPS site's), one of patterns (as coder/websocket
// holds a WebSocket's upgrade to them), or a request with no Origin, which is not a browser's.
func originAllowed(r *http.Request, patterns []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if strings.EqualFold(r.Host, u.Host) && strings.EqualFold(u.Scheme, scheme) {
		return true
	}
	for _, p := range patterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(target)); ok {
			return true
		}
	}
	return false
}

// allowOrigin lets a page on the Origin of r read w's answer, when originAllowed lets it in:
// Access-Control-Allow-Origin (a slice of its own: Caddy's header directive may write into it),
// -Allow-Credentials and -Expose-Headers. A request without Origin, or with another, gets none.
func (a *API) allowOrigin(w http.ResponseWriter, r *http.Request) {
	if origin := r.Header.Get("Origin"); origin != "" && originAllowed(r, a.cfg.Subscriptions.OriginPatterns) {
		w.Header()["Access-Control-Allow-Origin"] = []string{origin}
		answer.SetFixed(w, answer.FixedAllowCredentials, "true")
		answer.SetFixed(w, answer.FixedExposeHeaders, corsExposed)
	}
}

// isPreflight says whether r is a browser's CORS preflight: an OPTIONS with an Origin and
// Access-Control-Request-Method. An OPTIONS without them is an OPTIONS, answered as any method
// a route does not take.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// crossOrigin sets the CORS headers of w's answer to r, a request for a route that takes
// methods (its Allow), and answers r if it is a preflight: 204 to an allowed Origin, 403 through
// refuse to another. It says whether it answered. The caller has set the answer's Vary.
func (a *API) crossOrigin(w http.ResponseWriter, r *http.Request, methods string, refuse func(http.ResponseWriter, *http.Request, error)) (answered bool) {
	if !isPreflight(r) {
		a.allowOrigin(w, r)
		return false
	}
	if x := answer.ExchangeOf(w); x != nil {
		x.Operation = "preflight"
	}
	if !originAllowed(r, a.cfg.Subscriptions.OriginPatterns) {
		refuse(w, r, errcode.New(errcode.Forbidden, "the Origin of this request is not allowed (allowed_origins)"))
		return true
	}
	h := w.Header()
	h["Access-Control-Allow-Origin"] = []string{r.Header.Get("Origin")}
	answer.SetFixed(w, answer.FixedAllowCredentials, "true")
	h["Access-Control-Allow-Methods"] = []string{methods}
	h["Access-Control-Allow-Headers"] = []string{a.corsAllowHeaders}
	h["Access-Control-Max-Age"] = []string{corsMaxAge}
	w.WriteHeader(http.StatusNoContent)
	return true
}
