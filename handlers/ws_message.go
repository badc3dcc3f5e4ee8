// GraphQL over WebSocket: the messages of both subprotocols, read from and written as JSON.

package handlers

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/errcode"
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
func decodeMessage(typ websocket.MessageType, data []byte) (message, *errcode.Error) {
	var m message
	switch {
	case typ != websocket.MessageText:
		return m, errcode.New(errcode.BadRequest, "Invalid message: binary messages are not accepted")
	case checkJSONText("a text message", data) != nil: // half a surrogate pair (\ud800) is no character either
		return m, errcode.New(errcode.InvalidText, "Invalid message: a text message must be UTF-8")
	case json.Unmarshal(data, &m) != nil || m.Type == "":
		return message{}, errcode.New(errcode.BadRequest, "Invalid message received")
	}
	return m, nil
}

// subscribeRequest reads the payload of a subscribe (start) message as a GraphQL request; a
// payload that is not one closes with 4400.
func subscribeRequest(payload json.RawMessage) (schema.Request, *errcode.Error) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(payload, &fields) != nil || fields == nil {
		return schema.Request{}, errcode.New(errcode.BadRequest, "Invalid message received: the payload must be an object")
	}
	req, err := graphQLRequest(func(name string) (json.RawMessage, error) { return fields[name], nil }, false)
	if err != nil {
		return schema.Request{}, errcode.New(errcode.BadRequest, "Invalid message received: "+truncate(err.Error()))
	}
	return req, nil
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
