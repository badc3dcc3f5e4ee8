//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/postsedge/caddy-posts/auth/authtest"
)

// otlpReceiver is the OTLP over HTTP endpoint a traced ./caddy exports to (protobuf, as Caddy's
// tracing does by default), decoded with the protocol's own Go types.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	o := &otlpReceiver{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			z, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = z
		}
		data, err := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(data, &req)
		}
		if err != nil {
			t.Errorf("the OTLP export is not a trace service request: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		o.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				o.spans = append(o.spans, ss.Spans...)
			}
		}
		o.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(o.Close)
	return o
}

// env is what points a process's tracing at the receiver, exporting every 50 ms.
func (o *otlpReceiver) env() []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + o.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_TRACES_EXPORTER=otlp", "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_TRACES_SAMPLER=parentbased_always_on"}
}

// all is every span received so far.
func (o *otlpReceiver) all() []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*tracepb.Span(nil), o.spans...)
}

// await waits up to 10 s for a span that matches, and returns it.
func (o *otlpReceiver) await(t *testing.T, what string, match func(*tracepb.Span) bool) *tracepb.Span {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		for _, s := range o.all() {
			if match(s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span %s was exported in 10s; received:\n%s", what, o.describe())
		}
	}
}

// tree waits until the trace of root holds a span of every name of want, and returns the trace's
// spans, drawn as a tree (a span's children indented under it, in the order they started).
func (o *otlpReceiver) tree(t *testing.T, traceID []byte, want ...string) (map[string]*tracepb.Span, string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		byName := map[string]*tracepb.Span{}
		var of []*tracepb.Span
		for _, s := range o.all() {
			if bytes.Equal(s.TraceId, traceID) {
				byName[s.Name] = s
				of = append(of, s)
			}
		}
		missing := false
		for _, name := range want {
			missing = missing || byName[name] == nil
		}
		if !missing {
			return byName, draw(of)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trace %x lacks one of %q after 10s; it holds:\n%s", traceID, want, draw(of))
		}
	}
}

// draw is spans as a tree.
func draw(spans []*tracepb.Span) string {
	var b strings.Builder
	var walk func(parent []byte, depth int)
	walk = func(parent []byte, depth int) {
		for _, s := range spans {
			if bytes.Equal(s.ParentSpanId, parent) {
				fmt.Fprintf(&b, "%s%s %s\n", strings.Repeat("  ", depth), s.Name, attrs(s.Attributes))
				walk(s.SpanId, depth+1)
			}
		}
	}
	roots := map[string]bool{}
	for _, s := range spans {
		found := false
		for _, p := range spans {
			found = found || bytes.Equal(p.SpanId, s.ParentSpanId)
		}
		if !found && !roots[string(s.ParentSpanId)] {
			roots[string(s.ParentSpanId)] = true
			walk(s.ParentSpanId, 0)
		}
	}
	return b.String()
}

func (o *otlpReceiver) describe() string { return draw(o.all()) }

// attrs is a span's attributes as key=value pairs.
func attrs(kvs []*commonpb.KeyValue) string {
	var parts []string
	for _, kv := range kvs {
		parts = append(parts, kv.Key+"="+anyValue(kv.Value))
	}
	return strings.Join(parts, " ")
}

func anyValue(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return v.String()
}

// attr is the attribute key of s, or "".
func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return anyValue(kv.Value)
		}
	}
	return ""
}

// childOf checks that child's parent is parent.
func childOf(t *testing.T, child, parent *tracepb.Span) {
	t.Helper()
	if !bytes.Equal(child.ParentSpanId, parent.SpanId) {
		t.Errorf("span %q is not a child of %q", child.Name, parent.Name)
	}
}

// traceparent is a W3C traceparent header of a new sampled trace, and its trace id.
func traceparent(n byte) (string, []byte) {
	id := bytes.Repeat([]byte{n}, 16)
	return "00-" + hex.EncodeToString(id) + "-00f067aa0ba902b7-01", id
}

// sendTraced sends a request with a JSON body (if any), its traceparent tp (if any) and headers
// (name, value, ...), and returns the answer and its body.
func sendTraced(t *testing.T, method, url, body, tp string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if tp != "" {
		req.Header.Set("traceparent", tp)
	}
	for i := 0; i < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(got)
}

