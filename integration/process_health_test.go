//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// healthOf GETs the health path of the site at url.
func healthOf(t *testing.T, url string) (status int, body map[string]any, took time.Duration) {
	t.Helper()
	start := time.Now()
	res, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	took = time.Since(start)
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatalf("the health answer is not JSON: %v", err)
	}
	return res.StatusCode, body, took
}

func TestHealthThroughCaddy(t *testing.T) {
	ownProcesses(t)
	t.Run("the embedded store answers: 200 ok", func(t *testing.T) {
		port := freePort(t)
		p := startProcess(t, processConfig("off", port, "\t\thealth_path /healthz"), port)
		status, body, _ := healthOf(t, p.url)
		store, _ := body["store"].(map[string]any)
		if status != http.StatusOK || body["status"] != "ok" || store["status"] != "ok" {
			t.Errorf("got %d %v", status, body)
		}
	})
	t.Run("a MongoDB that does not answer: 503 within the timeout, naming the store", func(t *testing.T) {
		port, dead := freePort(t), freePort(t)
		// Nothing listens on dead; the site starts all the same (the driver connects on first use).
		posts := fmt.Sprintf("\t\thealth_path /healthz\n\t\tmongodb_uri mongodb://127.0.0.1:%d/\n\t\ttimeout 300ms", dead)
		withAccessLog := strings.Replace(processConfig("off", port, posts), " {\n\tposts {", " {\n\tlog {\n\t\toutput stderr\n\t}\n\tposts {", 1)
		p := startProcessAt(t, withAccessLog, port, "/healthz", http.StatusServiceUnavailable)
		status, body, took := healthOf(t, p.url)
		store, _ := body["store"].(map[string]any)
		if status != http.StatusServiceUnavailable || body["status"] != "unavailable" || store["status"] != "unavailable" {
			t.Errorf("got %d %v", status, body)
		}
		if took > 2*time.Second {
			t.Errorf("the probe took %v with a timeout of 300ms", took)
		}
		if text := fmt.Sprint(body); strings.Contains(text, "127.0.0.1") {
			t.Errorf("the answer tells the database's address: %v", body)
		}

		// Requests that fail on the store: each log line about one names its uuid, the one of
		// its access log line.
		for _, req := range []struct{ method, path, body, logged string }{
			{"GET", "/posts", "", "request failed"},
			{"POST", "/graphql", `{"query": "{ posts { id } }"}`, "graphql resolver failed"},
		} {
			start := time.Now()
			r, err := http.NewRequest(req.method, p.url+req.path, strings.NewReader(req.body))
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			// Within about the timeout (0.3 s, measured), not after RecoverEvents' first use of
			// posts, which waits out the driver's 30 s (28-60 s before): 10 s leaves a margin for
			// a loaded machine either way.
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("%s %s: answered after %v with a timeout of 300ms", req.method, req.path, took)
			}
			var logged, accessed string
			for deadline := time.Now().Add(5 * time.Second); (logged == "" || accessed == "") && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				logged, accessed = "", ""
				for line := range strings.Lines(p.out.String()) {
					var entry struct{ Msg, UUID string }
					if json.Unmarshal([]byte(line), &entry) != nil {
						continue
					}
					switch {
					case entry.Msg == req.logged:
						logged = entry.UUID
					case entry.Msg == "handled request" && strings.Contains(line, `"uri":"`+req.path+`"`):
						accessed = entry.UUID
					}
				}
			}
			if logged == "" || logged != accessed {
				t.Errorf("%s %s: the %q line has uuid %q, its access log line %q:\n%s", req.method, req.path, req.logged, logged, accessed, p.out)
			}
		}
	})
}
