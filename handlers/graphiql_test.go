package handlers

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// getGraphiQLPage serves the page for method and returns the response.
func getGraphiQLPage(t *testing.T, method string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, "/graphql?x=y", nil)
	r.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	w := httptest.NewRecorder()
	serveGraphiQL(w, r)
	return w.Result()
}

// graphiqlReferences are the src and href values of the page.
func graphiqlReferences(t *testing.T, page string) []string {
	t.Helper()
	var refs []string
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if m[1] != "data:," { // the empty favicon
			refs = append(refs, m[1])
		}
	}
	if len(refs) != 5 {
		t.Fatalf("the page references %d files, want 5 (css, react, react-dom, graphiql, init): %q", len(refs), refs)
	}
	return refs
}

func TestServeGraphiQLPage(t *testing.T) {
	res := getGraphiQLPage(t, http.MethodGet)
	body, _ := io.ReadAll(res.Body)
	page := string(body)

	t.Run("the page is HTML and not cached", func(t *testing.T) {
		if res.StatusCode != http.StatusOK {
			t.Fatalf("status %d", res.StatusCode)
		}
		checkGraphiQLHeaders(t, res.Header, map[string]string{
			"Content-Type":           "text/html; charset=utf-8",
			"X-Content-Type-Options": "nosniff",
			"Cache-Control":          "no-store",
		})
		if !strings.Contains(page, "<title>caddy-posts GraphiQL</title>") {
			t.Error("the page has not the title caddy-posts GraphiQL")
		}
	})

	t.Run("the CSP allows no inline script and inline style only by a nonce the init script carries", func(t *testing.T) {
		csp := res.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self';", "connect-src 'self'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("the CSP %q lacks %q", csp, want)
			}
		}
		for _, bad := range []string{"unsafe-inline", "unsafe-eval", "*", "http:", "https:"} {
			if strings.Contains(csp, bad) {
				t.Errorf("the CSP %q allows %q", csp, bad)
			}
		}
		m := regexp.MustCompile(`style-src 'self' 'nonce-([A-Za-z0-9+/_=-]{16,})';`).FindStringSubmatch(csp)
		if m == nil {
			t.Fatalf("the CSP %q has no style nonce", csp)
		}
		if !regexp.MustCompile(`<script defer src="[^"]*graphiql-init\.[0-9a-f]+\.js" nonce="` + m[1] + `">`).MatchString(page) {
			t.Errorf("the init script's tag does not carry the CSP's nonce %q", m[1])
		}
		if strings.Contains(page, "<script>") || strings.Contains(page, "<style") || strings.Contains(page, " style=") {
			t.Error("the page has an inline script or style")
		}
		again := getGraphiQLPage(t, http.MethodGet).Header.Get("Content-Security-Policy")
		if again == csp {
			t.Error("two responses have the same nonce")
		}
	})

	t.Run("the page names no other site", func(t *testing.T) {
		if strings.Contains(page, "http://") || strings.Contains(page, "https://") || strings.Contains(page, `="//`) {
			t.Error("the page has an absolute URL")
		}
	})

	t.Run("every file the page loads is relative and resolves under /graphql/graphiql/3.9.0/, with or without a prefix", func(t *testing.T) {
		for _, ref := range graphiqlReferences(t, page) {
			if !strings.HasPrefix(ref, "graphql/graphiql/3.9.0/") {
				t.Errorf("reference %q is not relative to the page's directory", ref)
			}
			for base, wantPrefix := range map[string]string{
				"https://example.com/graphql":         "/graphql/graphiql/3.9.0/",
				"https://example.com/graphql?x=y":     "/graphql/graphiql/3.9.0/",
				"https://example.com/api/graphql?x=y": "/api/graphql/graphiql/3.9.0/",
			} {
				if got := resolveGraphiQLRef(t, base, ref); !strings.HasPrefix(got, wantPrefix) {
					t.Errorf("from %s, %q resolves to %s, want %s...", base, ref, got, wantPrefix)
				}
			}
		}
	})

	t.Run("HEAD has the headers and no body", func(t *testing.T) {
		head := getGraphiQLPage(t, http.MethodHead)
		b, _ := io.ReadAll(head.Body)
		if head.StatusCode != http.StatusOK || len(b) != 0 {
			t.Errorf("status %d with %d body bytes, want 200 with none", head.StatusCode, len(b))
		}
		if head.Header.Get("Content-Type") != "text/html; charset=utf-8" || head.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("HEAD headers %v", head.Header)
		}
		if head.Header.Get("Content-Length") != strconv.Itoa(len(page)) {
			t.Errorf("Content-Length %q, want %d", head.Header.Get("Content-Length"), len(page))
		}
	})
}

