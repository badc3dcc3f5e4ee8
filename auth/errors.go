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
	return &Error{Code: CodeInvalidToken, Description: description}
}

func invalidRequest(description string) *Error {
	return &Error{Code: CodeInvalidRequest, Description: description}
}
