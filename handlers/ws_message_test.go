package handlers

import (
	"testing"

	"github.com/coder/websocket"
)

func TestDecodeMessage(t *testing.T) {
	for _, tt := range []struct {
		name string
		typ  websocket.MessageType
		data string
		code websocket.StatusCode // 0: a message
	}{
		{"a message is read", websocket.MessageText, `{"id": "1", "type": "complete"}`, 0},
		{"a binary frame closes with 4400", websocket.MessageBinary, `{"type": "ping"}`, closeBadRequest},
		{"text that is not UTF-8 closes with 1007", websocket.MessageText, "{\"type\": \"ping\", \"payload\": \"\xff\"}", websocket.StatusInvalidFramePayloadData},
		{"text that is not UTF-8 nor JSON closes with 1007", websocket.MessageText, "\xff", websocket.StatusInvalidFramePayloadData},
		{"an escape of half a surrogate pair closes with 1007", websocket.MessageText, `{"type": "ping", "payload": "\ud800"}`, websocket.StatusInvalidFramePayloadData},
		{"text that is not JSON closes with 4400", websocket.MessageText, `{"type":`, closeBadRequest},
		{"a message of no type closes with 4400", websocket.MessageText, `{"id": "1"}`, closeBadRequest},
		{"an id that is not a string closes with 4400", websocket.MessageText, `{"id": 1, "type": "complete"}`, closeBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, why := decodeMessage(tt.typ, []byte(tt.data))
			got := websocket.StatusCode(0)
			if why != nil {
				got = why.code
			}
			if got != tt.code {
				t.Errorf("closed with %d (%v); want %d (0: a message)", got, why, tt.code)
			}
		})
	}
}
