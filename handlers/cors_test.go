package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/posts"
)

func TestPagesOfTheAllowedOriginsReadTheAnswersWithTheirCredentials(t *testing.T) {
	const (
		allowed = "https://app.example.com"
		foreign = "https://evil.example"
		openAPI = "/openapi.yaml"
	)
	s, _ := newStreamServer(t, with(testSubscriptions, func(s *live.Subscriptions) { s.OriginPatterns = []string{"app.example.com"} }), testLimits,
		func(cfg *Config) { cfg.OpenAPIPath = openAPI })
	own := "http://" + strings.TrimPrefix(s.http, "http://")
	created := askREST(t, s.http, http.MethodPost, "/posts", wsKey, `{"title": "read from afar"}`, "")
	if created.StatusCode != http.StatusCreated {
		t.Fatalf("creating a post: %d", created.StatusCode)
	}
	post := created.Header.Get("Location")
	query := graphqlPath + "?" + url.Values{"query": {"{ posts { id } }"}}.Encode()
	const (
		subscription = `{"query": "subscription { postCreated { title } }"}`
		jsonMedia    = "application/json"
	)
	tests := []struct {
		name, method, path, origin, accept, body string
		status                                   int
		readable                                 bool // the answer carries the CORS headers of origin
	}{
		{"a list read from an allowed origin is readable there", "GET", "/posts", allowed, "", "", 200, true},
		{"a post read from an allowed origin is readable there", "GET", post, allowed, "", "", 200, true},
		{"a post created from an allowed origin is readable there", "POST", "/posts", allowed, "", `{"title": "from app"}`, 201, true},
		{"a refusal to an allowed origin is readable there", "PATCH", post, allowed, "", `{"title": "no key"}`, 401, true},
		{"a path under /posts/ that names nothing is a 404 readable from an allowed origin", "GET", "/posts/a/b", allowed, "", "", 404, true},
		{"a GraphQL query from an allowed origin is readable there", "GET", query, allowed, jsonMedia, "", 200, true},
		{"an SSE stream from an allowed origin is readable there", "POST", graphqlPath, allowed, acceptSSE, subscription, 200, true},
		{"a multipart stream from an allowed origin is readable there", "POST", graphqlPath, allowed, acceptMultipart, subscription, 200, true},
		{"a stream from the site's own origin is readable there", "POST", graphqlPath, own, acceptSSE, subscription, 200, true},
		{"the OpenAPI document is readable from an allowed origin", "GET", openAPI, allowed, "", "", 200, true},
		{"a list read from a foreign origin is served but not readable there", "GET", "/posts", foreign, "", "", 200, false},
		{"a GraphQL query from a foreign origin is served but not readable there", "GET", query, foreign, jsonMedia, "", 200, false},
		{"an SSE stream from a foreign origin is a 403", "POST", graphqlPath, foreign, acceptSSE, subscription, 403, false},
		{"a multipart stream from a foreign origin is a 403", "POST", graphqlPath, foreign, acceptMultipart, subscription, 403, false},
		{"the OpenAPI document is not readable from a foreign origin", "GET", openAPI, foreign, "", "", 200, false},
		{"a list read by no browser gets no CORS header", "GET", "/posts", "", "", "", 200, false},
		{"a GraphQL query by no browser gets no CORS header", "GET", query, "", jsonMedia, "", 200, false},
		{"an SSE stream to no browser gets no CORS header", "POST", graphqlPath, "", acceptSSE, subscription, 200, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := http.Header{"Accept": {tt.accept}}
			if tt.method == http.MethodPost && tt.path == "/posts" {
				header.Set("X-API-Key", wsKey)
			}
			res := askFrom(t, s.http, tt.method, tt.path, tt.origin, header, tt.body)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d; want %d", res.StatusCode, tt.status)
			}
			wantCORS(t, res.Header, tt.origin, tt.readable)
			if tt.readable && !strings.Contains(res.Header.Get("Access-Control-Expose-Headers"), "ETag") {
				t.Errorf("Access-Control-Expose-Headers %q; want ETag among them", res.Header.Get("Access-Control-Expose-Headers"))
			}
		})
	}
}

