package stream

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/handlerstest"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// testSubscriptions are the limits of a site that sets none, as handlers.New fills them.
var testSubscriptions = handlerstest.Subscriptions.WithSendQueueFloor()

func TestKeepAlive(t *testing.T) {
	t.Run("a multipart stream's heartbeat is {} every 5 s, whatever ws_keepalive", func(t *testing.T) {
		if got := string(Multipart{}.keepAlive(nil)); got != partStart+"{}\r\n--graphql" {
			t.Errorf("the heartbeat %q; want a part of {}", got)
		}
		if got := (Multipart{}).keepAliveEvery(live.Subscriptions{KeepAlive: 20 * time.Millisecond}); got != 5*time.Second {
			t.Errorf("every %s; want 5s, Apollo's", got)
		}
	})
}

// quickMultipart is multipart with a keep-alive tick every millisecond rather than 5 s.
type quickMultipart struct{ Multipart }

func (quickMultipart) keepAliveEvery(live.Subscriptions) time.Duration { return time.Millisecond }

// bufferOut is an out that keeps what the stream writes, to a client that never leaves.
type bufferOut struct{ bytes.Buffer }

func (o *bufferOut) write(b []byte, _ time.Time) bool { o.Write(b); return true }
func (o *bufferOut) end()                             {}
func (o *bufferOut) gone() <-chan struct{}            { return nil }
func (o *bufferOut) cut()                             {}

func TestAStreamEndsWhenTheServerExits(t *testing.T) {
	t.Run("a multipart stream ends at its next keep-alive with SHUTTING_DOWN", func(t *testing.T) {
		hub := live.NewHub()
		hub.Register(&live.Config{Subscriptions: testSubscriptions, Logger: zap.NewNop(), Exiting: func() bool { return true }})
		s := &stream{frame: quickMultipart{}, wake: make(chan struct{}, 1), hub: hub, ctx: context.Background(), opened: time.Now()}
		var o bufferOut
		s.run(&o)
		last, ok := strings.CutSuffix(o.String(), string(Multipart{}.complete(nil)))
		if !ok {
			t.Fatalf("the stream ends %q; want the end boundary", o.String())
		}
		if i := strings.LastIndex(last, partStart); i < 0 || !strings.Contains(last[i:], `"payload":null`) || !strings.Contains(last[i:], `"code":"SHUTTING_DOWN"`) {
			t.Errorf("the last part of %q says no SHUTTING_DOWN", last)
		}
	})
}

// panicking is SSE whose keep-alive panics, every 5 ms: a fault of the goroutine that writes a
// stream.
type panicking struct{ SSE }

func (panicking) keepAliveEvery(live.Subscriptions) time.Duration { return 5 * time.Millisecond }
func (panicking) keepAlive([]byte) []byte                         { panic("a fault of the stream's writer") }

// TestAPanicOfAStreamsWriterEndsTheStreamNotTheServer has the writer of a stream whose
// connection was taken (HTTP/1.1: run on a goroutine of its own, which no handler of Caddy's
// recovers) panic: the stream ends, its place is given back, the panic is logged at error with
// the request's id and no word of it reaches the client, and the server goes on serving.
func TestAPanicOfAStreamsWriterEndsTheStreamNotTheServer(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	svc, _ := handlerstest.Posts(t, posts.Config{})
	sch, err := schema.New(svc, zap.NewNop(), handlerstest.Limits)
	if err != nil {
		t.Fatal(err)
	}
	hub := live.NewHub()
	cfg := &live.Config{Subscriptions: testSubscriptions, Posts: svc, GraphQL: sch, Logger: zap.New(core),
		ClientIP: func(r *http.Request) string { return r.Header.Get("X-Test-Client-IP") }}
	hub.Register(cfg)
	t.Cleanup(func() { hub.Close(errcode.New(errcode.GoingAway, "the test ends"), 0) })
	h := &Handler{Hub: hub, Config: cfg, Answer: &answer.Failer{Logger: zap.New(core), RequestID: func(*http.Request) string { return "req-1" }}}
	op, refusal := sch.Prepare(schema.Request{Query: "subscription { postCreated { title } }"})
	if refusal != nil {
		t.Fatal(refusal)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var f Framing = SSE{}
		if r.URL.Path == "/panicking" {
			f = panicking{}
		}
		h.Serve(w, r, f, answer.ApplicationJSON, auth.Identity{}, op)
	}))
	t.Cleanup(srv.Close)
	ask := func(path, ip string) *http.Response {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, nil)
		req.Header.Set("X-Test-Client-IP", ip)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res
	}
	other := bufio.NewReader(ask("/", "192.0.2.8").Body) // a stream of the server's own, to read after the panic
	if got, err := other.ReadString('\n'); err != nil || got != ":\n" {
		t.Fatalf("the other stream begins %q, %v", got, err)
	}
	const ip = "192.0.2.9"
	res := ask("/panicking", ip)
	body, _ := io.ReadAll(res.Body) // ends, broken off: the connection is closed
	if res.StatusCode != http.StatusOK || string(body) != ":\n\n" {
		t.Errorf("%d %q; want the stream's opening and its end, no word of the fault", res.StatusCode, body)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if n, _, _ := hub.Counted(live.ClientKey(auth.Identity{}, ip)); n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stream's place was not given back")
		}
	}
	entries := logs.FilterMessage("graphql stream failed").All()
	if len(entries) != 1 {
		t.Fatalf("%d lines %q; want one", len(entries), "graphql stream failed")
	}
	if fields := entries[0].ContextMap(); fields["uuid"] != "req-1" || fields["panic"] != "a fault of the stream's writer" || fields["stack"] == "" {
		t.Errorf("the log line %v; want the request's uuid, the panic and its stack", fields)
	}
	if _, err := svc.Create(t.Context(), auth.Identity{UserID: "alice"}, posts.NewPost{Title: "after the fault"}); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := other.ReadString('\n')
		if err != nil {
			t.Fatalf("the other stream ended (%v) before the post made after the fault", err)
		}
		if strings.Contains(line, "after the fault") {
			break
		}
	}
}
