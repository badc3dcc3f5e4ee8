//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/internal/race"
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

// TestStreamsEndBeforeTheServersWriteTimeout runs Caddy with timeouts { write 5s } and short
// read_body, read_header and idle timeouts: a subscription streamed over SSE or multipart, over
// HTTP/1.1 and HTTP/2, stays open past the read and idle timeouts and gets its event; then, as
// the write timeout caps a whole response (Caddy's, and so a stream's), it ends cleanly shortly
// before it: SSE with no word, after which the client reconnects with Last-Event-ID and gets
// what was written meanwhile; multipart with SERVICE_RESTART and its closing boundary.
func TestStreamsEndBeforeTheServersWriteTimeout(t *testing.T) {
	ownProcesses(t)
	port := freePort(t)
	const writeTimeout = 5 * time.Second
	caddyfile := strings.Replace(processConfig("off", port, ""), "\tgrace_period 5s\n",
		"\tgrace_period 5s\n\tservers {\n\t\tprotocols h1 h2c\n\t\ttimeouts {\n\t\t\tread_body 1s\n\t\t\tread_header 1s\n\t\t\twrite 5s\n\t\t\tidle 1s\n\t\t}\n\t}\n", 1)
	p := startProcess(t, caddyfile, port)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	type opened struct {
		*streamedSub
		at     time.Time
		client *http.Client
	}
	var streams []opened
	for proto, client := range map[int]*http.Client{1: streamClient(), 2: h2cClient()} {
		for _, kind := range []string{overSSE, overMultipart} {
			at := time.Now()
			s, err := openStreamed(ctx, client, kind, p.url, postCreatedTitles)
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			if s.res.ProtoMajor != proto {
				t.Fatalf("a %s stream over %s; want HTTP/%d", kind, s.res.Proto, proto)
			}
			streams = append(streams, opened{s, at, client})
		}
	}
	time.Sleep(2 * time.Second) // past the read and idle timeouts, with nothing sent meanwhile
	if _, err := p.create(keyed(), "after the idle timeout"); err != nil {
		t.Fatal(err)
	}
	var ends sync.WaitGroup
	for _, s := range streams {
		ends.Go(func() {
			var last streamedEvent
			for {
				ev, err := s.next()
				if err != nil && s.kind == overSSE && errors.Is(err, errStreamCut) {
					break
				}
				if err != nil {
					t.Errorf("the %s stream over %s: %v; want its events, then its end", s.kind, s.res.Proto, err)
					return
				}
				if ev.complete {
					break
				}
				if ev.result != nil {
					last = ev
					continue
				}
				if codes := errorCodes(ev.errors); s.kind != overMultipart || len(codes) != 1 || codes[0] != "SERVICE_RESTART" {
					t.Errorf("the %s stream over %s ends with %s; want SERVICE_RESTART over multipart, nothing over SSE", s.kind, s.res.Proto, ev.errors)
				}
			}
			ended := time.Since(s.at)
			t.Logf("the %s stream over %s ended %v after it was opened", s.kind, s.res.Proto, ended.Round(time.Millisecond))
			if title, _ := titleOf(last.result); title != "after the idle timeout" {
				t.Errorf("the %s stream over %s: last event %s; want the one after the idle timeout", s.kind, s.res.Proto, last.result)
			}
			if ended > writeTimeout+500*time.Millisecond || !race.Enabled && ended < writeTimeout-2*time.Second {
				t.Errorf("the %s stream over %s ended %v after it was opened; want shortly before the write timeout, %v", s.kind, s.res.Proto, ended, writeTimeout)
			}
			if s.kind != overSSE {
				return
			}
			if _, err := p.create(keyed(), "while away "+s.res.Proto); err != nil {
				t.Error(err)
				return
			}
			again, err := openStreamed(ctx, s.client, overSSE, p.url, postCreatedTitles, "Last-Event-ID", last.id)
			if err != nil {
				t.Errorf("reconnecting over %s: %v", s.res.Proto, err)
				return
			}
			defer again.close()
			if err := waitForEvent(again, "while away "+s.res.Proto, 5*time.Second); err != nil {
				t.Errorf("the SSE stream over %s resumed with Last-Event-ID: %v", s.res.Proto, err)
			}
		})
	}
	ends.Wait()
}
