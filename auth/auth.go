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
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
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

// Realm is the realm named in every authentication challenge.
const Realm = "posts"

// Challenge is the WWW-Authenticate value sent when credentials are required but missing (RFC 6750 §3).
const Challenge = `Bearer realm="` + Realm + `"`

// Error is a credential that was present but could not be accepted. Its fields follow RFC 6750 §3.1.
type Error struct {
	// Status is the HTTP status to answer with: 401 for a bad credential, 400 for a malformed request.
	Status int
	// Code is the RFC 6750 error code: "invalid_token" or "invalid_request".
	Code string
	// Description says what is wrong, for a person; it never contains the credential.
	Description string
}

func (e *Error) Error() string { return e.Description }

// Challenge returns the WWW-Authenticate value for this error.
func (e *Error) Challenge() string {
	return fmt.Sprintf(`%s, error="%s", error_description="%s"`, Challenge, e.Code, quotable(e.Description))
}

// quotable makes s fit an RFC 6750 error_description, which allows printable ASCII but for the
// double quote and the backslash: " becomes ', \ becomes /, and any other byte ?.
func quotable(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c == '"':
			b[i] = '\''
		case c == '\\':
			b[i] = '/'
		case c < 0x20 || c > 0x7e:
			b[i] = '?'
		}
	}
	return string(b)
}

func invalidToken(description string) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: description}
}

func invalidRequest(description string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: description}
}

// APIKey is a configured API key: the SHA-256 digest of the key, and the user it stands for.
type APIKey struct {
	Digest [sha256.Size]byte
	UserID string
	// Name and Email are the user's optional profile.
	Name, Email string
}

// digestPrefix marks a key given as the hex SHA-256 digest of the real key.
const digestPrefix = "sha256:"

// ParseAPIKey reads a configured key, either in clear or as "sha256:<64 hex digits>" of the key.
// The user id must pass ValidUserID.
func ParseAPIKey(key, userID string) (APIKey, error) {
	if err := ValidUserID(userID); err != nil {
		return APIKey{}, err
	}
	if hexDigest, ok := strings.CutPrefix(key, digestPrefix); ok {
		var k APIKey
		b, err := hex.DecodeString(hexDigest)
		if err != nil || len(b) != sha256.Size {
			return APIKey{}, fmt.Errorf("%q must be followed by %d hex digits", digestPrefix, 2*sha256.Size)
		}
		copy(k.Digest[:], b)
		k.UserID = userID
		return k, nil
	}
	if key == "" {
		return APIKey{}, errors.New("the key is empty (is its environment variable set?)")
	}
	return APIKey{Digest: sha256.Sum256([]byte(key)), UserID: userID}, nil
}

