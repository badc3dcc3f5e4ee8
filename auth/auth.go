// Package auth turns the credentials a request carries into the caller's Identity.
//
// Every request is authenticated on its own (no sessions): a JWT bearer token verified against
// the identity provider's JWKS, an API key (in its header, or as "Authorization: ApiKey <key>"),
// or the user an earlier Caddy handler authenticated; a WebSocket's connection_init payload may
// add its own. Identify is the one rule for all of them. A user id, wherever it comes from, must
// pass ValidUserID. A request without credentials is anonymous; a request whose credentials are
// present but bad is refused, never downgraded to anonymous.
package auth

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/spans"
)

// Identity is the authenticated caller. The zero Identity is anonymous.
type Identity struct {
	// UserID is the caller's user id; posts it writes carry it as their userId.
	UserID string
	// Method names the credential that proved the identity: MethodJWT, MethodAPIKey or MethodCaddy.
	Method string
	// Name and Email are the caller's profile, when the credential gives one.
	Name, Email string
	// Claims are the verified claims of a bearer token (nil for other methods). Read only.
	Claims map[string]any
	// Expires is when the credential stops being accepted: a token's exp plus the leeway. Zero
	// for credentials that do not expire.
	Expires time.Time
}

// The methods of an Identity.
const (
	MethodJWT    = "jwt"
	MethodAPIKey = "api_key"
	MethodCaddy  = "caddy" // a user authenticated by an earlier Caddy handler
)

// Anonymous reports whether the request carried no credentials.
func (id Identity) Anonymous() bool { return id.UserID == "" }

type identityKey struct{}

// NewContext returns a copy of ctx that carries id.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the Identity carried by ctx, or the anonymous Identity.
func FromContext(ctx context.Context) Identity {
	id, _ := ctx.Value(identityKey{}).(Identity)
	return id
}

// Authenticator finds the caller of a request from its credentials.
type Authenticator struct {
	// Tokens verifies bearer tokens; nil refuses them.
	Tokens *Tokens
	// APIKeyHeader, if not "", is a header that carries an API key, in any case. Given in
	// canonical form (http.CanonicalHeaderKey), it is looked up without a copy of its name per
	// request. A key always may come as "Authorization: ApiKey <key>", which Caddy's access log
	// redacts; with no APIKeyHeader, a key in X-API-Key alone is refused (unreadKeyHeader).
	APIKeyHeader string
	// APIKeys are the accepted keys.
	APIKeys []APIKey
	// Upstream, when set, returns the user id that an earlier handler authenticated, or "". An id
	// that fails ValidUserID refuses the request.
	Upstream func(*http.Request) string
}

// Credentials are what a client presents: the headers of an HTTP request (a WebSocket upgrade's
// included), the user an earlier Caddy handler authenticated, and for a WebSocket the payload of
// its connection_init, whose members count as more headers. A WebSocket keeps the Credentials of
// its upgrade, taken while the request was live, and adds the payload when it arrives.
type Credentials struct {
	// Header holds the request's Authorization (Bearer or ApiKey) and API key headers; other
	// headers are ignored.
	Header http.Header
	// Upstream is the user id an earlier Caddy handler authenticated, or "".
	Upstream string
	// Init is the connection_init payload, or nil. Its credentials are read as headers: a JSON
	// object whose Authorization and API key header members, in any case, are strings given once.
	Init json.RawMessage
}

// CredentialsOf returns the credentials of a request: its headers, and the user of an earlier
// handler when Upstream is set. It copies nothing: the Credentials share r's headers.
func (a *Authenticator) CredentialsOf(r *http.Request) Credentials {
	c := Credentials{Header: r.Header}
	if a.Upstream != nil {
		c.Upstream = a.Upstream(r)
	}
	return c
}

// Authenticate returns the caller of an HTTP request: Identify of its CredentialsOf.
func (a *Authenticator) Authenticate(r *http.Request) (Identity, error) {
	return a.Identify(r.Context(), a.CredentialsOf(r))
}

