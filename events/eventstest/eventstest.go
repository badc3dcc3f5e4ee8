// Package eventstest reads subscription events as a client receives them, for the tests that
// subscribe (schema's, handlers', caddymodule's end-to-end tests, integration's): an event's
// payload is its data and its cursor, and nothing else. Follow runs a Follower for a test. No production code imports it.
package eventstest

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"

	"github.com/postsedge/caddy-posts/events"
)

// Follow runs f until the test ends, and waits then for its Run to return.
func Follow(t testing.TB, f *events.Follower) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// cursorPattern is a cursor as a client sees it: events.CursorLength base64url characters.
var cursorPattern = regexp.MustCompile(fmt.Sprintf(`^[A-Za-z0-9_-]{%d}$`, events.CursorLength))

// ParseEvent splits the payload of a subscription event (next, or the legacy data) into its data
// and its cursor: the payload is exactly {"data":<data>,"extensions":{"cursor":"<cursor>"}}, with
// a cursor of events.CursorLength base64url characters, or it returns an error.
func ParseEvent(payload []byte) (data, cursor string, err error) {
	var event struct {
		Data       json.RawMessage `json:"data"`
		Extensions struct {
			Cursor string `json:"cursor"`
		} `json:"extensions"`
	}
	if err := json.Unmarshal(payload, &event); err != nil {
		return "", "", fmt.Errorf("an event that is not JSON: %s (%w)", payload, err)
	}
	data, cursor = string(event.Data), event.Extensions.Cursor
	if !cursorPattern.MatchString(cursor) {
		return "", "", fmt.Errorf("an event whose cursor %q is not %d base64url characters: %s", cursor, events.CursorLength, payload)
	}
	if want := fmt.Sprintf(`{"data":%s,"extensions":{"cursor":%q}}`, data, cursor); string(payload) != want {
		return "", "", fmt.Errorf("an event %s; want its data and cursor alone: %s", payload, want)
	}
	return data, cursor, nil
}

// SplitEvent is ParseEvent for a test's own goroutine: it fails t when the payload is not an
// event's data and cursor alone.
func SplitEvent(t testing.TB, payload []byte) (data, cursor string) {
	t.Helper()
	data, cursor, err := ParseEvent(payload)
	if err != nil {
		t.Fatal(err)
	}
	return data, cursor
}
