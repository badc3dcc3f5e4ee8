// Package auth turns the credentials a request carries into the caller's Identity.
//
// Every request is authenticated on its own (no sessions): a JWT bearer token verified against
// the identity provider's JWKS, an API key (in its header, or as "Authorization: ApiKey <key>"),
// or the user an earlier Caddy handler authenticated. A user id, wherever it comes from, must
// pass ValidUserID. A request without credentials is anonymous; a request whose credentials are
// present but bad is refused, never downgraded to anonymous.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
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

// Authenticate returns the caller's Identity: anonymous when the request carries no credentials,
// an *Error when it carries credentials that cannot be accepted, and ErrKeysUnavailable when a
// bearer token cannot be checked yet. Every credential present must be good, and when there are
// several they must name the same user.
func (a *Authenticator) Authenticate(r *http.Request) (Identity, error) {
	found := make([]Identity, 0, 4) // one per kind of credential at most, so on the stack
	creds, err := parseAuthorization(r.Header.Values("Authorization"))
	if err != nil {
		return Identity{}, err
	}
	if creds.bearer != "" {
		if a.Tokens == nil {
			return Identity{}, invalidToken("bearer tokens are not accepted by this server; use an API key")
		}
		id, err := a.Tokens.Verify(r.Context(), creds.bearer)
		if err != nil {
			return Identity{}, err
		}
		found = append(found, id)
	}
	id, err := a.apiKeyHeader(r)
	if err != nil {
		return Identity{}, err
	}
	if !id.Anonymous() {
		found = append(found, id)
	}
	if creds.apiKey != "" {
		id, err := a.apiKey(creds.apiKey)
		if err != nil {
			return Identity{}, err
		}
		found = append(found, id)
	}
	if a.Upstream != nil {
		if userID := a.Upstream(r); userID != "" {
			if err := ValidUserID(userID); err != nil {
				// The earlier handler accepted a credential of the client's (a basic_auth user name,
				// say) that names an id this server cannot hold: the credential is unusable here.
				return Identity{}, invalidToken("the user that an earlier handler authenticated has an id this server does not accept: " + err.Error())
			}
			found = append(found, Identity{UserID: userID, Method: MethodCaddy})
		}
	}
	return oneUser(found)
}

// oneUser returns the caller named by all the credentials, with the profile of the first that
// has one, or refuses credentials that disagree.
func oneUser(found []Identity) (Identity, error) {
	if len(found) == 0 {
		return Identity{}, nil
	}
	caller := found[0]
	for _, id := range found[1:] {
		if id.UserID != caller.UserID {
			return Identity{}, invalidRequest("the request's credentials name different users")
		}
		if caller.Name == "" {
			caller.Name = id.Name
		}
		if caller.Email == "" {
			caller.Email = id.Email
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
func (a *Authenticator) apiKeyHeader(r *http.Request) (Identity, error) {
	values := r.Header.Values(a.APIKeyHeader)
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
	for _, k := range a.APIKeys {
		if subtle.ConstantTimeCompare(digest[:], k.Digest[:]) == 1 && !ok {
			found, ok = k, true
		}
	}
	return found, ok
}
