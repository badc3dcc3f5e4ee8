//go:build integration

package integration

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/postsedge/caddy-posts/openapi"
)

func TestTheOpenAPIDocumentIsServed(t *testing.T) {
	ownProcesses(t)
	port := freePort(t)
	p := startProcess(t, processConfig("off", port, "\t\topenapi_path /openapi.yaml"), port)
	get := func(method string, header ...string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, p.url+"/openapi.yaml", nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res, body
	}
	res, body := get("GET")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/yaml" || !bytes.Equal(body, openapi.Document) {
		t.Fatalf("GET /openapi.yaml: %d %q, %d bytes; want 200 application/yaml, the repository's openapi/openapi.yaml", res.StatusCode, res.Header.Get("Content-Type"), len(body))
	}
	etag := res.Header.Get("ETag")
	if res, body := get("GET", "If-None-Match", etag); res.StatusCode != http.StatusNotModified || len(body) != 0 {
		t.Errorf("GET with If-None-Match %s: %d with %d bytes, want 304 and none", etag, res.StatusCode, len(body))
	}
	if res, _ := get("POST"); res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d, Allow %q; want 405, GET, HEAD", res.StatusCode, res.Header.Get("Allow"))
	}
}
