package schema_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/schema"
)

// encodedEvent is a response as a feed encodes it: data, and the event's cursor (if any) in the
// extensions, which encoding/json writes last.
func encodedEvent(t *testing.T, data any, cursor string) json.RawMessage {
	t.Helper()
	res := &graphql.Response{}
	if data != nil {
		res.Data, _ = json.Marshal(data)
	}
	if cursor != "" {
		res.Extensions = map[string]any{"cursor": cursor}
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCursorOf(t *testing.T) {
	const cursor = "AQAAAAAAAAAC7vicPspgQ0Q"
	created := func(title string) map[string]any {
		return map[string]any{"postCreated": map[string]any{"title": title}}
	}
	// A title that spells the member CursorOf looks for: JSON escapes its quotes.
	const spelled = `"extensions":{"cursor":"x"}`
	tests := []struct {
		name    string
		payload json.RawMessage
		want    string
	}{
		{"an event's payload has its cursor", encodedEvent(t, created("t"), cursor), cursor},
		{"a payload without extensions has none", encodedEvent(t, created("t"), ""), ""},
		{"a query's result has none", encodedEvent(t, map[string]any{"posts": []any{}}, ""), ""},
		{"errors alone have none", marshalled(t, &graphql.Response{Errors: []*gqlerrors.QueryError{{Message: "no"}}}), ""},
		{"a title that spells the member is escaped and not taken, beside a cursor", encodedEvent(t, created(spelled), cursor), cursor},
		{"a title that spells the member is escaped and not taken, with no cursor", encodedEvent(t, created(spelled), ""), ""},
		{"a title that spells the member with escapes of its own is not taken", encodedEvent(t, created(`\"extensions\":{\"cursor\":\"x\"}`), ""), ""},
		{"data that aliases spell as the member come before the real one, which is taken",
			encodedEvent(t, map[string]any{"extensions": map[string]any{"cursor": "from-the-data"}}, cursor), cursor},
		{"data that aliases spell as the member are not taken when there is no real one",
			encodedEvent(t, map[string]any{"extensions": map[string]any{"cursor": "from-the-data"}}, ""), ""},
		{"errors after such data leave nothing taken either",
			json.RawMessage(`{"errors":[{"message":"no"}],"data":{"extensions":{"cursor":"from-the-data"}}}`), ""},
		{"a payload cut inside the cursor has none", json.RawMessage(`{"data":{},"extensions":{"cursor":"AQAA`), ""},
		{"an empty payload has none", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := schema.CursorOf(tt.payload); got != tt.want {
				t.Errorf("CursorOf(%s) = %q; want %q", tt.payload, got, tt.want)
			}
		})
	}
	t.Run("the escaped title holds no quote that could end a JSON string", func(t *testing.T) {
		payload := string(encodedEvent(t, created(spelled), ""))
		if strings.Contains(payload, spelled) || !strings.Contains(payload, `\"extensions\":{\"cursor\":\"x\"}`) {
			t.Errorf("the payload %s; want the title's quotes escaped", payload)
		}
	})
}

func marshalled(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAnEventIsEncodedAsEncodingJSONWrites checks Schema.encode, which writes the data of a
// response without errors itself: byte for byte what json.Marshal writes, with the cursor of the
// event last, escaped as encoding/json escapes it, or without one.
func TestAnEventIsEncodedAsEncodingJSONWrites(t *testing.T) {
	s, svc, _ := subscribed(t, 16)
	data := map[string]any{"postCreated": map[string]any{"title": "<b>&</b> \"é\" \u2028 \x01", "body": nil, "n": 1}}
	for _, position := range []int64{0, 1, 12345} {
		cursor := svc.Cursor(position)
		if position > 0 && cursor == "" {
			t.Fatalf("no cursor for position %d", position)
		}
		for _, res := range []*graphql.Response{
			{Data: marshalled(t, data)},
			{Data: marshalled(t, data), Errors: []*gqlerrors.QueryError{{Message: "<no>"}}},
			{Errors: []*gqlerrors.QueryError{{Message: "no"}}},
			{Data: json.RawMessage{}}, // empty: left out, as omitempty leaves it
		} {
			want := marshalled(t, &graphql.Response{Data: res.Data, Errors: res.Errors, Extensions: map[string]any{"cursor": cursor}})
			if cursor == "" {
				want = marshalled(t, res)
			}
			if got := s.Encode(res, position); string(got) != string(want) {
				t.Errorf("at position %d: %s; want %s", position, got, want)
			}
		}
	}
}
