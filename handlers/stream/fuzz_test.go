package stream

import (
	"encoding/json"
	"errors"
	"io"
	mimemultipart "mime/multipart"
	"regexp"
	"strings"
	"testing"

	"github.com/graph-gophers/graphql-go"
)

// plainCursor is a cursor JSON writes as it is: base64url, as the event log's are.
var plainCursor = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// FuzzStreamFraming frames an event whose title and cursor are anything: over SSE it is one
// data line holding the payload as it is, with no line break of its own, and an id only when
// it is the payload's cursor (always when the cursor is a plain one); over multipart a MIME
// parser reads the heartbeat and the payload as the only parts, whatever the title spells.
func FuzzStreamFraming(f *testing.F) {
	for _, seed := range []struct{ title, cursor string }{
		{"plain", "AQAAAAAAAAAC7vicPspgQ0Q"},
		{"a\nb\rc\r\nd\u2028e\u2029f\u0085g", "AQAAAAAAAAAC7vicPspgQ0Q"},
		{"\r\n--graphql--\r\n", "c"},
		{"--graphql\r\ncontent-type: application/json\r\n\r\n{}", ""},
		{`"}},"extensions":{"cursor":"x"}}`, ""},
		{"event: complete\ndata:\n\n", `"quoted"`},
		{"t", "a\nb"},
		{"t", `back\slash`},
		{"\xff\xfe", "\u2028"},
	} {
		f.Add(seed.title, seed.cursor)
	}
	f.Fuzz(func(t *testing.T, title, cursor string) {
		data, _ := json.Marshal(map[string]any{"postCreated": map[string]any{"title": title}})
		res := &graphql.Response{Data: data}
		if cursor != "" {
			res.Extensions = map[string]any{"cursor": cursor}
		}
		payload, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}

		event := string(SSE{}.result(nil, payload, true))
		if strings.ContainsRune(event, '\r') {
			t.Fatalf("the event %q holds a carriage return", event)
		}
		lines := strings.Split(event, "\n")
		if n := len(lines); n < 4 || lines[n-1] != "" || lines[n-2] != "" || lines[n-3] != "data: "+string(payload) || lines[n-4] != "event: next" {
			t.Fatalf("the event %q; want event: next and the payload as one data line", event)
		}
		switch len(lines) {
		case 5:
			// The id is the cursor as the payload spells it (its JSON escapes kept: a cursor of
			// the log's has none).
			quoted, _ := json.Marshal(cursor)
			if id, ok := strings.CutPrefix(lines[0], "id: "); !ok || cursor == "" || id != string(quoted[1:len(quoted)-1]) {
				t.Fatalf("the event %q: an id that is not the payload's cursor %s", event, quoted)
			}
		case 4:
			if plainCursor.MatchString(cursor) {
				t.Fatalf("the event %q has no id; want %q", event, cursor)
			}
		default:
			t.Fatalf("the event %q has lines of its own", event)
		}

		m := Multipart{}
		body := m.complete(m.result(m.open(nil), payload, true))
		mr := mimemultipart.NewReader(strings.NewReader(string(body)), "graphql")
		var parts []string
		for {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%q: after %d parts: %v", body, len(parts), err)
			}
			b, err := io.ReadAll(p)
			if err != nil {
				t.Fatalf("%q: part %d: %v", body, len(parts), err)
			}
			parts = append(parts, string(b))
		}
		if len(parts) != 2 || parts[0] != "{}" || parts[1] != `{"payload":`+string(payload)+"}" {
			t.Fatalf("%q: the parts %q; want the heartbeat and the payload", body, parts)
		}
	})
}
