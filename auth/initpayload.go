package auth

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// initHeaders reads the credentials of a GraphQL-over-WebSocket connection_init payload, which
// clients send as header-like members ({"Authorization": "Bearer ..."}), into headers: the
// Authorization and API key header members, named in any case (ASCII). Identify reads
// Credentials.Init with it. An absent or null payload gives no credentials; otherwise it must be
// a JSON object, and a credential must be a string given once: a payload naming one twice in any
// case ("authorization" and "Authorization") is refused rather than one picked at random. Other
// members are ignored, whatever they hold. An error is an *Error with CodeInvalidRequest whose
// description never quotes the payload.
func initHeaders(payload json.RawMessage, apiKeyHeader string) (http.Header, error) {
	header := http.Header{}
	if len(payload) == 0 {
		return header, nil
	}
	// The syntax first, in full: the decoder below reads as it goes, and would otherwise refuse
	// "{"Authorization":1,]" for its member before it saw the syntax error, or read "000" as 0.
	// json.Valid also bounds the nesting, which Decoder.Token does not.
	if !json.Valid(payload) {
		return nil, errInitNotJSON()
	}
	// With no key header, X-API-Key is kept all the same, to be refused as it is in a request's
	// headers (unreadKeyHeader).
	apiKeyHeader = http.CanonicalHeaderKey(cmp.Or(apiKeyHeader, unreadKeyHeader))
	// A decoder over the tokens sees every member, duplicates among them, where decoding into a
	// map would keep one of them. UseNumber, so that a number too large for a float64 in a
	// member that is ignored is skipped as the valid JSON it is.
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	switch tok, err := dec.Token(); {
	case err != nil:
		return nil, errInitNotJSON()
	case tok == nil: // null
		if err := endOfPayload(dec); err != nil {
			return nil, err
		}
		return header, nil
	case tok != json.Delim('{'):
		return nil, errInitNotObject()
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errInitNotJSON()
		}
		name, _ := tok.(string) // a member's name, the decoder having checked the syntax
		switch {
		case asciiEqualFold(name, "Authorization"):
			name = "Authorization"
		case asciiEqualFold(name, apiKeyHeader):
			name = apiKeyHeader
		default:
			if err := skipValue(dec); err != nil {
				return nil, errInitNotJSON()
			}
			continue
		}
		if _, ok := header[name]; ok {
			return nil, invalidRequest(fmt.Sprintf("the connection_init payload gives %s more than once", name))
		}
		tok, err = dec.Token()
		if err != nil {
			return nil, errInitNotJSON()
		}
		value, ok := tok.(string)
		if !ok {
			return nil, invalidRequest(fmt.Sprintf("the %s of the connection_init payload must be a string", name))
		}
		header[name] = []string{value}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, errInitNotJSON()
	}
	if err := endOfPayload(dec); err != nil {
		return nil, err
	}
	return header, nil
}

// errInitNotJSON refuses a payload that is not JSON: a new *Error each time, as every other
// refusal, since a caller may set its fields.
func errInitNotJSON() *Error {
	return invalidRequest("the connection_init payload is not valid JSON")
}

// errInitNotObject refuses a payload that is JSON but not an object, as errInitNotJSON does.
func errInitNotObject() *Error {
	return invalidRequest("the connection_init payload must be a JSON object")
}

// skipValue reads the next value of the payload's object.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// endOfPayload checks that nothing but white space follows the value.
func endOfPayload(dec *json.Decoder) error {
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errInitNotJSON()
	}
	return nil
}
