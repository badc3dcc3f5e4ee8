//go:build integration

package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAPIKeysStayOutOfTheAccessLog runs Caddy with its access log on stderr and a key sent each
// way a client might: none is served on a key that the access log shows in clear. Caddy redacts
// Authorization, so a key as "Authorization: ApiKey <key>" is served and stays out of the log;
// X-API-Key, which Caddy logs as it is, is not read unless api_key_header names it, and a
// request that carries a key there alone is refused, saying where the key goes.
func TestAPIKeysStayOutOfTheAccessLog(t *testing.T) {
	ownProcesses(t)
	port := freePort(t)
	caddyfile := fmt.Sprintf("{\n\tadmin off\n\tpersist_config off\n}\nhttp://:%d {\n\tlog {\n\t\toutput stderr\n\t}\n\tposts {\n\t\tdata_dir %s\n\t\tapi_key key-in-authorization alice\n\t\tapi_key key-in-x-api-key alice\n\t}\n}\n", port, t.TempDir())
	p := startProcess(t, caddyfile, port)
	client := &http.Client{Timeout: 10 * time.Second}
	for _, tt := range []struct {
		name, header, value, key string
	}{
		{"a key in Authorization: ApiKey", "Authorization", "ApiKey key-in-authorization", "key-in-authorization"},
		{"a key in X-API-Key", "X-API-Key", "key-in-x-api-key", "key-in-x-api-key"},
	} {
		t.Run(tt.name+" is served only if the access log does not show it", func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, p.url+"/posts", strings.NewReader(`{"title": "`+tt.name+`"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(tt.header, tt.value)
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			var logged string // the access log line is written once the handler returns
			for deadline := time.Now().Add(5 * time.Second); logged == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				for line := range strings.SplitSeq(p.out.String(), "\n") {
					if strings.Contains(line, `"logger":"http.log.access`) && strings.Contains(line, `"uri":"/posts"`) && strings.Contains(line, `"`+http.CanonicalHeaderKey(tt.header)+`"`) {
						logged = line
					}
				}
			}
			if logged == "" {
				t.Fatalf("no access log line of the request:\n%s", p.out)
			}
			served := res.StatusCode < 300
			if served && strings.Contains(p.out.String(), tt.key) {
				t.Errorf("%d: served, and the access log shows its key:\n%s", res.StatusCode, logged)
			}
			if tt.header == "X-API-Key" && (res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Authorization: ApiKey")) {
				t.Errorf("%d %s; want 400 saying to send the key as Authorization: ApiKey", res.StatusCode, body)
			}
			if tt.header == "Authorization" && res.StatusCode != http.StatusCreated {
				t.Errorf("%d %s; want 201", res.StatusCode, body)
			}
		})
	}
}
