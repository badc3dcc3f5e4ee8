package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/schema"
)

// message is one message of either protocol.
type message struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`

	op *operation // the operation a result or event is of, so that the queue drops it once the client completes it
}

// encode writes m as JSON, its payload as it is: an event's payload is encoded once, by its
// feed, for every subscriber.
func (m message) encode() []byte {
	b := append([]byte(`{"type":`), mustJSON(m.Type)...)
	if m.ID != "" {
		b = append(append(b, `,"id":`...), mustJSON(m.ID)...)
	}
	if len(m.Payload) > 0 {
		b = append(append(b, `,"payload":`...), m.Payload...)
	}
	return append(b, '}')
}

// decodeMessage reads a frame the client sent, of type typ, as a message, or says how to close
// the connection: 4400 for a binary frame or one that is not a message, 1007 for text that is
// not UTF-8 (which encoding/json would otherwise read, replacing the bad bytes). What the
// message's type calls for is checked where it is handled.
func decodeMessage(typ websocket.MessageType, data []byte) (message, *closeError) {
	var m message
	switch {
	case typ != websocket.MessageText:
		return m, &closeError{closeBadRequest, "Invalid message: binary messages are not accepted"}
	case !utf8.Valid(data):
		return m, &closeError{websocket.StatusInvalidFramePayloadData, "Invalid message: a text message must be UTF-8"}
	case json.Unmarshal(data, &m) != nil || m.Type == "":
		return message{}, &closeError{closeBadRequest, "Invalid message received"}
	}
	return m, nil
}

// subscribeRequest reads the payload of a subscribe (start) message as a GraphQL request; a
// payload that is not one closes with 4400.
func subscribeRequest(payload json.RawMessage) (schema.Request, *closeError) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(payload, &fields) != nil || fields == nil {
		return schema.Request{}, &closeError{closeBadRequest, "Invalid message received: the payload must be an object"}
	}
	req, err := graphQLRequest(func(name string) (json.RawMessage, error) { return fields[name], nil }, false)
	if err != nil {
		return schema.Request{}, &closeError{closeBadRequest, "Invalid message received: " + truncate(err.Error())}
	}
	return req, nil
}

// initHeaders reads the credentials of a connection_init payload as the headers of a request:
// Authorization and apiKeyHeader, named in any case, each a string and named once, since a name
// given twice leaves which value counts to the reader (encoding/json keeps the last, a proxy
// may check the first). Other members are not read. An empty or null payload has none.
//
// It streams the payload through a json.Decoder, which sees every member, where unmarshalling
// into a map would keep only the last of a name. auth.InitHeaders, once it exists, replaces it.
func initHeaders(payload json.RawMessage, apiKeyHeader string) (http.Header, error) {
	errNotObject := errors.New("the connection_init payload must be an object")
	if len(payload) == 0 || string(payload) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errNotObject
	}
	apiKeyHeader = http.CanonicalHeaderKey(apiKeyHeader)
	var h http.Header
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errNotObject
		}
		name := http.CanonicalHeaderKey(tok.(string)) // so that "authorization" counts as Authorization
		if name != "Authorization" && (apiKeyHeader == "" || name != apiKeyHeader) {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil, errNotObject
			}
			continue
		}
		var value json.RawMessage
		if dec.Decode(&value) != nil {
			return nil, errNotObject
		}
		var s string
		switch {
		case value[0] != '"' || json.Unmarshal(value, &s) != nil: // null is no string either
			return nil, errors.New("the credential " + name + " must be a string")
		case h[name] != nil:
			return nil, errors.New("the connection_init payload names the credential " + name + " more than once")
		}
		if h == nil {
			h = http.Header{}
		}
		h[name] = []string{s}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, errNotObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errNotObject
	}
	return h, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil { // every value here encodes; a fault of ours if not
		b, _ = json.Marshal(map[string]string{"message": "internal server error"})
	}
	return b
}

// truncate shortens s for a close reason, which may not exceed 123 bytes, at a character boundary.
func truncate(s string) string {
	if len(s) <= 64 {
		return s
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
