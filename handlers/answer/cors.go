// Cross-origin requests from browsers (CORS): which origins may use the API from a page, and what
// tells a browser so. One set of origins, Subscriptions.OriginPatterns (allowed_origins) and the
// request's own host, for every route and transport: the WebSocket upgrade (coder/websocket's
// Accept holds it to them), the streams over HTTP (graphqlhttp refuses another Origin 403,
// OriginAllowed), and the reading of any answer of /posts, /posts/{id}, /graphql and the
// OpenAPI path (CORS.Allow).
//
// An allowed Origin gets Access-Control-Allow-Origin with its own value, never *, and
// Access-Control-Allow-Credentials: true: the operator named it, and a browser's user reaches the
// API with cookies (trust_caddy_auth) or a credential header, which a page of another origin
// sends only with credentials allowed. Its preflight (CORS.Preflight) is answered 204 with the
// route's methods and the request headers the API reads. Another Origin gets no CORS header, so
// its page can read nothing; its preflight is refused 403, so a request that needs one (JSON, a
// credential header) is never sent; a simple request is served as before, and runs nothing: a
// body that is not JSON is 415 (request.Object), and a GraphQL GET runs no mutation. A request with no
// Origin is not a browser's and gets none of this. Every answer these routes give varies on
// Origin (NewVaries), refusals included, so that a cache never hands one origin's answer to
// another.

package answer

import (
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
)

// corsExposed are the response headers a page may read besides the safelisted ones: the
// validators, where a post was created, the next page, when to retry, why a credential was
// refused, what a 405's path takes, and that a create was an earlier one's answer.
const corsExposed = "ETag, Last-Modified, Location, Link, Retry-After, WWW-Authenticate, Allow, " + ReplayedHeader + ", " + CursorHeader

// corsMaxAge is how long a browser may keep a preflight's answer, in seconds: ten minutes, below
// Chromium's cap of two hours, so that a reload that drops an origin is soon felt.
const corsMaxAge = "600"

// corsRequestHeaders are the request headers the API reads that a page must ask for in a
// preflight (Accept among them: Apollo's multipart value holds a quote, which is not safelisted).
const corsRequestHeaders = "Accept, Authorization, Content-Type, " + IdempotencyKeyHeader +
	", If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since, Last-Event-ID"

// The headers of an idempotency key (request.IdempotencyKey), which a page must ask for and
// may read.
const (
	// IdempotencyKeyHeader is the request header of a key, canonical as net/http keeps it.
	IdempotencyKeyHeader = "Idempotency-Key"
	// ReplayedHeader marks an answer sent again (WriteKept), under Stripe's name for it.
	ReplayedHeader = "Idempotent-Replayed"
)

// CursorHeader carries, on a REST read, the cursor of the event log's position it reflects
// (posts.Service.ReadCursor), which a page may read and resume a subscription from.
const CursorHeader = "Posts-Cursor"

// CORS is which origins' pages may use the API, and what a preflight is answered.
type CORS struct {
	patterns     []string
	allowHeaders string // the Access-Control-Allow-Headers of a preflight
}

// NewCORS lets in the pages of the origins patterns names (Subscriptions.OriginPatterns) and of
// the site's own; a preflight may ask for corsRequestHeaders and the API key header of authn,
// if it names one.
func NewCORS(patterns []string, authn *auth.Authenticator) *CORS {
	c := &CORS{patterns: patterns, allowHeaders: corsRequestHeaders}
	if authn != nil && authn.APIKeyHeader != "" {
		c.allowHeaders += ", " + http.CanonicalHeaderKey(authn.APIKeyHeader)
	}
	return c
}

// OriginAllowed says whether a browser on the Origin of r may use the API: the site's own
// origin (the request's scheme and host: a page of the same host over plain HTTP, which a
// network attacker can forge, is not the HTTPS site's), one of patterns (as coder/websocket
// holds a WebSocket's upgrade to them), or a request with no Origin, which is not a browser's.
func OriginAllowed(r *http.Request, patterns []string) bool {
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

// Allow lets a page on the Origin of r read w's answer, when OriginAllowed lets it in:
// Access-Control-Allow-Origin (a slice of its own: Caddy's header directive may write into it),
// -Allow-Credentials and -Expose-Headers. A request without Origin, or with another, gets none.
func (c *CORS) Allow(w http.ResponseWriter, r *http.Request) {
	if origin := r.Header.Get("Origin"); origin != "" && OriginAllowed(r, c.patterns) {
		w.Header()["Access-Control-Allow-Origin"] = []string{origin}
		SetFixed(w, FixedAllowCredentials, "true")
		SetFixed(w, FixedExposeHeaders, corsExposed)
	}
}

// isPreflight says whether r is a browser's CORS preflight: an OPTIONS with an Origin and
// Access-Control-Request-Method. An OPTIONS without them is an OPTIONS, answered as any method
// a route does not take.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// Preflight sets the CORS headers of w's answer to r, a request for a route that takes
// methods (its Allow), and answers r if it is a preflight: 204 to an allowed Origin, 403 through
// refuse to another. It says whether it answered. The caller has set the answer's Vary.
func (c *CORS) Preflight(w http.ResponseWriter, r *http.Request, methods string, refuse func(http.ResponseWriter, *http.Request, error)) (answered bool) {
	if !isPreflight(r) {
		c.Allow(w, r)
		return false
	}
	if x := ExchangeOf(w); x != nil {
		x.Operation = "preflight"
	}
	if !OriginAllowed(r, c.patterns) {
		refuse(w, r, errcode.New(errcode.Forbidden, "the Origin of this request is not allowed (allowed_origins)"))
		return true
	}
	h := w.Header()
	h["Access-Control-Allow-Origin"] = []string{r.Header.Get("Origin")}
	SetFixed(w, FixedAllowCredentials, "true")
	h["Access-Control-Allow-Methods"] = []string{methods}
	h["Access-Control-Allow-Headers"] = []string{c.allowHeaders}
	h["Access-Control-Max-Age"] = []string{corsMaxAge}
	w.WriteHeader(http.StatusNoContent)
	return true
}
