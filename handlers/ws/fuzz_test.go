package ws

import (
	"context"
	"encoding/json"
	"runtime/metrics"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/handlerstest"
	"github.com/postsedge/caddy-posts/handlers/request"
)

// inbound is what the server makes of one frame before the connection's state is looked at:
// decodeMessage, then what the message's type reads of its payload (the credentials of
// connection_init, the GraphQL request of subscribe or start), as handle reads them. Each
// outcome is a message or an error that closes the connection.
func inbound(typ websocket.MessageType, data []byte) (message, *errcode.Error) {
	m, why := decodeMessage(typ, data)
	if why != nil {
		return m, why
	}
	switch m.Type {
	case "connection_init":
		// Identify, as the server reads connection_init: with no keys or token verifier
		// configured, every credential in the payload is refused, malformed or not (4403 both).
		if _, err := (&auth.Authenticator{APIKeyHeader: "X-API-Key"}).Identify(context.Background(), auth.Credentials{Init: m.Payload}); err != nil {
			return m, errcode.Of(err)
		}
	case "subscribe", "start":
		if _, why := subscribeRequest(m.Payload); why != nil {
			return m, why
		}
	}
	return m, nil
}

// inboundCloseCodes are the codes a frame may close the connection with before any state.
var inboundCloseCodes = map[int]bool{
	1007: true, // text that is not UTF-8
	4400: true, // not a message, or a payload that is not one
	4403: true, // credentials that are not strings, named twice, or not accepted
}

