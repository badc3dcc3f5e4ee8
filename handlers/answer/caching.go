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
// Both name Origin, which decides the answer's CORS headers (CORS), so that a cache never
// hands a page of one origin an answer made for another, or for no browser.
// A caller that an earlier Caddy handler identified (trust_caddy_auth) may have shown a cookie or
// anything else Vary cannot name, and some shared caches (cache-handler) keep a private answer
// under the headers Vary names: so no cache may store that caller's answers at all.

package answer

import (
	"net/http"

	"github.com/postsedge/caddy-posts/auth"
)

// The values of Cache-Control.
const (
	cachePublic     = "public, max-age=0, must-revalidate"
	cachePrivate    = "private, max-age=0, must-revalidate"
	cacheNotStoring = "private, no-store"
	// CacheNoStore is the Cache-Control of a failure, and of a stream.
	CacheNoStore = "no-store"
)

// fixedHeaders holds the values of the header fields that every answer of the API sets to one
// of a few fixed strings, each field a capped slice of it: an append to a field copies it, and
// a write into a field's value in place (as Caddy's header directive replaces a value, when
// deferred) changes this answer's alone. Slices shared by every answer were so changed for
// every site of the process: a replace of public by private on one site's Cache-Control made
// every site's anonymous answers private, and private by public every site's identified ones
// public. An Exchange holds the array of its answer, so setting them allocates nothing.
type fixedHeaders [6]string

// The fields of fixedHeaders, by their index, for SetFixed.
const (
	FixedVary = iota
	FixedCacheControl
	FixedContentType
	FixedNoSniff
	FixedAllowCredentials
	FixedExposeHeaders
)

var fixedNames = [len(fixedHeaders{})]string{"Vary", "Cache-Control", "Content-Type", "X-Content-Type-Options",
	"Access-Control-Allow-Credentials", "Access-Control-Expose-Headers"}

// SetFixed sets the field i of fixedHeaders (FixedVary, FixedCacheControl, ...) on w's answer
// to value.
func SetFixed(w http.ResponseWriter, i int, value string) {
	x := ExchangeOf(w)
	if x == nil {
		w.Header()[fixedNames[i]] = []string{value}
		return
	}
	x.fixed[i] = value
	w.Header()[fixedNames[i]] = x.fixed[i : i+1 : i+1]
}

// Varies are the Vary headers of the API's answers, made once per config (NewVaries).
type Varies struct {
	rest, graphQL string
}

// NewVaries names the credential headers of authn and Origin (and, for answers that depend on
// it, Accept).
func NewVaries(authn *auth.Authenticator) Varies {
	credentials := "Authorization"
	if authn != nil && authn.APIKeyHeader != "" {
		credentials += ", " + http.CanonicalHeaderKey(authn.APIKeyHeader)
	}
	return Varies{rest: credentials + ", Origin", graphQL: "Accept, " + credentials + ", Origin"}
}

// Set marks w's answer, of REST or of GraphQL over HTTP, as depending on the request's
// credentials, and on its Accept when accept is set: GraphQL's, and REST's list of posts, which
// streams its changes to a client that asks for text/event-stream.
func (v Varies) Set(w http.ResponseWriter, accept bool) {
	if accept {
		SetFixed(w, FixedVary, v.graphQL)
	} else {
		SetFixed(w, FixedVary, v.rest)
	}
}

// SetVaryOrigin marks w's answer, the same to every caller (the OpenAPI document, a path that
// names nothing), as depending on the request's Origin alone, which decides its CORS headers.
func SetVaryOrigin(w http.ResponseWriter) { SetFixed(w, FixedVary, "Origin") }

// SetCacheControl sets the Cache-Control of w's answer to caller. A failure later on replaces
// it (SetFailed).
func SetCacheControl(w http.ResponseWriter, caller auth.Identity) {
	switch {
	case caller.Anonymous():
		SetFixed(w, FixedCacheControl, cachePublic)
	case caller.Method == auth.MethodCaddy:
		SetFixed(w, FixedCacheControl, cacheNotStoring)
	default:
		SetFixed(w, FixedCacheControl, cachePrivate)
	}
}

// SetFailed sets the Cache-Control of a failure: an error status, or a GraphQL answer with
// errors.
func SetFailed(w http.ResponseWriter) { SetFixed(w, FixedCacheControl, CacheNoStore) }
