// What the API tells operators of each request: its line in the metrics, and the fields it adds
// to Caddy's access log line.

package answer

import (
	"cmp"
	"net/http"
	"strconv"
	"time"

	"github.com/graph-gophers/graphql-go"

	"github.com/postsedge/caddy-posts/metrics"
)

// Exchange is the response writer of an observed request (Observed): it keeps the status
// written, and what the handler found out that the metrics label it by.
type Exchange struct {
	http.ResponseWriter
	// Operation is REST's method and route, GraphQL's operation type.
	Operation string
	// Code is GraphQL's: the code of the first error, or OK; REST's is "", the status says.
	Code string
	// Interface, if set, is the interface a subscription streamed over HTTP is counted under
	// (sse, multipart).
	Interface string

	status  int
	start   time.Time
	started time.Duration // a stream is timed to its start: its length is the client's to choose
	fixed   fixedHeaders  // the values of the answer's fixed fields
}

// Streaming labels the exchange of a subscription that now streams over iface, and times it to
// now.
func (x *Exchange) Streaming(iface string) {
	x.Interface, x.started = iface, max(time.Since(x.start), 1)
}

func (x *Exchange) WriteHeader(status int) {
	if x.status == 0 {
		x.status = status
	}
	x.ResponseWriter.WriteHeader(status)
}

func (x *Exchange) Write(b []byte) (int, error) {
	if x.status == 0 {
		x.status = http.StatusOK
	}
	return x.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Caddy's writer (to flush, or set deadlines).
func (x *Exchange) Unwrap() http.ResponseWriter { return x.ResponseWriter }

// Observed serves requests with serve and records each under iface, with the operation serve
// names in the Exchange (operation if it names none) and its code.
func Observed(iface, operation string, serve http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		x := &Exchange{ResponseWriter: w, Operation: operation, start: start}
		serve(x, r)
		code := x.Code
		if code == "" {
			code = statusLabel(x.status)
		}
		took := x.started
		if took == 0 {
			took = time.Since(start)
		}
		metrics.Request(cmp.Or(x.Interface, iface), x.Operation, code, took)
	}
}

// ExchangeOf is the Exchange that w is, or nil when w is not observed (a test's recorder).
func ExchangeOf(w http.ResponseWriter) *Exchange {
	x, _ := w.(*Exchange)
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

// ResponseCode is the code of a GraphQL response in the metrics: its first error's, or OK.
func ResponseCode(res *graphql.Response) string {
	if len(res.Errors) == 0 {
		return "OK"
	}
	if code, ok := res.Errors[0].Extensions["code"].(string); ok && code != "" {
		return code
	}
	return "ERROR"
}
