package auth

import "fmt"

// Realm is the realm named in every authentication challenge.
const Realm = "posts"

// Challenge is the WWW-Authenticate value sent when credentials are required but missing (RFC 6750 §3).
const Challenge = `Bearer realm="` + Realm + `"`

// The RFC 6750 §3.1 error codes of an Error.
const (
	// CodeInvalidRequest is a credential given in a malformed way, twice, or naming different users.
	CodeInvalidRequest = "invalid_request"
	// CodeInvalidToken is a credential that is well formed but not accepted: an unknown key, a bad
	// or expired token.
	CodeInvalidToken = "invalid_token"
)

// Error is a credential that was present but could not be accepted. Its fields follow RFC 6750
// §3.1. What a client sees for it (HTTP status, GraphQL code, close code) is errcode.Of's to
// decide, from Code.
type Error struct {
	// Code is the RFC 6750 error code: CodeInvalidToken or CodeInvalidRequest.
	Code string
	// Description says what is wrong, for a person; it never contains the credential.
	Description string
	// Reason says what is wrong in one word of a short fixed list (Reason*), for metrics.
	Reason string
	// Method is the kind of credential refused (MethodJWT, MethodAPIKey, MethodCaddy), or "" when
	// the refusal is of no one credential (a malformed payload, credentials naming different users).
	Method string
}

// The Reasons of an Error, and of a token that cannot be checked yet.
const (
	ReasonMalformed       = "malformed"        // not in the shape its kind of credential takes
	ReasonDifferentUsers  = "different_users"  // credentials naming different users
	ReasonUnknownKey      = "unknown_key"      // an API key that is not configured
	ReasonNotAccepted     = "not_accepted"     // a well-formed token this server does not take (algorithm, crit, key use, no exp)
	ReasonUnknownKID      = "unknown_kid"      // a token signed by a key not in the key sets
	ReasonBadSignature    = "bad_signature"    // a token whose signature does not verify
	ReasonExpired         = "expired"          // a token past its exp
	ReasonNotYetValid     = "not_yet_valid"    // a token before its nbf or iat
	ReasonWrongIssuer     = "wrong_issuer"     // a token of an issuer not in issuers
	ReasonWrongAudience   = "wrong_audience"   // a token for an audience not in audiences
	ReasonBadUserID       = "bad_user_id"      // a user id this server cannot hold, or none
	ReasonKeysUnavailable = "keys_unavailable" // ErrKeysUnavailable: the key sets are not fetched yet
)

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

func invalidToken(reason, description string) *Error {
	return &Error{Code: CodeInvalidToken, Reason: reason, Description: description}
}

func invalidRequest(description string) *Error {
	return &Error{Code: CodeInvalidRequest, Reason: ReasonMalformed, Description: description}
}

// ofMethod says that err, if it is an *Error, refuses a credential of that method.
func ofMethod(err error, method string) error {
	if e, ok := err.(*Error); ok {
		e.Method = method
	}
	return err
}
