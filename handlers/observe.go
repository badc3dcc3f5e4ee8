// What the API tells operators of each request: its line in the metrics, and the fields it adds
// to Caddy's access log line.

package handlers

import (
	"cmp"
	"net/http"
	"strconv"
	"time"

	"github.com/graph-gophers/graphql-go"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/schema"
)

// exchange is the response writer of an observed request: it keeps the status written, and
// what the handler found out that the metrics label it by.
type exchange struct {
	http.ResponseWriter
	status    int
	operation string // REST: the method and route; GraphQL: the operation's type
	code      string // GraphQL: the code of the first error, or OK; REST: "", the status says
	// A subscription streamed over HTTP is counted under its own interface (sse, multipart),
	// and timed to its start: its length is the client's to choose.
	iface   string
	start   time.Time
	started time.Duration
	fixed   fixedHeaders // the values of the answer's fixed fields
}

// streaming labels the exchange of a subscription that now streams over iface.
func (x *exchange) streaming(iface string) {
	x.iface, x.started = iface, max(time.Since(x.start), 1)
}

func (x *exchange) WriteHeader(status int) {
	if x.status == 0 {
		x.status = status
	}
	x.ResponseWriter.WriteHeader(status)
}

func (x *exchange) Write(b []byte) (int, error) {
	if x.status == 0 {
		x.status = http.StatusOK
	}
	return x.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Caddy's writer (to flush, or set deadlines).
func (x *exchange) Unwrap() http.ResponseWriter { return x.ResponseWriter }

// observed serves requests with serve and records each under iface, with the operation serve
// names in the exchange (operation if it names none) and its code.
func observed(iface, operation string, serve http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		x := &exchange{ResponseWriter: w, operation: operation, start: start}
		serve(x, r)
		code := x.code
		if code == "" {
			code = statusLabel(x.status)
		}
		took := x.started
		if took == 0 {
			took = time.Since(start)
		}
		metrics.Request(cmp.Or(x.iface, iface), x.operation, code, took)
	}
}

// exchangeOf is the exchange that w is, or nil when w is not observed (a test's recorder).
func exchangeOf(w http.ResponseWriter) *exchange {
	x, _ := w.(*exchange)
	return x
}

// statusLabels are the statuses as label values, made once rather than per request.
var statusLabels = func() (labels [600]string) {
	for i := range labels {
		labels[i] = strconv.Itoa(i)
	}
	return labels
}()

// statusLabel is status as a label value; a status never written is 200, as net/http sends.
func statusLabel(status int) string {
	switch {
	case status == 0:
		return statusLabels[http.StatusOK]
	case status < len(statusLabels):
		return statusLabels[status]
	}
	return "other"
}

// routeLabels are the REST operations of a route as label values: "GET /posts" and so on, and
// "other /posts" for a method it does not take.
func routeLabels(route string, m methods) (labels map[string]string, other string) {
	labels = map[string]string{http.MethodHead: http.MethodHead + " " + route}
	for method := range m {
		labels[method] = method + " " + route
	}
	return labels, "other " + route
}

// logField adds field to Caddy's access log line of r, when the config says how.
func (a *API) logField(r *http.Request, field zap.Field) {
	if a.cfg.AccessLog != nil {
		a.cfg.AccessLog(r, field)
	}
}

// operationKnown labels the exchange of a GraphQL request with its operation's type, and adds
// the type and name to its access log line.
func (a *API) operationKnown(w http.ResponseWriter, r *http.Request, op *schema.Operation) {
	if x := exchangeOf(w); x != nil {
		x.operation = op.Type
	}
	a.logField(r, zap.String("graphql_operation_type", op.Type))
	if op.Name != "" {
		a.logField(r, zap.String("graphql_operation_name", truncate(op.Name)))
	}
}

// responseCode is the code of a GraphQL response in the metrics: its first error's, or OK.
func responseCode(res *graphql.Response) string {
	if len(res.Errors) == 0 {
		return "OK"
	}
	if code, ok := res.Errors[0].Extensions["code"].(string); ok && code != "" {
		return code
	}
	return "ERROR"
}