// FuzzWSMessage feeds frames to the message decoder: it never panics, every frame is a message
// (that encodes back to the same message) or a close with a code of inboundCloseCodes and a
// reason a close frame can carry, and what it allocates is bounded by the frame's size.
func FuzzWSMessage(f *testing.F) {
	for _, seed := range []string{
		// valid
		`{"type": "connection_init"}`,
		`{"type": "connection_init", "payload": null}`,
		`{"type": "connection_init", "payload": {"X-API-Key": "key-of-alice", "other": {"a": [1, 2]}}}`,
		`{"type": "connection_init", "payload": {"authorization": "Bearer x.y.z"}}`,
		`{"id": "1", "type": "subscribe", "payload": {"query": "subscription { postCreated { id } }"}}`,
		`{"id": "1", "type": "start", "payload": {"query": "subscription($u: ID) { postCreated(userId: $u) { id } }", "variables": {"u": "alice"}, "operationName": null}}`,
		`{"id": "1", "type": "complete"}`,
		`{"type": "ping", "payload": {"n": 1}}`,
		`{"type": "pong"}`,
		`{"type": "connection_terminate"}`,
		// not UTF-8: in a string, in a key, bare, overlong, a surrogate half
		"{\"type\": \"ping\", \"payload\": \"\xff\"}",
		"{\"type\": \"connection_init\", \"payload\": {\"X-API-Key\xc0\": \"k\"}}",
		"\xfe\xff",
		"{\"type\": \"p\xc0\xafng\"}",
		"{\"id\": \"\xed\xa0\x80\", \"type\": \"complete\"}",
		`{"type": "ping", "payload": "\ud800"}`, // escaped: valid UTF-8, but half a character all the same
		// huge ids, nested payloads
		`{"id": "` + strings.Repeat("9", 30000) + `", "type": "subscribe", "payload": {"query": "{ __typename }"}}`,
		`{"id": 1e999, "type": "complete"}`,
		`{"id": "1", "type": "subscribe", "payload": {"query": "{ __typename }", "variables": ` + strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat(`}`, 5000) + `}}`,
		`{"type": "ping", "payload": ` + strings.Repeat(`[`, 20000) + strings.Repeat(`]`, 20000) + `}`,
		`{"type": "connection_init", "payload": {"x": ` + strings.Repeat(`[`, 3000) + strings.Repeat(`]`, 3000) + `}}`,
		`{"id": "1", "type": "subscribe", "payload": {"query": "{ __typename }", "variables": {` + strings.Repeat(`"a":{},`, 4000) + `"b":{}}}}`,
		// unknown types, and no type
		`{"type": "subscribe_all"}`,
		`{"type": ""}`,
		`{"type": null}`,
		`{"type": 5}`,
		`{}`,
		`[]`,
		`null`,
		``,
		`{"type": "ping"} trailing`,
		// duplicate keys
		`{"type": "ping", "type": "connection_init"}`,
		`{"type": "connection_init", "payload": {"X-API-Key": "a", "x-api-key": "b"}}`,
		`{"type": "connection_init", "payload": {"Authorization": "Bearer a", "AUTHORIZATION": "Bearer a"}}`,
		`{"type": "connection_init", "payload": {"other": 1, "other": 2}}`,
		`{"id": "1", "type": "subscribe", "payload": {"query": "{ a }", "query": 5}}`,
		// payloads of the wrong shape
		`{"type": "connection_init", "payload": [1]}`,
		`{"type": "connection_init", "payload": "Bearer x"}`,
		`{"type": "connection_init", "payload": {"Authorization": 5}}`,
		`{"type": "connection_init", "payload": {"Authorization": null}}`,
		`{"type": "connection_init", "payload": {"Authorization": ["Bearer x"]}}`,
		`{"id": "1", "type": "subscribe", "payload": "{ __typename }"}`,
		`{"id": "1", "type": "subscribe", "payload": {"query": 5}}`,
		`{"id": "1", "type": "subscribe", "payload": {"variables": []}}`,
		`{"id": "1", "type": "subscribe", "payload": {"extensions": {"persistedQuery": {}}}}`,
	} {
		f.Add(false, []byte(seed))
	}
	f.Add(true, []byte(`{"type": "connection_init"}`))
	f.Fuzz(func(t *testing.T, binary bool, data []byte) {
		if int64(len(data)) > handlerstest.Subscriptions.ReadLimit {
			t.Skip("the read limit closes with 1009 before a larger frame is decoded")
		}
		typ := websocket.MessageText
		if binary {
			typ = websocket.MessageBinary
		}
		before := allocatedBytes()
		m, why := inbound(typ, data)
		// A frame of the read limit may cost some 70 bytes for each of its own in maps of
		// variables; a much larger cost would be a decoder that multiplies its input. The
		// runtime counts a span when it is taken, so the count may run ahead by a few.
		if allocated, bound := allocatedBytes()-before, uint64(256*len(data)+1<<20); allocated > bound {
			t.Errorf("a frame of %d bytes allocated %d; want at most %d", len(data), allocated, bound)
		}
		if why != nil {
			switch {
			case !inboundCloseCodes[why.Code.Close]:
				t.Errorf("closed with %d %q; want one of %v", why.Code.Close, why.Message, inboundCloseCodes)
			case len(why.Message) > 123 || !utf8.ValidString(why.Message):
				t.Errorf("a close reason a close frame cannot carry: %q", why.Message)
			case why.Code.Close == 1007 && (binary || request.CheckJSONText("", data) == nil):
				t.Errorf("1007 for a frame of valid UTF-8 text")
			case !binary && request.CheckJSONText("", data) != nil && why.Code.Close != 1007:
				t.Errorf("text that is not UTF-8 closed with %d; want 1007", why.Code.Close)
			}
			return
		}
		if binary || m.Type == "" {
			t.Fatalf("a binary frame, or one of no type, was read as %+v", m)
		}
		var again message
		if err := json.Unmarshal(m.encode(), &again); err != nil || again.ID != m.ID || again.Type != m.Type {
			t.Errorf("%+v encodes as %s, which reads as %+v (%v)", m, m.encode(), again, err)
		}
	})
}

// allocatedBytes is how many bytes the process has allocated on the heap; unlike
// runtime.ReadMemStats, reading it does not stop the world.
func allocatedBytes() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}
