//go:build ecosystem

package ecosystem

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/klauspost/compress/zstd"
)

const aliceKey = "alice-key-of-the-ecosystem-tests"

func TestCompression(t *testing.T) {
	s := start(t, "compression", setup{env: []string{"POSTS_API_KEY=" + aliceKey}})
	// Enough posts that a page is past encode's minimum length (512 bytes).
	for i := range 8 {
		if res := s.call(t, "POST", "/posts", fmt.Sprintf(`{"title": "compressible post %d"}`, i), "Authorization: ApiKey "+aliceKey); res.status != 201 {
			t.Fatalf("creating a post: %d %s", res.status, res.body)
		}
	}
	const query = `{"query": "{ posts(limit: 8) { id userId title createdAt updatedAt } }"}`
	requests := []struct {
		name, method, path, body string
	}{
		{"REST JSON", "GET", "/posts", ""},
		{"GraphQL JSON", "POST", "/graphql", query},
	}
	for _, r := range requests {
		plain := s.call(t, r.method, r.path, r.body, "Accept-Encoding: identity")
		if plain.status != 200 || plain.header.Get("Content-Encoding") != "" || !json.Valid([]byte(plain.body)) {
			t.Fatalf("%s without compression: %d, Content-Encoding %q, %s", r.name, plain.status, plain.header.Get("Content-Encoding"), plain.body)
		}
		for _, coding := range []string{"zstd", "gzip"} {
			t.Run(r.name+" arrives in "+coding+" and decodes to the same JSON", func(t *testing.T) {
				res := s.call(t, r.method, r.path, r.body, "Accept-Encoding: "+coding)
				if res.status != 200 || res.header.Get("Content-Encoding") != coding {
					t.Fatalf("%d, Content-Encoding %q; want 200, %s", res.status, res.header.Get("Content-Encoding"), coding)
				}
				if len(res.body) >= len(plain.body) {
					t.Errorf("%d bytes in %s, %d without: not compressed", len(res.body), coding, len(plain.body))
				}
				if got := decode(t, coding, res.body); got != plain.body {
					t.Errorf("decoded:\n%s\nwant:\n%s", got, plain.body)
				}
				vary := strings.Join(res.header.Values("Vary"), ", ")
				if !strings.Contains(vary, "Accept-Encoding") || !strings.Contains(vary, "Authorization") {
					t.Errorf("Vary %q; want the credentials and Accept-Encoding", vary)
				}
				if res.header.Get("Content-Type") != plain.header.Get("Content-Type") {
					t.Errorf("Content-Type %q; want %q", res.header.Get("Content-Type"), plain.header.Get("Content-Type"))
				}
			})
		}
	}

	t.Run("GraphiQL's files, which the module gzips itself, pass through encode as they are", func(t *testing.T) {
		const asset = "/graphql/graphiql/3.9.0/graphiql.min.css"
		plain := s.call(t, "GET", asset, "", "Accept-Encoding: identity")
		res := s.call(t, "GET", asset, "", "Accept-Encoding: zstd, gzip")
		if plain.status != 200 || res.status != 200 || res.header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("%d, then %d with Content-Encoding %q; want 200s, the module's gzip", plain.status, res.status, res.header.Get("Content-Encoding"))
		}
		if decode(t, "gzip", res.body) != plain.body {
			t.Errorf("the gzipped file decodes to another one")
		}
	})
	keepFeedLive(t, s, aliceKey)
	for _, tr := range []transport{sseGET, multipartPOST} {
		for _, coding := range []string{"gzip", "zstd", ""} {
			name := tr.name + " asked in " + coding + " arrives compressed, each event readable at once"
			if coding == "" {
				name = tr.name + " asked with no compression passes encode as it is, each event at once"
			}
			t.Run(name, func(t *testing.T) {
				st := openStream(t, s.url, tr, coding)
				defer st.close()
				if got := st.header.Get("Content-Encoding"); got != coding {
					t.Fatalf("Content-Encoding %q; want %q", got, coding)
				}
				eventsOneByOne(t, st, s, aliceKey, 5)
			})
		}
	}
	t.Run("a subscription over a WebSocket of the same site, which asks for compression, gets its events", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		ws := subscribe(ctx, t, s, "Accept-Encoding: zstd, gzip")
		if res := s.call(t, "POST", "/posts", `{"title": "sent while compressed"}`, "Authorization: ApiKey "+aliceKey); res.status != 201 {
			t.Fatalf("creating a post: %d %s", res.status, res.body)
		}
		_, event, err := ws.Read(ctx)
		if err != nil || !bytes.Contains(event, []byte(`"next"`)) || !bytes.Contains(event, []byte("sent while compressed")) {
			t.Fatalf("the event: %s %v", event, err)
		}
	})
}

// decode undoes the content coding of body.
func decode(t *testing.T, coding, body string) string {
	t.Helper()
	var r io.Reader
	var err error
	switch coding {
	case "gzip":
		r, err = gzip.NewReader(strings.NewReader(body))
	case "zstd":
		var d *zstd.Decoder
		d, err = zstd.NewReader(strings.NewReader(body))
		if d != nil {
			defer d.Close()
		}
		r = d
	}
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("decoding %s: %v", coding, err)
	}
	return string(data)
}

// subscribe opens a graphql-transport-ws connection to the site's /graphql with header ("Name:
// value" lines) on its upgrade, subscribes to postCreated, and returns once the subscription is
// in place (the pong to a ping sent after it: the connection reads its messages in order).
func subscribe(ctx context.Context, t *testing.T, s *site, header ...string) *websocket.Conn {
	t.Helper()
	opts := &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: map[string][]string{}}
	for _, h := range header {
		name, value, _ := strings.Cut(h, ": ")
		opts.HTTPHeader.Add(name, value)
	}
	ws, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.url, "http")+"/graphql", opts)
	if err != nil {
		t.Fatalf("the upgrade: %v", err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	if res.StatusCode != 101 || res.Header.Get("Content-Encoding") != "" {
		t.Fatalf("the upgrade: %d, Content-Encoding %q", res.StatusCode, res.Header.Get("Content-Encoding"))
	}
	for _, m := range []string{`{"type": "connection_init"}`,
		`{"id": "1", "type": "subscribe", "payload": {"query": "subscription { postCreated { title } }"}}`,
		`{"type": "ping"}`} {
		if err := ws.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"connection_ack", "pong"} {
		if _, m, err := ws.Read(ctx); err != nil || !bytes.Contains(m, []byte(want)) {
			t.Fatalf("waiting for %s: %s %v", want, m, err)
		}
	}
	return ws
}