func TestPreflightsAreAnsweredToTheAllowedOriginsAlone(t *testing.T) {
	const allowed, foreign = "https://app.example.com", "https://evil.example"
	s := newWSServerWith(t, with(testSubscriptions, func(s *live.Subscriptions) { s.OriginPatterns = []string{"app.example.com"} }), testLimits, posts.Config{})
	post := "/posts/6b011fa03aa928307595aeda"
	preflight := func(method string, headers string) http.Header {
		h := http.Header{"Access-Control-Request-Method": {method}}
		if headers != "" {
			h.Set("Access-Control-Request-Headers", headers)
		}
		return h
	}
	tests := []struct {
		name, path, origin string
		header             http.Header
		status             int
		readable           bool   // the answer carries the CORS headers of origin
		methods            string // Access-Control-Allow-Methods; "" for none
	}{
		{"a create's from an allowed origin is answered with /posts's methods", "/posts", allowed, preflight("POST", "authorization,content-type,idempotency-key"), 204, true, "GET, HEAD, POST"},
		{"a change's from an allowed origin is answered with /posts/{id}'s methods", post, allowed, preflight("PATCH", "authorization,content-type,if-match"), 204, true, "GET, HEAD, PATCH, DELETE"},
		{"a GraphQL request's from an allowed origin is answered with /graphql's methods", graphqlPath, allowed, preflight("POST", "accept,authorization,content-type"), 204, true, "GET, HEAD, POST"},
		{"a resumed EventSource's from an allowed origin is answered", graphqlPath, allowed, preflight("GET", "last-event-id"), 204, true, "GET, HEAD, POST"},
		{"one from a foreign origin to /posts is a 403", "/posts", foreign, preflight("POST", "content-type"), 403, false, ""},
		{"one from a foreign origin to /graphql is a 403", graphqlPath, foreign, preflight("POST", "content-type"), 403, false, ""},
		{"an OPTIONS without Access-Control-Request-Method is a 405, as before, readable from an allowed origin", "/posts", allowed, nil, 405, true, ""},
		{"an OPTIONS of /graphql without Access-Control-Request-Method is a 405, as before", graphqlPath, allowed, nil, 405, true, ""},
		{"an OPTIONS with Access-Control-Request-Method but no Origin is a 405, as before", "/posts", "", preflight("POST", ""), 405, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := askFrom(t, s.http, http.MethodOptions, tt.path, tt.origin, tt.header, "")
			if res.StatusCode != tt.status {
				t.Fatalf("status %d; want %d", res.StatusCode, tt.status)
			}
			wantCORS(t, res.Header, tt.origin, tt.readable)
			h := res.Header
			if got := h.Get("Access-Control-Allow-Methods"); got != tt.methods {
				t.Errorf("Access-Control-Allow-Methods %q; want %q", got, tt.methods)
			}
			switch tt.status {
			case http.StatusNoContent:
				for _, name := range []string{"Authorization", "Content-Type", "Accept", "Idempotency-Key", "If-Match", "Last-Event-ID", "X-Api-Key"} {
					if !strings.Contains(h.Get("Access-Control-Allow-Headers"), name) {
						t.Errorf("Access-Control-Allow-Headers %q; want %s among them", h.Get("Access-Control-Allow-Headers"), name)
					}
				}
				if h.Get("Access-Control-Max-Age") != "600" {
					t.Errorf("Access-Control-Max-Age %q; want 600", h.Get("Access-Control-Max-Age"))
				}
			case http.StatusForbidden:
				if got := refusal(t, res); !strings.Contains(got, "allowed_origins") || tt.path == graphqlPath && !strings.HasPrefix(got, "FORBIDDEN: ") {
					t.Errorf("the error %q; want the Origin refused (FORBIDDEN)", got)
				}
			case http.StatusMethodNotAllowed:
				if h.Get("Allow") == "" {
					t.Error("no Allow")
				}
			}
		})
	}
}

// askFrom sends a request from a page of origin ("" for no browser's) with the headers of
// header (those of "" left out) and a JSON body, and returns the answer with the first 4 KiB of
// its body (of a stream, what came at once) in res.Body.
func askFrom(t *testing.T, base, method, path, origin string, header http.Header, body string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), streamDeadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for name, values := range header {
		if len(values) > 0 && values[0] != "" {
			req.Header[http.CanonicalHeaderKey(name)] = values
		}
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	read := make([]byte, 4<<10)
	n, _ := io.ReadAtLeast(res.Body, read, 1)
	res.Body = io.NopCloser(bytes.NewReader(read[:n]))
	return res
}

// wantCORS checks the CORS headers of an answer to a page of origin: its own origin allowed,
// with credentials, when readable; none of them when not; and Vary: Origin on both.
func wantCORS(t *testing.T, h http.Header, origin string, readable bool) {
	t.Helper()
	if !strings.Contains(strings.Join(h.Values("Vary"), ", "), "Origin") {
		t.Errorf("Vary %q; want Origin among them", h.Values("Vary"))
	}
	acao, acac := h.Values("Access-Control-Allow-Origin"), h.Get("Access-Control-Allow-Credentials")
	switch {
	case readable && (len(acao) != 1 || acao[0] != origin || acac != "true"):
		t.Errorf("Access-Control-Allow-Origin %q, -Allow-Credentials %q; want %q, true", acao, acac, origin)
	case !readable && (len(acao) != 0 || acac != "" || h.Get("Access-Control-Expose-Headers") != ""):
		t.Errorf("Access-Control-Allow-Origin %q, -Allow-Credentials %q, -Expose-Headers %q; want none", acao, acac, h.Get("Access-Control-Expose-Headers"))
	}
}

// refusal is the one error of a JSON answer: REST's {"error"}, or GraphQL's "CODE: message".
func refusal(t *testing.T, res *http.Response) string {
	t.Helper()
	var body struct {
		Error  string `json:"error"`
		Errors []struct {
			Message    string `json:"message"`
			Extensions struct {
				Code string `json:"code"`
			} `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatalf("the body is no JSON: %v", err)
	}
	if len(body.Errors) == 1 {
		return body.Errors[0].Extensions.Code + ": " + body.Errors[0].Message
	}
	return body.Error
}

// TestThePageOfTheSitesHostOverAnotherSchemeIsAnotherOrigin: the site's own origin is its scheme
// and host, so a page of the same host over the other scheme (here https:// against an http
// site; in production a forged http:// page against the https site) reads nothing.
func TestThePageOfTheSitesHostOverAnotherSchemeIsAnotherOrigin(t *testing.T) {
	s := newWSServer(t, testSubscriptions)
	host := strings.TrimPrefix(s.http, "http://")
	for _, origin := range []string{"https://" + host, "http://" + host} {
		req, _ := http.NewRequest(http.MethodGet, s.http+"/posts", nil)
		req.Header.Set("Origin", origin)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		acao, want := res.Header.Get("Access-Control-Allow-Origin"), ""
		if origin == s.http {
			want = origin
		}
		if acao != want {
			t.Errorf("a page of %s got Access-Control-Allow-Origin %q; want %q", origin, acao, want)
		}
	}
}
