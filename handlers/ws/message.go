// The messages of both subprotocols, read from and written as JSON.

package ws

import (
	"encoding/json"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/request"
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
	b := append([]byte(`{"type":`), answer.MustJSON(m.Type)...)
	if m.ID != "" {
		b = append(append(b, `,"id":`...), answer.MustJSON(m.ID)...)
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
	case request.CheckJSONText("a text message", data) != nil: // half a surrogate pair (\ud800) is no character either
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
	req, err := request.GraphQL(func(name string) (json.RawMessage, error) { return fields[name], nil }, false)
	if err != nil {
		return schema.Request{}, errcode.New(errcode.BadRequest, "Invalid message received: "+answer.Truncate(err.Error()))
	}
	return req, nil
}
