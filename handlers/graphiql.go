package handlers

import (
	"github.com/postsedge/caddy-posts/handlers/answer"

	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// graphiqlAssetPrefix is the path under which GraphiQL's embedded files are served.
const graphiqlAssetPrefix = "/graphql/graphiql/"

// graphiqlVersion is the version of the vendored GraphiQL (see graphiql/README.md). It is part
// of every asset URL, so the assets can be cached for good and a new version is fetched anew.
const graphiqlVersion = "3.9.0"

// graphiqlCSP is the page's Content-Security-Policy. Scripts, styles and requests stay on this
// origin and the page has no inline script. What GraphiQL 3 needs beyond that, checked in Chromium:
//   - a style nonce: its dialogs lock page scrolling with a <style> element they add
//     (react-remove-scroll), which would otherwise need 'unsafe-inline'. graphiql-init.js hands
//     the nonce on from its own <script> tag.
//   - font-src data: its fonts (Roboto, Fira Code) are data: URLs inside graphiql.min.css.
//   - img-src data: the page's empty favicon, so that browsers ask for no /favicon.ico, which
//     may not exist where the module is mounted.
func graphiqlCSP(nonce string) string {
	return "default-src 'none'; script-src 'self'; style-src 'self' 'nonce-" + nonce + "'; " +
		"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

//go:embed graphiql/index.html graphiql/graphiql-init.js
//go:embed graphiql/graphiql.min.js graphiql/graphiql.min.css
//go:embed graphiql/react.production.min.js graphiql/react-dom.production.min.js
//go:embed graphiql/LICENSE.graphiql graphiql/LICENSE.react
var graphiqlFiles embed.FS

// graphiqlAsset is one embedded file as it is served.
type graphiqlAsset struct {
	contentType string
	body        []byte
	etag        string
	// gzipped compresses body on first use, so only a server that serves GraphiQL pays for it.
	gzipped func() []byte
}

func newGraphiQLAsset(contentType string, body []byte) *graphiqlAsset {
	sha := sha256.Sum256(body)
	return &graphiqlAsset{
		contentType: contentType,
		body:        body,
		etag:        `"` + hex.EncodeToString(sha[:16]) + `"`, // strong: it names the content
		gzipped: sync.OnceValue(func() []byte {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // the level is valid
			_, _ = zw.Write(body)                                    // a bytes.Buffer does not fail
			_ = zw.Close()
			return buf.Bytes()
		}),
	}
}

// graphiqlSite is the page and the assets, the latter by their path under graphiqlAssetPrefix.
type graphiqlSite struct {
	// pageHead and pageTail are the page before and after the place of its nonce.
	pageHead, pageTail string
	assets             map[string]*graphiqlAsset
}

// graphiqlNonce marks where each response's nonce goes in graphiql/index.html.
const graphiqlNonce = `nonce="CSP_NONCE"`

// loadGraphiQL reads the embedded files on first use, not when Caddy loads the package.
var loadGraphiQL = sync.OnceValue(func() graphiqlSite {
	read := func(name string) []byte {
		b, err := graphiqlFiles.ReadFile("graphiql/" + name)
		if err != nil {
			panic(err) // the name is one of the embedded files above
		}
		return b
	}
	site := graphiqlSite{assets: map[string]*graphiqlAsset{}}
	// The licenses go with the copies of GraphiQL and React that browsers receive.
	for _, name := range []string{"react.production.min.js", "react-dom.production.min.js", "graphiql.min.js", "graphiql.min.css", "LICENSE.graphiql", "LICENSE.react"} {
		site.assets[graphiqlVersion+"/"+name] = newGraphiQLAsset(graphiqlContentType(name), read(name))
	}

	// Our own script changes with this module, not with GraphiQL: its URL carries its content
	// hash so that a browser never runs a stale copy of it from its year-long cache.
	initJS := read("graphiql-init.js")
	sum := sha256.Sum256(initJS)
	initName := "graphiql-init." + hex.EncodeToString(sum[:6]) + ".js"
	site.assets[graphiqlVersion+"/"+initName] = newGraphiQLAsset(graphiqlContentType(initName), initJS)

	page := string(read("index.html"))
	const initRef = `"graphql/graphiql/` + graphiqlVersion + `/graphiql-init.js"`
	if strings.Count(page, initRef) != 1 || strings.Count(page, graphiqlNonce) != 1 {
		panic("graphiql/index.html must name " + initRef + " and " + graphiqlNonce + " once each") // caught by the unit test
	}
	page = strings.Replace(page, initRef, `"graphql/graphiql/`+graphiqlVersion+"/"+initName+`"`, 1)
	head, tail, _ := strings.Cut(page, graphiqlNonce)
	site.pageHead, site.pageTail = head+`nonce="`, `"`+tail
	return site
})

func graphiqlContentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	}
	return "text/plain; charset=utf-8"
}

// serveGraphiQL writes the GraphiQL page, for a GET of /graphql from a browser
// (graphqlhttp.Handler.ServeHTTP has set Vary: Accept, since the same URL also answers JSON).
func serveGraphiQL(w http.ResponseWriter, r *http.Request) {
	site := loadGraphiQL()
	nonce := rand.Text()
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", graphiqlCSP(nonce))
	// Each response has its own nonce, so none is stored; the page is 1 kB and its assets are
	// cached.
	h.Set("Cache-Control", "no-store")
	http.ServeContent(w, r, "", time.Time{}, strings.NewReader(site.pageHead+nonce+site.pageTail))
}

// serveGraphiQLAsset serves one embedded file under graphiqlAssetPrefix to a GET or HEAD, or a
// 404 in JSON.
func serveGraphiQLAsset(w http.ResponseWriter, r *http.Request) {
	name, _ := strings.CutPrefix(r.URL.Path, graphiqlAssetPrefix)
	// An exact lookup: "..", unknown names and the directories themselves are simply not there.
	a, ok := loadGraphiQL().assets[name]
	if !ok {
		answer.SetFailed(w)
		answer.WriteJSON(w, http.StatusNotFound, map[string]string{"error": "no such GraphiQL file: " + r.URL.Path})
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Add("Vary", "Accept-Encoding")
	body, etag := a.body, a.etag
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		// Each encoding is its own representation, with its own strong ETag. Caddy's encode
		// directive leaves a response alone that already has a Content-Encoding.
		body, etag = a.gzipped(), strings.TrimSuffix(a.etag, `"`)+`-gzip"`
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("ETag", etag)
	// ServeContent answers HEAD, Range and If-None-Match.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// acceptsGzip reports whether an Accept-Encoding header accepts gzip: named with a nonzero q,
// or not named while * has a nonzero q.
func acceptsGzip(header string) bool {
	gzipQ, anyQ := -1.0, -1.0 // -1: not named
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		q := 1.0
		for param := range strings.SplitSeq(params, ";") {
			name, value, _ := strings.Cut(strings.TrimSpace(param), "=")
			if strings.EqualFold(name, "q") {
				var err error
				if q, err = strconv.ParseFloat(value, 64); err != nil {
					q = 0
				}
			}
		}
		switch strings.ToLower(strings.TrimSpace(coding)) {
		case "gzip", "x-gzip":
			gzipQ = q
		case "*":
			anyQ = q
		}
	}
	if gzipQ >= 0 {
		return gzipQ > 0
	}
	return anyQ > 0
}