// TestTracesOfARunningCaddy runs ./caddy with Caddy's tracing directive pointed at an OTLP
// receiver and follows requests through the module's spans: a REST create down to the store's
// call, a GraphQL query's operation and phases, a JWKS fetch for a token of a kid the set lacks
// and the timed refreshes after it; and a site without tracing exports nothing.
func TestTracesOfARunningCaddy(t *testing.T) {
	ownProcesses(t)
	recv := newOTLPReceiver(t)
	traced, untraced := freePort(t), freePort(t)
	site := func(port int, tracing string) string {
		return fmt.Sprintf("http://:%d {\n%s\tposts {\n\t\tdata_dir %s\n\t\tjwks_url %s\n\t\tjwks_refresh 1s\n\t\tissuer %s\n\t\taudience %s\n\t\tapi_key process-key alice\n\t}\n}\n",
			port, tracing, t.TempDir(), idp().URL, authtest.Issuer, authtest.Audience)
	}
	caddyfile := "{\n\tadmin off\n\tpersist_config off\n}\n" + site(traced, "\ttracing {\n\t\tspan caddy\n\t}\n") + site(untraced, "")
	p := startProcessWith(t, caddyfile, traced, "/posts?limit=1", http.StatusOK, recv.env()...)
	untracedURL := fmt.Sprintf("http://127.0.0.1:%d", untraced)

	t.Run("a REST create is the route's span over the store's call", func(t *testing.T) {
		// The untraced site's writes first: none of them may export a span.
		for range 3 {
			if res, got := sendTraced(t, "POST", untracedURL+"/posts", `{"title":"untraced","body":"b"}`, "", "Authorization", "ApiKey process-key"); res.StatusCode != http.StatusCreated {
				t.Fatalf("an untraced create answered %d %s", res.StatusCode, got)
			}
		}
		tp, traceID := traceparent(1)
		if res, got := sendTraced(t, "POST", p.url+"/posts", `{"title":"traced","body":"b"}`, tp, "Authorization", "ApiKey process-key"); res.StatusCode != http.StatusCreated {
			t.Fatalf("the create answered %d %s", res.StatusCode, got)
		}
		spans, drawn := recv.tree(t, traceID, "caddy", "POST /posts", "insert_post posts")
		t.Logf("the trace of a REST create:\n%s", drawn)
		route, insert := spans["POST /posts"], spans["insert_post posts"]
		childOf(t, route, spans["caddy"])
		childOf(t, insert, route)
		for span, want := range map[*tracepb.Span]map[string]string{
			route:          {"http.route": "/posts"},
			spans["caddy"]: {"http.route": "/posts"},
			insert:         {"db.system.name": "sqlite", "db.operation.name": "insert_post", "db.collection.name": "posts"},
		} {
			for k, v := range want {
				if got := attr(span, k); got != v {
					t.Errorf("span %q has %s=%q, want %q", span.Name, k, got, v)
				}
			}
		}
		checked := false
		for _, e := range route.Events {
			checked = checked || e.Name == "auth.checked" && attrs(e.Attributes) == "auth.method=api_key auth.outcome=ok"
		}
		if !checked {
			t.Errorf("the route's span has no auth.checked event of the API key: %v", route.Events)
		}
		// The exporter has sent what the untraced requests made before the traced one's.
		n := 0
		for _, s := range recv.all() {
			if s.Name == "insert_post posts" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d spans of an insert were exported, want 1: the untraced site's requests export none", n)
		}
	})

	t.Run("a GraphQL query is an operation's span over its prepare and execution", func(t *testing.T) {
		tp, traceID := traceparent(2)
		body := `{"query":"query Recent { posts(limit: 2) { id title } }","operationName":"Recent"}`
		if res, got := sendTraced(t, "POST", p.url+"/graphql", body, tp); res.StatusCode != http.StatusOK || strings.Contains(got, `"errors"`) {
			t.Fatalf("the query answered %d %s", res.StatusCode, got)
		}
		spans, drawn := recv.tree(t, traceID, "caddy", "query Recent", "graphql.prepare", "graphql.execute", "list_posts posts", "graphql.write")
		t.Logf("the trace of a GraphQL query:\n%s", drawn)
		op := spans["query Recent"]
		childOf(t, op, spans["caddy"])
		childOf(t, spans["graphql.prepare"], op)
		childOf(t, spans["graphql.execute"], op)
		childOf(t, spans["graphql.write"], op)
		childOf(t, spans["list_posts posts"], spans["graphql.execute"])
		if got := attr(op, "graphql.operation.type") + " " + attr(op, "graphql.operation.name"); got != "query Recent" {
			t.Errorf("the operation's span has type and name %q", got)
		}
		if h := attr(op, "graphql.document.hash"); len(h) != 64 {
			t.Errorf("graphql.document.hash is %q, not a SHA-256 in hex", h)
		}
		if got := attr(spans["graphql.execute"], "graphql.execution"); got != "plan" {
			t.Errorf("a query ran by %q, want plan", got)
		}
		for _, s := range spans {
			if strings.Contains(attrs(s.Attributes), "posts(limit") {
				t.Errorf("span %q carries the document's text", s.Name)
			}
		}
	})

	t.Run("an event of REST's change stream is delivered under the stream's span, linked to its write", func(t *testing.T) {
		tp, streamTrace := traceparent(9)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", p.url+"/posts", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("traceparent", tp)
		// A transport of its own: the tests' default one reads a whole answer to check it.
		res, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("the change stream answered %d", res.StatusCode)
		}
		writeTP, writeTrace := traceparent(10)
		if res, got := sendTraced(t, "POST", p.url+"/posts", `{"title":"streamed"}`, writeTP, "Authorization", "ApiKey process-key"); res.StatusCode != http.StatusCreated {
			t.Fatalf("the create answered %d %s", res.StatusCode, got)
		}
		lines := bufio.NewScanner(res.Body)
		for lines.Scan() && lines.Text() != "event: created" {
		}
		if lines.Err() != nil {
			t.Fatalf("the change stream ended before the event: %v", lines.Err())
		}
		written, _ := recv.tree(t, writeTrace, "insert_post posts")
		write := written["insert_post posts"]
		streamed, drawn := recv.tree(t, streamTrace, "GET /posts", "graphql.subscription.event")
		t.Logf("the trace of a change stream:\n%s", drawn)
		delivery := streamed["graphql.subscription.event"]
		childOf(t, delivery, streamed["GET /posts"])
		if len(delivery.Links) != 1 || !bytes.Equal(delivery.Links[0].SpanId, write.SpanId) {
			t.Errorf("the delivery is not linked to the write's span: %v", delivery.Links)
		}
		if got := attr(delivery, "posts.event.via"); got != "own" {
			t.Errorf("posts.event.via is %q, want own", got)
		}
	})

	t.Run("a token of a kid the key set lacks is a JWKS fetch in the request's trace", func(t *testing.T) {
		tp, traceID := traceparent(3)
		token := idp().TokenOfKID(authtest.Claims("alice"), "rsa-rotated")
		if res, got := sendTraced(t, "GET", p.url+"/posts?limit=1", "", tp, "Authorization", "Bearer "+token); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a token of an unknown kid answered %d %s, want 401", res.StatusCode, got)
		}
		spans, drawn := recv.tree(t, traceID, "caddy", "GET /posts", "jwks.fetch")
		t.Logf("the trace of a request that fetched the key set:\n%s", drawn)
		fetch, route := spans["jwks.fetch"], spans["GET /posts"]
		childOf(t, fetch, route)
		if got := attr(fetch, "url.full"); got != idp().URL {
			t.Errorf("the fetch's url.full is %q, want %q", got, idp().URL)
		}
		if got := attr(fetch, "auth.jwks.keys"); got != "2" {
			t.Errorf("the fetch found %s keys, want 2", got)
		}
		// A client's error is the span's error.type, and leaves its status unset (OpenTelemetry's
		// HTTP conventions): a 5xx only fails it.
		if attr(route, "error.type") != "UNAUTHENTICATED" || route.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("the refused request's span has error.type %q and status %v", attr(route, "error.type"), route.Status)
		}
	})

	t.Run("a timed refresh of the key set, once a traced request checked a token, is a trace of its own", func(t *testing.T) {
		// The request of the subtest above checked a token, traced: the refreshes that follow
		// (every second here) are traced with its provider.
		refresh := recv.await(t, "jwks.refresh", func(s *tracepb.Span) bool { return s.Name == "jwks.refresh" })
		if len(refresh.ParentSpanId) != 0 {
			t.Errorf("the refresh's span has a parent")
		}
		spans, drawn := recv.tree(t, refresh.TraceId, "jwks.refresh", "jwks.fetch")
		t.Logf("the trace of a timed refresh:\n%s", drawn)
		childOf(t, spans["jwks.fetch"], refresh)
	})
}