// checkGraphiQLHeaders reports each header of h that has not its wanted value ("" for absent).
func checkGraphiQLHeaders(t *testing.T, h http.Header, want map[string]string) {
	t.Helper()
	for name, value := range want {
		if got := h.Get(name); got != value {
			t.Errorf("%s = %q, want %q", name, got, value)
		}
	}
}

// resolveGraphiQLRef resolves ref against base and returns the path.
func resolveGraphiQLRef(t *testing.T, base, ref string) string {
	t.Helper()
	b, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	r, err := url.Parse(ref)
	if err != nil {
		t.Fatal(err)
	}
	return b.ResolveReference(r).Path
}

// getGraphiQLAsset serves path with the headers h (name, value, ...).
func getGraphiQLAsset(method, path string, h ...string) *http.Response {
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(h); i += 2 {
		r.Header.Set(h[i], h[i+1])
	}
	w := httptest.NewRecorder()
	serveGraphiQLAsset(w, r)
	return w.Result()
}

func TestServeGraphiQLAsset(t *testing.T) {
	page, _ := io.ReadAll(getGraphiQLPage(t, http.MethodGet).Body)
	for _, ref := range graphiqlReferences(t, string(page)) {
		path := resolveGraphiQLRef(t, "https://example.com/graphql", ref)
		wantType := "text/javascript; charset=utf-8"
		if strings.HasSuffix(path, ".css") {
			wantType = "text/css; charset=utf-8"
		}

		t.Run(path+" is served with its type and cached for good", func(t *testing.T) {
			res := getGraphiQLAsset(http.MethodGet, path)
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != http.StatusOK || len(body) == 0 {
				t.Fatalf("status %d with %d bytes", res.StatusCode, len(body))
			}
			checkGraphiQLHeaders(t, res.Header, map[string]string{
				"Content-Type":           wantType,
				"X-Content-Type-Options": "nosniff",
				"Cache-Control":          "public, max-age=31536000, immutable",
				"Vary":                   "Accept-Encoding",
				"Content-Encoding":       "",
			})
			etag := res.Header.Get("ETag")
			if !regexp.MustCompile(`^"[0-9a-f]{32}"$`).MatchString(etag) {
				t.Fatalf("ETag %q is not a strong content hash", etag)
			}
			if res := getGraphiQLAsset(http.MethodGet, path, "If-None-Match", etag); res.StatusCode != http.StatusNotModified {
				t.Errorf("If-None-Match with its ETag: status %d, want 304", res.StatusCode)
			}
			if res := getGraphiQLAsset(http.MethodGet, path, "Range", "bytes=0-9"); res.StatusCode != http.StatusPartialContent {
				t.Errorf("Range: status %d, want 206", res.StatusCode)
			}

			head := getGraphiQLAsset(http.MethodHead, path)
			headBody, _ := io.ReadAll(head.Body)
			if head.StatusCode != http.StatusOK || len(headBody) != 0 || head.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
				t.Errorf("HEAD: status %d, %d body bytes, Content-Length %q; want 200, 0, %d",
					head.StatusCode, len(headBody), head.Header.Get("Content-Length"), len(body))
			}

			gz := getGraphiQLAsset(http.MethodGet, path, "Accept-Encoding", "gzip, deflate, br")
			if gz.Header.Get("Content-Encoding") != "gzip" || gz.Header.Get("Content-Type") != wantType {
				t.Fatalf("with Accept-Encoding gzip: Content-Encoding %q, Content-Type %q",
					gz.Header.Get("Content-Encoding"), gz.Header.Get("Content-Type"))
			}
			if gz.Header.Get("ETag") == etag {
				t.Error("the gzip copy has the same ETag as the plain file")
			}
			zr, err := gzip.NewReader(gz.Body)
			if err != nil {
				t.Fatal(err)
			}
			if unzipped, _ := io.ReadAll(zr); !bytes.Equal(unzipped, body) {
				t.Error("the gzip copy does not unzip to the file")
			}
		})
	}
}

