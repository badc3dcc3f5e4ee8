// What caches may do with the API's answers (REST and GraphQL over HTTP): the one rule of their
// Cache-Control and Vary.
//
// An answer is public only when its request carried no credential at all: a shared cache then
// hands out what any anonymous client would get anyway. An answer to an identified caller is
// private, even where its body is anyone's (a REST post): the request may have passed an
// authentication handler in front (basic_auth, forward_auth) that a cache before it would skip,
// and a GraphQL answer may hold the caller's own email. Neither is fresh for any time (max-age=0,
// must-revalidate): posts change at any moment, so a cache may store an answer but asks the
// server before it reuses it (with the answer's validator, a 304). Not no-cache, which means the
// same: cache-handler serves an answer that has an ETag without asking, however no-cache it is.
// Every failure is no-store: a 401 or a 503 is of one moment and one caller.
//
// Vary names the credential headers, Authorization and the API key header, on every answer, so
// that a cache never answers a request that carries credentials with an answer to one that
// carried others or none. GraphQL's also names Accept, which picks the media type and GraphiQL.
// A caller that an earlier Caddy handler identified (trust_caddy_auth) may have shown a cookie or
// anything else Vary cannot name, and some shared caches (cache-handler) keep a private answer
// under the headers Vary names: so no cache may store that caller's answers at all.

package handlers

import (
	"net/http"

	"github.com/postsedge/caddy-posts/auth"
)

// The values of Cache-Control, each a slice of one: a later Add copies it rather than write into
// an array that every response shares (so are those of varies).
var (
	cachePublic     = []string{"public, max-age=0, must-revalidate"}
	cachePrivate    = []string{"private, max-age=0, must-revalidate"}
	cacheNotStoring = []string{"private, no-store"}
	cacheNever      = []string{"no-store"}
)

// varies are the Vary headers of the API's answers, made once in New.
type varies struct {
	rest, graphQL []string
}

// newVaries names the credential headers of authn (and, for GraphQL, Accept).
func newVaries(authn *auth.Authenticator) varies {
	credentials := "Authorization"
	if authn != nil && authn.APIKeyHeader != "" {
		credentials += ", " + http.CanonicalHeaderKey(authn.APIKeyHeader)
	}
	return varies{rest: []string{credentials}, graphQL: []string{"Accept, " + credentials}}
}

// setVary marks h, an answer of REST or of GraphQL over HTTP, as depending on the request's
// credentials (and on its Accept for GraphQL).
func (a *API) setVary(h http.Header, graphQL bool) {
	if graphQL {
		h["Vary"] = a.vary.graphQL
	} else {
		h["Vary"] = a.vary.rest
	}
}

// setCacheControl sets the Cache-Control of an answer to caller. A failure later on replaces it
// (setFailed).
func setCacheControl(h http.Header, caller auth.Identity) {
	switch {
	case caller.Anonymous():
		h["Cache-Control"] = cachePublic
	case caller.Method == auth.MethodCaddy:
		h["Cache-Control"] = cacheNotStoring
	default:
		h["Cache-Control"] = cachePrivate
	}
}

// setFailed sets the Cache-Control of a failure: an error status, or a GraphQL answer with
// errors.
func setFailed(h http.Header) { h["Cache-Control"] = cacheNever }