// TestTheTraceOfAGraphQLQueryWhoseStoreFails runs a traced ./caddy on a MongoDB that is not
// there: the query's store call, its execution and its operation record the store's error,
// with the code the client gets.
func TestTheTraceOfAGraphQLQueryWhoseStoreFails(t *testing.T) {
	ownProcesses(t)
	recv := newOTLPReceiver(t)
	port := freePort(t)
	caddyfile := fmt.Sprintf("{\n\tadmin off\n\tpersist_config off\n}\nhttp://:%d {\n\ttracing\n\tposts {\n\t\tmongodb_uri \"mongodb://127.0.0.1:%d/?serverSelectionTimeoutMS=200\"\n\t\ttimeout 1s\n\t\tapi_key process-key alice\n\t}\n}\n", port, freePort(t))
	p := startProcessWith(t, caddyfile, port, "/posts?limit=1", http.StatusServiceUnavailable, recv.env()...)
	tp, traceID := traceparent(4)
	res, body := sendTraced(t, "POST", p.url+"/graphql", `{"query":"{ post(id: \"65f000000000000000000001\") { id } }"}`, tp)
	if !strings.Contains(body, `"UNAVAILABLE"`) {
		t.Fatalf("the query answered %d %s, want an UNAVAILABLE error", res.StatusCode, body)
	}
	spans, drawn := recv.tree(t, traceID, "query", "graphql.execute", "get_post posts")
	t.Logf("the trace of a query whose store failed:\n%s", drawn)
	for _, name := range []string{"query", "graphql.execute", "get_post posts"} {
		s := spans[name]
		if s.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("span %q has status %v, want an error", name, s.Status)
		}
	}
	if got := attr(spans["get_post posts"], "db.system.name"); got != "mongodb" {
		t.Errorf("the store's span has db.system.name %q", got)
	}
	if got := attr(spans["graphql.execute"], "error.type"); got != "UNAVAILABLE" {
		t.Errorf("the execution's error.type is %q, want UNAVAILABLE", got)
	}
	errorEvent := false
	for _, e := range spans["graphql.execute"].Events {
		errorEvent = errorEvent || e.Name == "graphql.error" && strings.Contains(attrs(e.Attributes), "graphql.error.code=UNAVAILABLE")
	}
	if !errorEvent {
		t.Errorf("the execution has no graphql.error event with its code: %v", spans["graphql.execute"].Events)
	}
}