// unreadKeyHeader is the header that carried API keys by default until APIKeyHeader became
// the operator's to set: Caddy's access log writes it in clear, where it redacts Authorization.
// With no APIKeyHeader, a request whose only credential is in it is refused (keyHeaderNotRead)
// rather than served as anonymous, so that its client learns where the key goes.
const unreadKeyHeader = "X-Api-Key"

// keyHeaderNotRead is the refusal of a key in unreadKeyHeader.
const keyHeaderNotRead = "this server does not read API keys from the X-API-Key header, which Caddy's access log writes in clear: send the key as Authorization: ApiKey <key>"

// unreadKey refuses header, whose credentials found are, when its only credential is a key in
// unreadKeyHeader that the Authenticator does not read.
func (a *Authenticator) unreadKey(found []Identity, header http.Header) error {
	if len(found) == 0 && a.APIKeyHeader == "" && header[unreadKeyHeader] != nil {
		return ofMethod(&Error{Code: CodeInvalidRequest, Reason: ReasonNotAccepted, Description: keyHeaderNotRead}, MethodAPIKey)
	}
	return nil
}

// Descriptions of credentials that name different users.
const (
	differentUsers     = "the request's credentials name different users"
	differentInitUsers = "the credentials of the connection_init payload name different users"
	differentUpgrade   = "the credentials of the upgrade request and of connection_init name different users"
)

// Identify returns the caller that credentials name, for REST, GraphQL over HTTP, a WebSocket
// upgrade and its connection_init alike: anonymous when there are none, an *Error when some
// cannot be accepted, and ErrKeysUnavailable when a bearer token cannot be checked yet. Every
// credential present, in the headers, from upstream and in the payload, must be good (a good
// one never excuses a bad one), and all must name the same user: credentials naming different
// users, the payload's and the upgrade request's among them, are a CodeInvalidRequest. The
// caller is the identity of the first credential (a bearer token, the API key header, an ApiKey
// authorization, the upstream user; the payload's before the upgrade's), its profile filled in
// from the others, and it expires with the first of them to expire.
func (a *Authenticator) Identify(ctx context.Context, c Credentials) (Identity, error) {
	caller, err := a.identify(ctx, c)
	method, outcome := outcomeOf(caller, err)
	if method != "" {
		metrics.Auth(method, outcome)
		if span := spans.Current(ctx); span.On() {
			span.Event("auth.checked", attribute.String("auth.method", method), attribute.String("auth.outcome", outcome))
		}
	}
	return caller, err
}

// outcomeOf is how the metrics and spans name the outcome of an Identify: the method of the
// credentials and ok, anonymous or the reason of the refusal; "" for an error of no kind they
// count.
func outcomeOf(caller Identity, err error) (method, outcome string) {
	var refused *Error
	switch {
	case err == nil && caller.Anonymous():
		return "none", "anonymous"
	case err == nil:
		return caller.Method, "ok"
	case errors.As(err, &refused):
		return cmp.Or(refused.Method, "unknown"), refused.Reason
	case errors.Is(err, ErrKeysUnavailable):
		return MethodJWT, ReasonKeysUnavailable
	}
	return "", ""
}

func (a *Authenticator) identify(ctx context.Context, c Credentials) (Identity, error) {
	var init http.Header
	if len(c.Init) > 0 { // the payload's syntax first: it costs no key fetch
		h, err := initHeaders(c.Init, a.APIKeyHeader)
		if err != nil {
			return Identity{}, err
		}
		init = h
	}
	found := make([]Identity, 0, 4) // one per kind of credential at most, so on the stack
	found, err := a.fromHeader(ctx, c.Header, found)
	if err != nil {
		return Identity{}, err
	}
	if c.Upstream != "" {
		if err := ValidUserID(c.Upstream); err != nil {
			// The earlier handler accepted a credential of the client's (a basic_auth user name,
			// say) that names an id this server cannot hold: the credential is unusable here.
			return Identity{}, ofMethod(invalidToken(ReasonBadUserID, "the user that an earlier handler authenticated has an id this server does not accept: "+err.Error()), MethodCaddy)
		}
		found = append(found, Identity{UserID: c.Upstream, Method: MethodCaddy})
	}
	if err := a.unreadKey(found, c.Header); err != nil {
		return Identity{}, err
	}
	caller, err := oneUser(found, differentUsers)
	if err != nil || len(init) == 0 {
		return caller, err
	}
	return a.withInit(ctx, caller, init)
}

