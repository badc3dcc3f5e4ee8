// Package openapitest holds the answers of the REST API against openapi/openapi.yaml, for the
// tests that send REST requests through Caddy (caddymodule's in-process ones, integration's to
// processes), so that the document cannot drift from the code: a transport (Checked) that reports
// each answer the document does not describe. Only tests import it.
package openapitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/postsedge/caddy-posts/openapi"
)

// restDocument is openapi.yaml read once: its validator, and the methods of each path.
var restDocument = sync.OnceValues(func() (checkedDocument, error) {
	doc, err := libopenapi.NewDocument(openapi.Document)
	if err != nil {
		return checkedDocument{}, err
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		return checkedDocument{}, fmt.Errorf("openapi.yaml: %v", errs)
	}
	if ok, errs := v.ValidateDocument(); !ok {
		return checkedDocument{}, fmt.Errorf("openapi.yaml is not a valid OpenAPI document: %v", errs)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		return checkedDocument{}, err
	}
	methods := map[string][]string{}
	for path, item := range model.Model.Paths.PathItems.FromOldest() {
		for method := range item.GetOperations().KeysFromOldest() {
			methods[path] = append(methods[path], strings.ToUpper(method))
		}
		methods[path] = slices.DeleteFunc(methods[path], func(m string) bool { return m == http.MethodOptions })
	}
	return checkedDocument{v, methods}, nil
})

type checkedDocument struct {
	validator validator.Validator
	// methods are the methods of each path template, as the document lists them, but OPTIONS:
	// the document's OPTIONS is the CORS preflight, which no Allow names.
	methods map[string][]string
}

// check reports what of res, the answer to req, openapi.yaml does not describe. A method the
// document does not list for a path cannot be described in it; its answer must be the 405 that
// the document implies: an error whose Allow names exactly the methods the document lists.
// Every OPTIONS is checked against the document's (a preflight's 204 or 403, another's 405). A
// 500, which the document describes as the server does, is reported all the same: no test
// expects a fault of the server.
func (d checkedDocument) check(req *http.Request, res *http.Response, body []byte) []string {
	if res.StatusCode == http.StatusInternalServerError {
		return []string{"a fault of the server (500)"}
	}
	template := "/posts"
	if req.URL.Path != template {
		template = "/posts/{id}"
	}
	if req.Method != http.MethodOptions && !slices.Contains(d.methods[template], req.Method) {
		allow := strings.Split(res.Header.Get("Allow"), ", ")
		var e struct{ Error string }
		if res.StatusCode != http.StatusMethodNotAllowed || !sameSet(allow, d.methods[template]) ||
			json.Unmarshal(body, &e) != nil || e.Error == "" {
			return []string{fmt.Sprintf("a method openapi.yaml does not list for %s must get 405, an error and Allow: %s; got %d, Allow %q",
				template, strings.Join(d.methods[template], ", "), res.StatusCode, res.Header.Get("Allow"))}
		}
		return nil
	}
	checked := *res
	checked.Body = io.NopCloser(bytes.NewReader(body))
	ok, errs := d.validator.ValidateHttpResponse(req, &checked)
	if ok {
		return nil
	}
	var why []string
	for _, e := range errs {
		why = append(why, e.Error())
		for _, s := range e.SchemaValidationErrors {
			why = append(why, s.Reason+" at "+s.FieldPath)
		}
	}
	return why
}

// sameSet says whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}

// Checked is Base, telling Report of each REST answer that breaks openapi.yaml.
type Checked struct {
	Base   http.RoundTripper
	Report func(format string, args ...any)
}

// maxCheckedBody bounds the answers checked: the attacks' huge pages would only slow them down,
// and their shape is that of the small ones.
const maxCheckedBody = 1 << 20

// RoundTrip sends req through Base, and checks the answer if it is the REST API's.
func (o Checked) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := o.Base.RoundTrip(req)
	if err != nil || !isREST(req.URL.Path) {
		return res, err
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxCheckedBody+1))
	rest := res.Body
	res.Body = readCloser{io.MultiReader(bytes.NewReader(body), rest), rest}
	if err != nil || len(body) > maxCheckedBody {
		return res, nil
	}
	doc, derr := restDocument()
	if derr != nil {
		o.Report("%v", derr)
		return res, nil
	}
	if why := doc.check(req, res, body); len(why) > 0 {
		o.Report("%s %s answered %d, which openapi.yaml does not describe: %s\n%s", req.Method, req.URL, res.StatusCode, strings.Join(why, "; "), body)
	}
	return res, nil
}

// isREST says whether path is one of the REST API's, which openapi.yaml describes: /posts and
// /posts/{id}. The other paths under /posts/ answer 404 in the API's shape, which the document
// states in words only.
func isREST(path string) bool {
	rest, ok := strings.CutPrefix(path, "/posts")
	return ok && (rest == "" || len(rest) > 1 && rest[0] == '/' && !strings.Contains(rest[1:], "/"))
}

type readCloser struct {
	io.Reader
	io.Closer
}

// Violations gathers what a Checked transport shared by a whole test binary found
// (http.DefaultTransport, wrapped in TestMain), for TestMain to report once the tests ran.
type Violations struct {
	mu    sync.Mutex
	found []string
}

// Report keeps one violation; it is a Checked transport's Report.
func (v *Violations) Report(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.found = append(v.found, fmt.Sprintf(format, args...))
}

// Found returns the violations kept.
func (v *Violations) Found() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.found)
}
