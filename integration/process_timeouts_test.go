//go:build integration

package integration

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestWebSocketsOutliveTheServerTimeouts runs Caddy with the short read, write and idle timeouts
// a production server sets against slow clients: they bound requests, and a WebSocket, which
// outlives its upgrade request, keeps its connection past them.
func TestWebSocketsOutliveTheServerTimeouts(t *testing.T) {
	ownProcesses(t)
	port := freePort(t)
	caddyfile := strings.Replace(processConfig("off", port, ""), "\tgrace_period 5s\n",
		"\tgrace_period 5s\n\tservers {\n\t\ttimeouts {\n\t\t\tread_body 1s\n\t\t\tread_header 1s\n\t\t\twrite 1s\n\t\t\tidle 1s\n\t\t}\n\t}\n", 1)
	p := startProcess(t, caddyfile, port)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ws := p.subscribe(ctx, t, `{}`)
	time.Sleep(2500 * time.Millisecond) // past every timeout of the server
	if _, err := p.create(keyed(), "after the timeouts"); err != nil {
		t.Fatal(err)
	}
	if _, event, err := ws.Read(ctx); err != nil || !bytes.Contains(event, []byte("after the timeouts")) {
		t.Fatalf("the subscriber after the server's timeouts: %s %v\n%s", event, err, p.out)
	}
	if res, err := http.Get(p.url + "/posts?limit=1"); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("a request beside it: %v %v", res, err)
	}
}

// TestStreamsOutliveTheServerTimeouts: a subscription streamed over SSE or multipart is one long
// response, which Caddy's read_body, write and idle timeouts would cut; it stays open past them
// and gets its event, over HTTP/1.1 and HTTP/2.
func TestStreamsOutliveTheServerTimeouts(t *testing.T) {
	ownProcesses(t)
	port := freePort(t)
	caddyfile := strings.Replace(processConfig("off", port, ""), "\tgrace_period 5s\n",
		"\tgrace_period 5s\n\tservers {\n\t\tprotocols h1 h2c\n\t\ttimeouts {\n\t\t\tread_body 1s\n\t\t\tread_header 1s\n\t\t\twrite 1s\n\t\t\tidle 1s\n\t\t}\n\t}\n", 1)
	p := startProcess(t, caddyfile, port)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var streams []*streamedSub
	for proto, client := range map[int]*http.Client{1: streamClient(), 2: h2cClient()} {
		for _, kind := range []string{overSSE, overMultipart} {
			s, err := openStreamed(ctx, client, kind, p.url, postCreatedTitles)
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			if s.res.ProtoMajor != proto {
				t.Fatalf("a %s stream over %s; want HTTP/%d", kind, s.res.Proto, proto)
			}
			streams = append(streams, s)
		}
	}
	time.Sleep(3 * time.Second) // past every timeout of the server, with nothing sent meanwhile
	if _, err := p.create(keyed(), "after the timeouts"); err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		if err := waitForEvent(s, "after the timeouts", 5*time.Second); err != nil {
			t.Errorf("the %s subscriber over %s after the server's timeouts: %v", s.kind, s.res.Proto, err)
		}
	}
}
