// The writers below Caddy's wrappers, which the transports that outlive their request reach.

package live

import (
	"bufio"
	"net"
	"net/http"
)

// HijackBelow is w, but for its Hijack, which is that of the innermost writer under w: the
// writers that Caddy's middleware wraps around it count the bytes of a hijacked connection into
// the request's access log and metrics, which are written when the handler returns, before the
// connection ends; counted by the connection's goroutines after that, they would be read and
// written at once. The 101 goes through w, so the access log and metrics record it.
func HijackBelow(w http.ResponseWriter) http.ResponseWriter {
	hj, ok := Innermost(w).(http.Hijacker)
	if !ok {
		return w // Accept answers 501
	}
	return hijacker{w, hj}
}

type hijacker struct {
	http.ResponseWriter
	inner http.Hijacker
}

func (h hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) { return h.inner.Hijack() }

// Innermost is the ResponseWriter of net/http (or of HTTP/3) below the wrappers of w.
func Innermost(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}
