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

// Hijack is that of the innermost writer, whose connection's send buffer it bounds
// (boundSendBuffer).
func (h hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := h.inner.Hijack()
	if err == nil {
		boundSendBuffer(conn)
	}
	return conn, rw, err
}

// sendBuffer is the kernel's send buffer of a connection a transport takes over (a WebSocket, a
// stream over HTTP/1.1). Linux grows a socket's buffer up to 4 MiB (net.ipv4.tcp_wmem) however
// little its client reads: a hundred resumed streams that stopped reading held 380 MB of the
// kernel's memory, which max_memory_per_client does not see, and had the server resolve and
// write 7,830 events of 40,000 characters in place of about 1,100 to fill it. The kernel doubles
// it for its bookkeeping: this still carries some 2.5 MB/s to a client 100 ms away.
const sendBuffer = 128 << 10

// boundSendBuffer sets the send buffer of conn, or of the connection under its TLS, to
// sendBuffer, where it can.
func boundSendBuffer(conn net.Conn) {
	for {
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		conn = u.NetConn()
	}
	if c, ok := conn.(interface{ SetWriteBuffer(int) error }); ok {
		_ = c.SetWriteBuffer(sendBuffer)
	}
}

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