// withInit returns the caller of a connection_init payload's headers, who must be the upgrade
// request's caller unless that one is anonymous. Apart from Identify, so that the HTTP path does
// not reserve room for a second set of credentials.
func (a *Authenticator) withInit(ctx context.Context, upgrade Identity, init http.Header) (Identity, error) {
	found, err := a.fromHeader(ctx, init, make([]Identity, 0, 3))
	if err != nil {
		return Identity{}, err
	}
	if err := a.unreadKey(found, init); err != nil {
		return Identity{}, err
	}
	caller, err := oneUser(found, differentInitUsers)
	switch {
	case err != nil:
		return Identity{}, err
	case caller.Anonymous():
		return upgrade, nil
	case upgrade.Anonymous():
		return caller, nil
	}
	return oneUser([]Identity{caller, upgrade}, differentUpgrade)
}

// fromHeader appends to found the callers named by the bearer token, the API key header and
// the ApiKey authorization of header, in that order, or refuses the first bad one.
func (a *Authenticator) fromHeader(ctx context.Context, header http.Header, found []Identity) ([]Identity, error) {
	// Indexed rather than header.Values, which would scan the name to canonicalize it on every
	// request: the name is canonical already.
	creds, err := parseAuthorization(header["Authorization"])
	if err != nil {
		return nil, err
	}
	if creds.bearer != "" {
		if a.Tokens == nil {
			return nil, ofMethod(invalidToken(ReasonNotAccepted, "bearer tokens are not accepted by this server; use an API key"), MethodJWT)
		}
		id, err := a.Tokens.Verify(ctx, creds.bearer)
		if err != nil {
			return nil, ofMethod(err, MethodJWT)
		}
		found = append(found, id)
	}
	id, err := a.apiKeyHeader(header)
	if err != nil {
		return nil, ofMethod(err, MethodAPIKey)
	}
	if !id.Anonymous() {
		found = append(found, id)
	}
	if creds.apiKey != "" {
		id, err := a.apiKey(creds.apiKey)
		if err != nil {
			return nil, ofMethod(err, MethodAPIKey)
		}
		found = append(found, id)
	}
	return found, nil
}

// oneUser returns the caller named by all the credentials found: the first, with the profile of
// the first that has one and the earliest expiry of any. Credentials that disagree are refused
// with the description.
func oneUser(found []Identity, description string) (Identity, error) {
	if len(found) == 0 {
		return Identity{}, nil
	}
	caller := found[0]
	for _, id := range found[1:] {
		if id.UserID != caller.UserID {
			return Identity{}, &Error{Code: CodeInvalidRequest, Reason: ReasonDifferentUsers, Description: description}
		}
		if caller.Name == "" {
			caller.Name = id.Name
		}
		if caller.Email == "" {
			caller.Email = id.Email
		}
		// The caller is as good as the first of their credentials to lapse: past it, the same
		// credentials presented again are refused.
		if !id.Expires.IsZero() && (caller.Expires.IsZero() || id.Expires.Before(caller.Expires)) {
			caller.Expires = id.Expires
		}
	}
	return caller, nil
}

// KeySets says how many of the configured key sets have been fetched at least once, and how
// many there are. It starts the fetches of those not started yet, so that a readiness probe
// loads them before the first token needs them.
func (a *Authenticator) KeySets() (fetched, total int) {
	if a.Tokens == nil {
		return 0, 0
	}
	for _, s := range a.Tokens.keys.sets {
		s.Start()
		if s.Fetched() {
			fetched++
		}
	}
	return fetched, len(a.Tokens.keys.sets)
}