// TestTheDeliveryOfAnEventIsLinkedToItsWrite runs two traced ./caddy on one FerretDB, a
// subscriber on B: a post created on A reaches it as a delivery span on B, a child of the
// subscribe's, linked to A's span of the write (through the event log), which says it was
// relayed and how long after the log took it it was sent; one created on B is B's own.
func TestTheDeliveryOfAnEventIsLinkedToItsWrite(t *testing.T) {
	ownProcesses(t)
	recv := newOTLPReceiver(t)
	db := startFerretProcess(t)
	config := func(port int) string {
		return fmt.Sprintf("{\n\tadmin off\n\tpersist_config off\n}\nhttp://:%d {\n\ttracing\n\tposts {\n\t\tmongodb_uri %s\n\t\tdatabase traced\n\t\tapi_key process-key alice\n\t}\n}\n", port, db.URI)
	}
	portA, portB := freePort(t), freePort(t)
	a := startProcessWith(t, config(portA), portA, "/posts?limit=1", http.StatusOK, recv.env()...)
	b := startProcessWith(t, config(portB), portB, "/posts?limit=1", http.StatusOK, recv.env()...)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subscribeTP, subscribeTrace := traceparent(5)
	ws, _, err := websocket.Dial(ctx, strings.Replace(b.url, "http", "ws", 1)+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: http.Header{"Traceparent": {subscribeTP}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	for _, m := range []string{`{"type":"connection_init","payload":{}}`,
		`{"id":"c","type":"subscribe","payload":{"query":"subscription Created { postCreated { id } }"}}`} {
		if err := ws.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ack, err := ws.Read(ctx); err != nil || !strings.Contains(string(ack), "connection_ack") {
		t.Fatalf("connection_init: %s %v", ack, err)
	}
	subscribed, _ := recv.tree(t, subscribeTrace, "subscription Created")
	subscribe := subscribed["subscription Created"]

	for i, tt := range []struct {
		writer *caddyProcess
		via    string
	}{{a, "relay"}, {b, "own"}} {
		tp, writeTrace := traceparent(byte(6 + i))
		res, body := sendTraced(t, "POST", tt.writer.url+"/posts", `{"title":"linked"}`, tp, "Authorization", "ApiKey process-key")
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("the create answered %d %s", res.StatusCode, body)
		}
		id := createdID([]byte(body))
		for {
			_, msg, err := ws.Read(ctx)
			if err != nil {
				t.Fatalf("the subscriber got no event of %s: %v", id, err)
			}
			if strings.Contains(string(msg), id) {
				break
			}
		}
		written, _ := recv.tree(t, writeTrace, "insert_post posts")
		write := written["insert_post posts"]
		delivery := recv.await(t, "of the delivery linked to the write", func(s *tracepb.Span) bool {
			if s.Name != "graphql.subscription.event" {
				return false
			}
			for _, l := range s.Links {
				if bytes.Equal(l.TraceId, write.TraceId) && bytes.Equal(l.SpanId, write.SpanId) {
					return true
				}
			}
			return false
		})
		t.Logf("the delivery of a write on %s: %s %s", tt.via, delivery.Name, attrs(delivery.Attributes))
		if !bytes.Equal(delivery.TraceId, subscribe.TraceId) || !bytes.Equal(delivery.ParentSpanId, subscribe.SpanId) {
			t.Errorf("the delivery is not a child of the subscribe's span")
		}
		if got := attr(delivery, "posts.event.via"); got != tt.via {
			t.Errorf("posts.event.via is %q, want %q", got, tt.via)
		}
		if attr(delivery, "posts.event.delay_ms") == "" || attr(delivery, "posts.event.position") == "" {
			t.Errorf("the delivery lacks its delay or position: %s", attrs(delivery.Attributes))
		}
	}

	// The connection's log lines name the trace of its upgrade request.
	ws.Close(websocket.StatusNormalClosure, "")
	want := `"trace_id":"` + hex.EncodeToString(subscribeTrace) + `"`
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		closed := ""
		for line := range strings.Lines(b.out.String()) {
			if strings.Contains(line, `"msg":"websocket closed"`) {
				closed = line
			}
		}
		if strings.Contains(closed, want) && strings.Contains(closed, `"span_id":"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log line of the connection's close does not name its trace (%s): %q", want, closed)
		}
	}
}

// TestAReloadThatChangesTracingUnderLoad reloads a traced ./caddy, under a steady load of reads
// and writes, with another span name, then with tracing off, then on again: no request is
// answered with an error, the process lives on, and the module's spans come under the span of
// the config that served them. A request lost on a connection the reload closes is Caddy's
// (TestAReloadUnderLoadFailsNoRequest says why), counted, not failed on.
func TestAReloadThatChangesTracingUnderLoad(t *testing.T) {
	ownProcesses(t)
	recv := newOTLPReceiver(t)
	port := freePort(t)
	admin := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	dir := t.TempDir()
	config := func(tracing string) string {
		return fmt.Sprintf("{\n\tadmin %s\n\tpersist_config off\n}\nhttp://:%d {\n%s\tposts {\n\t\tdata_dir %s\n\t\tapi_key process-key alice\n\t}\n}\n", admin, port, tracing, dir)
	}
	p := startProcessWith(t, config("\ttracing {\n\t\tspan first\n\t}\n"), port, "/posts?limit=1", http.StatusOK, recv.env()...)

	stop := make(chan struct{})
	failures := make(chan string, 100)
	var lost atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("GET", p.url+"/posts?limit=5", nil)
				if (w+i)%2 == 0 {
					req, _ = http.NewRequest("POST", p.url+"/posts", strings.NewReader(`{"title":"under reload"}`))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", "ApiKey process-key")
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					lost.Add(1)
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode >= 400 {
					select {
					case failures <- fmt.Sprintf("%s %s answered %d", req.Method, req.URL.Path, res.StatusCode):
					default: // enough to tell
					}
				}
			}
		})
	}
	under := func(name string) {
		t.Helper()
		parent := recv.await(t, "named "+name, func(s *tracepb.Span) bool { return s.Name == name })
		recv.await(t, "of the module under "+name, func(s *tracepb.Span) bool {
			return bytes.Equal(s.ParentSpanId, parent.SpanId) && (s.Name == "GET /posts" || s.Name == "POST /posts")
		})
	}
	under("first")
	adminLoad(t, admin, config("\ttracing {\n\t\tspan second\n\t}\n"))
	under("second")
	adminLoad(t, admin, config(""))
	time.Sleep(300 * time.Millisecond)
	adminLoad(t, admin, config("\ttracing {\n\t\tspan third\n\t}\n"))
	under("third")
	close(stop)
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Errorf("a request under the reloads failed: %s", f)
	}
	t.Logf("%d requests were lost on connections the reloads closed", lost.Load())
	if res, err := http.Get(p.url + "/posts?limit=1"); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("after the reloads: %v %v", res, err)
	}
}
