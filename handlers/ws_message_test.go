package handlers

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

func TestInitHeaders(t *testing.T) {
	for _, tt := range []struct {
		name    string
		payload string
		want    http.Header
		err     string // in the error; "" for none
	}{
		{"no payload has no credentials", ``, nil, ""},
		{"a null payload has none", `null`, nil, ""},
		{"an empty object has none", `{}`, nil, ""},
		{"other members are not read", `{"lang": "en", "nested": {"Authorization": 5}}`, nil, ""},
		{"the API key is read in any case", `{"x-api-key": "k"}`, http.Header{"X-Api-Key": {"k"}}, ""},
		{"both credentials are read", `{"Authorization": "Bearer t", "X-API-Key": "k"}`, http.Header{"Authorization": {"Bearer t"}, "X-Api-Key": {"k"}}, ""},
		{"a credential named twice in two cases is refused", `{"authorization": "Bearer a", "Authorization": "Bearer b"}`, nil, "more than once"},
		{"a credential named twice with one value is refused", `{"X-API-Key": "k", "X-API-Key": "k"}`, nil, "more than once"},
		{"a credential that is a number is refused", `{"Authorization": 5}`, nil, "must be a string"},
		{"a credential that is null is refused", `{"Authorization": null}`, nil, "must be a string"},
		{"a payload that is an array is refused", `[1]`, nil, "must be an object"},
		{"a payload that is a string is refused", `"Bearer t"`, nil, "must be an object"},
		{"a payload with trailing data is refused", `{} {}`, nil, "must be an object"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := initHeaders(json.RawMessage(tt.payload), "X-API-Key")
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error %v; want one that says %q", err, tt.err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v; want %v", got, tt.want)
			}
		})
	}
	t.Run("with no API key header, only Authorization is read", func(t *testing.T) {
		if got, err := initHeaders(json.RawMessage(`{"": "x", "Authorization": "Bearer t"}`), ""); err != nil || len(got) != 1 {
			t.Errorf("got %v, %v; want Authorization alone", got, err)
		}
	})
}

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
