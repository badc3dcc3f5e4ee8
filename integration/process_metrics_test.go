//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metricsConfig is a Caddyfile with the posts site on port and Caddy's metrics handler at
// /metrics beside it, admin on adminPort, and the access log on stderr.
func metricsConfig(adminPort, port int) string {
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
	grace_period 5s
	metrics
	log posts {
		include http.handlers.posts
		level DEBUG
	}
}
http://:%d {
	log {
		output stderr
	}
	handle /metrics {
		metrics
	}
	handle {
		posts {
			api_key process-key alice
			max_body_size 1KiB
		}
	}
}
`, adminPort, port)
}

// scrape reads the metrics at url.
func scrape(t *testing.T, url string) (text []byte, families map[string]*dto.MetricFamily) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	text, err = io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, res.StatusCode, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err = parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("the metrics at %s do not parse: %v", url, err)
	}
	return text, families
}

// sample is the value of the series of name whose labels include labels ("k=v" each): a
// counter's or gauge's value, a histogram's count; 0 when there is no such series.
func sample(families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	family := families[name]
	if family == nil {
		return 0
	}
	var sum float64
series:
	for _, m := range family.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func TestMetricsOfARunningCaddy(t *testing.T) {
	ownProcesses(t)
	admin, port := freePort(t), freePort(t)
	p := startProcess(t, metricsConfig(admin, port), port)
	adminMetrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", admin)
	_, before := scrape(t, adminMetrics)

	// What a user does, each of which some series counts.
	send := func(method, path, body, key string) int {
		t.Helper()
		req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "ApiKey "+key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	wantStatus := func(got, want int, what string) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: status %d, want %d", what, got, want)
		}
	}
	wantStatus(send("GET", "/posts", "", ""), 200, "GET /posts")
	wantStatus(send("GET", "/posts/0123456789abcdef01234567", "", ""), 404, "GET of a missing post")
	req, _ := http.NewRequest("POST", p.url+"/posts", strings.NewReader(`{"title": "counted"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "ApiKey process-key")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var counted struct{ ID string }
	if err := json.NewDecoder(res.Body).Decode(&counted); err != nil || res.StatusCode != 201 {
		t.Fatalf("POST /posts: status %d, %v", res.StatusCode, err)
	}
	res.Body.Close()
	// Read twice from the cache of posts, which its write's commit filled.
	wantStatus(send("GET", "/posts/"+counted.ID, "", ""), 200, "GET of the post written")
	wantStatus(send("GET", "/posts/"+counted.ID, "", ""), 200, "GET of the post written, again")
	wantStatus(send("POST", "/posts", `{"title": "refused"}`, "wrong-key"), 401, "POST with an unknown key")
	wantStatus(send("POST", "/posts", `{"title": "`+strings.Repeat("x", 2048)+`"}`, "process-key"), 413, "POST past max_body_size")
	wantStatus(send("POST", "/graphql", `{"query": "query Newest { posts(limit: 1) { id } }"}`, ""), 200, "a GraphQL query")
	wantStatus(send("POST", "/graphql", `{"query": "query Newest { posts(limit: 1) { id } }"}`, ""), 200, "the same GraphQL query again")
	wantStatus(send("POST", "/graphql", `{"query": "{ posts("}`, ""), 400, "a GraphQL syntax error")
	var aliases strings.Builder
	for i := range 31 {
		fmt.Fprintf(&aliases, " a%d: __typename", i)
	}
	wantStatus(send("POST", "/graphql", `{"query": "{`+aliases.String()+` }"}`, ""), 400, "a GraphQL query past max_aliases")

	// A subscriber, who gets one event, then leaves.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ws := p.subscribe(ctx, t, `{"Authorization":"ApiKey process-key"}`)
	// The subscribe message is read after the ack: once a series shows the subscriber, the event
	// reaches it.
	waitFor(t, adminMetrics, "caddy_posts_subscribers", 1)
	_, during := scrape(t, adminMetrics)
	wantStatus(send("POST", "/posts", `{"title": "pushed"}`, "process-key"), 201, "POST /posts with a subscriber")
	if _, event, err := ws.Read(ctx); err != nil || !bytes.Contains(event, []byte(`"pushed"`)) {
		t.Fatalf("the event: %s %v", event, err)
	}
	ws.Close(websocket.StatusNormalClosure, "done")
	waitFor(t, adminMetrics, "caddy_posts_websocket_connections", 0)
	text, after := scrape(t, adminMetrics)

	moved := []struct {
		name   string
		labels []string
		by     float64
	}{
		{"caddy_posts_requests_total", []string{"interface=rest", "operation=GET /posts", "code=200"}, 1},
		{"caddy_posts_request_duration_seconds", []string{"interface=rest", "operation=GET /posts", "code=200"}, 1},
		{"caddy_posts_requests_total", []string{"interface=rest", "operation=GET /posts/{id}", "code=404"}, 1},
		{"caddy_posts_requests_total", []string{"interface=rest", "operation=POST /posts", "code=201"}, 2},
		{"caddy_posts_requests_total", []string{"interface=rest", "operation=POST /posts", "code=401"}, 1},
		{"caddy_posts_requests_total", []string{"interface=rest", "operation=POST /posts", "code=413"}, 1},
		{"caddy_posts_requests_total", []string{"interface=graphql", "operation=query", "code=OK"}, 2},
		{"caddy_posts_requests_total", []string{"interface=graphql", "operation=none", "code=MAX_ALIASES_LIMIT"}, 1},
		{"caddy_posts_limit_refusals_total", []string{"limit=max_aliases"}, 1},
		{"caddy_posts_document_cache_total", []string{"event=hit"}, 1},
		{"caddy_posts_document_cache_total", []string{"event=registration"}, 2}, // the query, the subscription
		{"caddy_posts_requests_total", []string{"interface=graphql", "operation=none", "code=GRAPHQL_PARSE_FAILED"}, 1},
		{"caddy_posts_requests_total", []string{"interface=ws", "operation=subscription", "code=OK"}, 1},
		{"caddy_posts_requests_total", []string{"interface=ws", "operation=connection", "code=1000"}, 1},
		{"caddy_posts_store_operation_duration_seconds", []string{"backend=sqlite", "operation=insert_post"}, 2},
		{"caddy_posts_store_operation_duration_seconds", []string{"backend=sqlite", "operation=get_post"}, 3},
		{"caddy_posts_requests_total", []string{"interface=rest", "operation=GET /posts/{id}", "code=200"}, 2},
		{"caddy_posts_post_cache_total", []string{"event=hit"}, 2},
		{"caddy_posts_post_cache_total", []string{"event=miss"}, 1}, // the post that is not there
		{"caddy_posts_post_cache_total", []string{"event=eviction"}, 0},
		{"caddy_posts_store_errors_total", nil, 0},
		{"caddy_posts_auth_total", []string{"method=api_key", "outcome=ok"}, 4}, // 3 POSTs (413 among them), connection_init
		{"caddy_posts_auth_total", []string{"method=api_key", "outcome=unknown_key"}, 1},
		{"caddy_posts_limit_refusals_total", []string{"limit=max_body_size"}, 1},
		{"caddy_posts_events_published_total", nil, 2},
		{"caddy_posts_events_delivered_total", nil, 1},
		{"caddy_posts_events_dropped_total", nil, 0},
	}
	for _, m := range moved {
		if got := sample(after, m.name, m.labels...) - sample(before, m.name, m.labels...); got != m.by {
			t.Errorf("%s%v moved by %v, want %v", m.name, m.labels, got, m.by)
		}
	}
	if got := sample(after, "caddy_posts_post_cache_bytes"); got < 100 || got > 1000 {
		t.Errorf("caddy_posts_post_cache_bytes with the posts written kept: %v, want a few hundred", got)
	}
	for _, gauge := range []string{"caddy_posts_websocket_connections", "caddy_posts_subscribers", "caddy_posts_subscription_executions"} {
		if got := sample(during, gauge); got != 1 {
			t.Errorf("%s with one subscriber: %v, want 1", gauge, got)
		}
		if got := sample(after, gauge); got != 0 {
			t.Errorf("%s once it left: %v, want 0", gauge, got)
		}
	}

	t.Run("the site's metrics handler serves them beside Caddy's own", func(t *testing.T) {
		_, site := scrape(t, p.url+"/metrics")
		if sample(site, "caddy_posts_requests_total") == 0 || site["caddy_http_requests_total"] == nil {
			t.Errorf("the site's /metrics lacks caddy_posts_requests_total or caddy_http_requests_total")
		}
	})
	t.Run("promtool check metrics passes", func(t *testing.T) {
		promtool, err := exec.LookPath("promtool")
		if err != nil {
			t.Fatal("promtool is not installed: apt-get install prometheus (.ci/run does)")
		}
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	})
	t.Run("the logs name the request, the user and the operation", func(t *testing.T) {
		logs := p.out.String()
		for _, want := range []string{
			`"graphql_operation_type":"query"`, `"graphql_operation_name":"Newest"`,
			`"msg":"websocket authenticated"`, `"msg":"websocket closed"`, `"close_code":1000`,
			`"msg":"graphql operation","uuid":`, // a WebSocket's operation, at debug level
			`"graphql_operation_type":"subscription"`,
		} {
			if !strings.Contains(logs, want) {
				t.Errorf("the log has no %s:\n%s", want, logs)
			}
		}
		upgrades := 0
		for line := range strings.Lines(logs) {
			switch {
			case strings.Contains(line, `"msg":"websocket `) && !strings.Contains(line, `"uuid":"`):
				t.Errorf("a WebSocket line without the request's uuid: %s", line)
			case strings.Contains(line, `"msg":"handled request"`) && strings.Contains(line, `"status":101`):
				upgrades++
				if !strings.Contains(line, `"user_id":"alice"`) || !strings.Contains(line, `"uuid":"`) {
					t.Errorf("the access log of a WebSocket authenticated by connection_init lacks its user_id or uuid: %s", line)
				}
			}
		}
		if upgrades != 1 {
			t.Errorf("%d access log lines of a WebSocket, want 1:\n%s", upgrades, logs)
		}
	})
}

// subscribe opens a graphql-transport-ws connection to p whose connection_init carries payload,
// subscribes to postCreated, and returns once the connection is acknowledged.
func (p *caddyProcess) subscribe(ctx context.Context, t *testing.T, payload string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(ctx, strings.Replace(p.url, "http", "ws", 1)+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	for _, m := range []string{`{"type":"connection_init","payload":` + payload + `}`,
		`{"id":"1","type":"subscribe","payload":{"query":"subscription { postCreated { title } }"}}`} {
		if err := ws.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ack, err := ws.Read(ctx); err != nil || !bytes.Contains(ack, []byte("connection_ack")) {
		t.Fatalf("connection_init: %s %v", ack, err)
	}
	return ws
}

// waitFor waits until the gauge name at url reads want.
func waitFor(t *testing.T, url, name string, want float64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, families := scrape(t, url)
		if got := sample(families, name); got == want {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("%s is %v, want %v", name, got, want)
		}
	}
}