// Authenticator finds the caller of a request from its credentials.
type Authenticator struct {
	// Tokens verifies bearer tokens; nil refuses them.
	Tokens *Tokens
	// APIKeyHeader is the header that carries an API key, in any case. Given in canonical form
	// (http.CanonicalHeaderKey), it is looked up without a copy of its name per request. A key
	// may also come as "Authorization: ApiKey <key>", which Caddy's access log redacts.
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
	// Init is the connection_init payload, or nil. Its credentials are read by InitHeaders'
	// rules: a JSON object whose Authorization and API key header members, in any case, are
	// strings given once.
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
	// CredentialsOf spelled out: its result, built in memory and then copied into registers for
	// the call, made a request without credentials measurably slower (BenchmarkAuthenticate).
	var upstream string
	if a.Upstream != nil {
		upstream = a.Upstream(r)
	}
	return a.Identify(r.Context(), Credentials{Header: r.Header, Upstream: upstream})
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
// users, the payload's and the upgrade request's among them, are a 400 invalid_request. The
// caller is the identity of the first credential (a bearer token, the API key header, an ApiKey
// authorization, the upstream user; the payload's before the upgrade's), its profile filled in
// from the others, and it expires with the first of them to expire.
func (a *Authenticator) Identify(ctx context.Context, c Credentials) (Identity, error) {
	var init http.Header
	if len(c.Init) > 0 { // the payload's syntax first: it costs no key fetch
		h, err := InitHeaders(c.Init, a.APIKeyHeader)
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
			return Identity{}, invalidToken("the user that an earlier handler authenticated has an id this server does not accept: " + err.Error())
		}
		found = append(found, Identity{UserID: c.Upstream, Method: MethodCaddy})
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
			return nil, invalidToken("bearer tokens are not accepted by this server; use an API key")
		}
		id, err := a.Tokens.Verify(ctx, creds.bearer)
		if err != nil {
			return nil, err
		}
		found = append(found, id)
	}
	id, err := a.apiKeyHeader(header)
	if err != nil {
		return nil, err
	}
	if !id.Anonymous() {
		found = append(found, id)
	}
	if creds.apiKey != "" {
		id, err := a.apiKey(creds.apiKey)
		if err != nil {
			return nil, err
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
			return Identity{}, invalidRequest(description)
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

// scheme is an Authorization scheme that this package reads; others (Basic, for one) belong to
// handlers in front of this one and are left alone.
type scheme struct {
	name       string // as this package spells it in descriptions, whatever the client sent
	credential string // what follows the name: "token", "key"
	twice      string // the description of a request that gives it twice
}

var (
	schemeBearer = scheme{name: "Bearer", credential: "token", twice: "the request has more than one bearer token"}
	schemeAPIKey = scheme{name: "ApiKey", credential: "key", twice: "the request has more than one ApiKey authorization"}
)

// authorization is what the Authorization headers of a request carry for this package.
type authorization struct {
	bearer string // the token of "Bearer <token>"
	apiKey string // the key of "ApiKey <key>"
}

// parseAuthorization reads the Authorization headers. A value whose scheme (the run of token
// characters it starts with, in any case) is Bearer or ApiKey must be exactly the scheme, one
// space and the credential: a bearer token has the b64token syntax of RFC 6750 §2.1, and a key is
// any text without surrounding whitespace. Anything else naming those schemes ("Bearer\tx",
// "Bearer  x", a bare "Bearer", whitespace around the value) is an invalid request rather than
// no credential, so that a client's mistake is not silently served as anonymous. Descriptions
// are fixed sentences: nothing the client sent is quoted.
func parseAuthorization(values []string) (authorization, error) {
	var found authorization
	for _, value := range values {
		trimmed := strings.TrimLeft(value, " \t")
		name := trimmed[:schemeLength(trimmed)]
		var (
			sch  scheme
			slot *string
		)
		switch {
		case asciiEqualFold(name, schemeBearer.name):
			sch, slot = schemeBearer, &found.bearer
		case asciiEqualFold(name, schemeAPIKey.name):
			sch, slot = schemeAPIKey, &found.apiKey
		default:
			continue
		}
		if len(trimmed) != len(value) {
			return authorization{}, invalidRequest("the Authorization header starts with whitespace")
		}
		if *slot != "" {
			return authorization{}, invalidRequest(sch.twice)
		}
		credential, err := sch.credentialOf(value[len(name):])
		if err != nil {
			return authorization{}, err
		}
		*slot = credential
	}
	return found, nil
}

// credentialOf checks what follows the scheme's name: one space, then the credential.
func (sch scheme) credentialOf(rest string) (string, error) {
	credential, ok := strings.CutPrefix(rest, " ")
	switch {
	case strings.Trim(rest, " \t") == "":
		return "", invalidRequest(fmt.Sprintf("the Authorization header names the %s scheme but has no %s", sch.name, sch.credential))
	case !ok || strings.HasPrefix(credential, " ") || strings.HasPrefix(credential, "\t"):
		return "", invalidRequest(fmt.Sprintf("the %s scheme must be followed by exactly one space and the %s", sch.name, sch.credential))
	case strings.HasSuffix(credential, " ") || strings.HasSuffix(credential, "\t"):
		return "", invalidRequest(fmt.Sprintf("the %s %s is followed by whitespace", sch.name, sch.credential))
	case sch == schemeBearer && !isToken68(credential):
		return "", invalidRequest("the bearer token has characters that no token can have")
	}
	return credential, nil
}

// schemeLength is the length of the token (RFC 9110 §5.6.2) that s starts with.
func schemeLength(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return i
		}
	}
	return len(s)
}

// asciiEqualFold is strings.EqualFold for ASCII names: header names and schemes are ASCII, and
// Unicode folding would let "K" (the Kelvin sign) or "ſ" (the long s) stand for k and s.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// isToken68 reports whether s has the syntax of a bearer token (RFC 6750 §2.1):
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isToken68(s string) bool {
	s = strings.TrimRight(s, "=")
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return true
}

// apiKeyHeader returns the caller named by the API key header, or anonymous when there is none.
func (a *Authenticator) apiKeyHeader(header http.Header) (Identity, error) {
	values := header.Values(a.APIKeyHeader)
	switch {
	case len(values) == 0:
		return Identity{}, nil
	case len(values) > 1:
		return Identity{}, invalidRequest(fmt.Sprintf("the %s header is given more than once", a.APIKeyHeader))
	case values[0] == "":
		return Identity{}, invalidRequest(fmt.Sprintf("the %s header is empty", a.APIKeyHeader))
	}
	return a.apiKey(values[0])
}

// apiKey returns the caller named by a key the client sent.
func (a *Authenticator) apiKey(key string) (Identity, error) {
	k, ok := a.lookup(key)
	if !ok {
		return Identity{}, invalidToken("unknown API key")
	}
	return Identity{UserID: k.UserID, Method: MethodAPIKey, Name: k.Name, Email: k.Email}, nil
}

// lookup compares the key's digest with every configured digest in constant time, so the time
// taken tells nothing about which key, if any, came close.
func (a *Authenticator) lookup(key string) (found APIKey, ok bool) {
	digest := sha256.Sum256([]byte(key))
	for i := range a.APIKeys {
		k := &a.APIKeys[i] // not a copy of each key, twice, as ranging over the values made
		if subtle.ConstantTimeCompare(digest[:], k.Digest[:]) == 1 && !ok {
			found, ok = *k, true
		}
	}
	return found, ok
}