func TestServeGraphiQLLicenses(t *testing.T) {
	for _, name := range []string{"LICENSE.graphiql", "LICENSE.react"} {
		t.Run(name+" is served as text", func(t *testing.T) {
			res := getGraphiQLAsset(http.MethodGet, graphiqlAssetPrefix+graphiqlVersion+"/"+name)
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
				t.Fatalf("status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
			}
			if !bytes.HasPrefix(body, []byte("MIT License")) {
				t.Errorf("body starts %.40q", body)
			}
		})
	}
}

func TestServeGraphiQLAssetRefusals(t *testing.T) {
	for _, tc := range []struct{ name, path string }{
		{"an unknown file", "/graphql/graphiql/3.9.0/nope.js"},
		{"a path with ..", "/graphql/graphiql/3.9.0/../3.9.0/graphiql.min.js"},
		{"a path with an escaped ..", "/graphql/graphiql/3.9.0/%2e%2e/3.9.0/graphiql.min.js"},
		{"a path that climbs out", "/graphql/graphiql/../../handlers/graphiql.go"},
		{"the asset directory", "/graphql/graphiql/"},
		{"the version directory", "/graphql/graphiql/3.9.0/"},
		{"the version directory without a slash", "/graphql/graphiql/3.9.0"},
		{"another version", "/graphql/graphiql/3.8.0/graphiql.min.js"},
		{"the init script without its hash", "/graphql/graphiql/3.9.0/graphiql-init.js"},
		{"the page template", "/graphql/graphiql/3.9.0/index.html"},
		{"a file that is not embedded", "/graphql/graphiql/3.9.0/README.md"},
		{"a file without the version", "/graphql/graphiql/graphiql.min.js"},
		{"a double slash", "/graphql/graphiql/3.9.0//graphiql.min.js"},
	} {
		t.Run(tc.name+" is a JSON 404", func(t *testing.T) {
			res := getGraphiQLAsset(http.MethodGet, tc.path)
			if res.StatusCode != http.StatusNotFound {
				t.Fatalf("status %d, want 404", res.StatusCode)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var body struct{ Error string }
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil || body.Error == "" {
				t.Errorf("body is not {\"error\": \"...\"}: %v", err)
			}
			if got := res.Header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("Cache-Control %q; want a 404 that no cache keeps (no-store)", got)
			}
		})
	}
}

func TestGraphiQLAcceptsGzip(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   bool
	}{
		{"", false},
		{"gzip", true},
		{"GZIP", true},
		{"deflate, gzip;q=0.5, br", true},
		{"br, zstd", false},
		{"gzip;q=0", false},
		{"gzip; q=0.0", false},
		{"*", true},
		{"*;q=0", false},
		{"gzip;q=0, *", false},
		{"identity, *;q=0.1", true},
		{"gzip;q=nonsense", false},
		{"x-gzip", true},
	} {
		t.Run(strconv.Quote(tc.header)+" accepts gzip: "+strconv.FormatBool(tc.want), func(t *testing.T) {
			if got := acceptsGzip(tc.header); got != tc.want {
				t.Errorf("acceptsGzip(%q) = %v", tc.header, got)
			}
		})
	}
}
