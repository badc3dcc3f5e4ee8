package handlers

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/openapi"
)

// openAPIETag is the entity tag of the document, which changes only with the binary.
var openAPIETag = func() string {
	sum := sha256.Sum256(openapi.Document)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}()

// openAPIMethods are the methods of the OpenAPI path, its Allow.
const openAPIMethods = "GET, HEAD"

// serveOpenAPI serves the OpenAPI description of the REST API to anyone: it holds no data.
func (a *API) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	answer.SetVaryOrigin(w)
	if a.cors.Preflight(w, r, openAPIMethods, a.answer.Fail) {
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", openAPIMethods)
		a.answer.Fail(w, r, errcode.New(errcode.MethodNotAllowed, r.Method+" is not allowed here; allowed: "+openAPIMethods))
		return
	}
	h := w.Header()
	h.Set("Content-Type", openapi.MediaType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", openAPIETag)
	h.Set("Cache-Control", "public, max-age=300")
	// ServeContent answers If-None-Match with 304, and ranges.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(openapi.Document))
}
