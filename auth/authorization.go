package auth

import (
	"fmt"
	"strings"
)

// scheme is an Authorization scheme that this package reads; others (Basic, for one) belong to
// handlers in front of this one and are left alone.
type scheme struct {
	name       string // as this package spells it in descriptions, whatever the client sent
	credential string // what follows the name: "token", "key"
	twice      string // the description of a request that gives it twice
}

// schemeBearer and schemeAPIKey are the two schemes parseAuthorization reads.
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

// lower is the lower case of the ASCII letter c, and any other byte as it is.
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
