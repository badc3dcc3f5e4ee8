package ws

import (
	"testing"

	"github.com/coder/websocket"
)

func TestDecodeMessage(t *testing.T) {
	for _, tt := range []struct {
		name string
		typ  websocket.MessageType
		data string
		code int // 0: a message
	}{
		{"a message is read", websocket.MessageText, `{"id": "1", "type": "complete"}`, 0},
		{"a binary frame closes with 4400", websocket.MessageBinary, `{"type": "ping"}`, 4400},
		{"text that is not UTF-8 closes with 1007", websocket.MessageText, "{\"type\": \"ping\", \"payload\": \"\xff\"}", 1007},
		{"text that is not UTF-8 nor JSON closes with 1007", websocket.MessageText, "\xff", 1007},
		{"an escape of half a surrogate pair closes with 1007", websocket.MessageText, `{"type": "ping", "payload": "\ud800"}`, 1007},
		{"text that is not JSON closes with 4400", websocket.MessageText, `{"type":`, 4400},
		{"a message of no type closes with 4400", websocket.MessageText, `{"id": "1"}`, 4400},
		{"an id that is not a string closes with 4400", websocket.MessageText, `{"id": 1, "type": "complete"}`, 4400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, why := decodeMessage(tt.typ, []byte(tt.data))
			got := 0
			if why != nil {
				got = why.Code.Close
			}
			if got != tt.code {
				t.Errorf("closed with %d (%v); want %d (0: a message)", got, why, tt.code)
			}
		})
	}
}
