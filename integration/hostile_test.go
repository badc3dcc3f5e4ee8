//go:build integration

// Harness of the hostile-client tests (hostile_*_test.go): a caddy run under attack.
package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth/authtest"
)

// The tests of hostile_*_test.go replay the attacks of issue 14 against a `caddy run` with the default
// limits, and measure the process from outside: the time to the refusal, the size of the answer
// and the growth of its resident memory: `make test` runs them on their own, one after the other.

// hostile is a process under attack, with a client that keeps using it normally meanwhile.
type hostile struct {
	*caddyProcess
	normal normalClient
}

// startHostile runs caddy with the default limits on a fresh data_dir; X-Forwarded-For from
// loopback names the client, so that the tests can be many clients.
func startHostile(t *testing.T) *hostile { return startHostileWith(t, idp().URL+"/jwks.json") }

func startHostileWith(t *testing.T, jwksURL string) *hostile {
	port := freePort(t)
	caddyfile := fmt.Sprintf(`{
	admin off
	persist_config off
	servers {
		trusted_proxies static 127.0.0.1/32
	}
}
http://:%d {
	posts {
		data_dir %s
		jwks_url %s
		api_key process-key alice
	}
}
`, port, t.TempDir(), jwksURL)
	return &hostile{caddyProcess: startProcess(t, caddyfile, port)}
}

// rss reads a field of the process's /proc status (VmRSS, VmHWM) in bytes.
func (h *hostile) rss(field string) int64 {
	h.t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.cmd.Process.Pid))
	if err != nil {
		h.t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				h.t.Fatal(err)
			}
			return kb << 10
		}
	}
	h.t.Fatalf("no %s in /proc status", field)
	return 0
}

// peakGrowth runs attack and returns how far the process's resident memory rose above what it
// held before, at its peak (the kernel's high-water mark, reset first).
func (h *hostile) peakGrowth(attack func()) int64 {
	h.t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", h.cmd.Process.Pid), []byte("5"), 0); err != nil {
		h.t.Fatalf("resetting the peak: %v", err)
	}
	before := h.rss("VmRSS")
	attack()
	return h.rss("VmHWM") - before
}

// answer is one HTTP answer and how long it took.
type answer struct {
	status int
	header http.Header
	body   []byte
	took   time.Duration
}

// graphql POSTs a query as client (its X-Forwarded-For), with the given extra headers.
func (h *hostile) graphql(client, query string, header ...string) answer {
	h.t.Helper()
	body, _ := json.Marshal(map[string]string{"query": query})
	return h.send("POST", "/graphql", client, body, append([]string{"Content-Type", "application/json", "Accept", "application/graphql-response+json"}, header...)...)
}

func (h *hostile) send(method, path, client string, body []byte, header ...string) answer {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-For", client)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return answer{res.StatusCode, res.Header, data, time.Since(start)}
}

// fastest sends the same request three times and keeps the quickest answer: these machines are
// noisy, and a bound on the best of three is a bound on the work.
func fastest(send func() answer) answer {
	best := send()
	for range 2 {
		if a := send(); a.took < best.took {
			best = a
		}
	}
	return best
}

// refusedWith checks that a is a GraphQL request error: 400, one error, with code.
func refusedWith(t *testing.T, a answer, code string) {
	t.Helper()
	var res struct {
		Data   json.RawMessage
		Errors []struct {
			Message    string
			Extensions struct{ Code string }
		}
	}
	if err := json.Unmarshal(a.body, &res); err != nil {
		t.Fatalf("status %d, %d bytes that are not JSON: %.200s", a.status, len(a.body), a.body)
	}
	if a.status != http.StatusBadRequest || len(res.Errors) != 1 || res.Errors[0].Extensions.Code != code || (len(res.Data) > 0 && string(res.Data) != "null") {
		t.Fatalf("got %d %.500s; want 400 with one error %s and no data", a.status, a.body, code)
	}
}

// normalClient is a client that reads and writes as usual while the attacks run; every one of
// its requests must succeed.
type normalClient struct {
	stop     chan struct{}
	done     sync.WaitGroup
	requests atomic.Int64
	mu       sync.Mutex
	failures []string
}

func (h *hostile) startNormalClient() {
	n := &h.normal
	n.stop = make(chan struct{})
	n.done.Go(func() {
		client := &http.Client{Timeout: 10 * time.Second}
		for i := 0; ; i++ {
			select {
			case <-n.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var req *http.Request
			switch i % 3 {
			case 0:
				req, _ = http.NewRequest("GET", h.url+"/posts?limit=2", nil)
			case 1:
				req, _ = http.NewRequest("POST", h.url+"/graphql", strings.NewReader(`{"query":"{posts(limit:2){id title}}"}`))
				req.Header.Set("Content-Type", "application/json")
			case 2:
				req, _ = http.NewRequest("POST", h.url+"/posts", strings.NewReader(`{"title":"a normal post"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "ApiKey process-key")
			}
			req.Header.Set("X-Forwarded-For", "192.0.2.200")
			res, err := client.Do(req)
			n.requests.Add(1)
			if err != nil {
				n.fail(fmt.Sprintf("%s %s: %v", req.Method, req.URL.Path, err))
				continue
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusCreated || bytes.Contains(body, []byte(`"errors"`)) {
				n.fail(fmt.Sprintf("%s %s: %d %.200s", req.Method, req.URL.Path, res.StatusCode, body))
			}
		}
	})
}

func (n *normalClient) fail(s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failures = append(n.failures, s)
}

// checkNormalClient stops the normal client and checks that all of its requests succeeded.
func (h *hostile) checkNormalClient() {
	h.t.Helper()
	// The attacks may end before the client has done much: let it finish a few rounds.
	for deadline := time.Now().Add(5 * time.Second); h.normal.requests.Load() < 10 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	close(h.normal.stop)
	h.normal.done.Wait()
	if len(h.normal.failures) > 0 {
		h.t.Errorf("%d of the normal client's %d requests failed during the attacks; first: %s", len(h.normal.failures), h.normal.requests.Load(), h.normal.failures[0])
	}
	if h.normal.requests.Load() < 10 {
		h.t.Errorf("the normal client sent only %d requests", h.normal.requests.Load())
	}
}

// idp is the identity provider whose key set the hostile tests' caddy reads, started on first
// use and serving until the tests end.
var idp = sync.OnceValue(authtest.NewProvider)
