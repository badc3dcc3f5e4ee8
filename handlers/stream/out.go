// Where a subscription streamed over HTTP writes (stream.go): the response, through what Caddy
// has in front of the handler; or, over HTTP/1.1, the connection taken from net/http once the
// head is out, so that an idle stream holds no request. And how a stream over HTTP/2 or 3, which
// cannot give its request up, keeps the stack of its handler's goroutine small (ServeShallow).

package stream

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/postsedge/caddy-posts/handlers/live"
)

// out is where a stream's bytes go.
type out interface {
	write(b []byte, deadline time.Time) bool // and flush; false once the client is gone
	end()                                    // after the last write
	gone() <-chan struct{}                   // closed when the client leaves, if the transport tells
	// cut ends the write in progress at once, and fails every later one: for stream.CutOff, from
	// any goroutine.
	cut()
}

// aLongTimeAgo is a write deadline that has passed: a write under it fails at once, and over
// HTTP/2 setting it resets the stream at once (a deadline of now may not have passed yet when
// net/http compares it).
var aLongTimeAgo = time.Unix(1, 0)

// responseOut is the response, through whatever Caddy has in front of the handler (encode).
type responseOut struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	ctx    context.Context
	cutOff atomic.Bool // cut was called
}

func (o *responseOut) write(b []byte, deadline time.Time) bool {
	_ = o.rc.SetWriteDeadline(deadline)
	// Read after the deadline is set: a cut that this misses sets its own deadline after it.
	if o.cutOff.Load() {
		return false
	}
	if _, err := o.w.Write(b); err != nil {
		return false
	}
	return o.rc.Flush() == nil
}

func (o *responseOut) end()                  {}
func (o *responseOut) gone() <-chan struct{} { return o.ctx.Done() }

func (o *responseOut) cut() {
	o.cutOff.Store(true)
	_ = o.rc.SetWriteDeadline(aLongTimeAgo)
}

// takeConnection takes the connection of an HTTP/1.1 stream from net/http once its head is
// out, so that the request ends and the stream holds no handler goroutine (and Caddy's state of
// the request) for its life, as a WebSocket does not: nil over HTTP/2 and 3, whose streams
// share their connection, and over HTTP/1.0, which has no chunks. Row Sa of bench/RESULTS.md
// measures what it saves (through the ResponseWriter, an idle stream held 2.9 times as much).
// What it leaves behind Caddy's wrappers: its bytes past the head in the access log and metrics,
// and timeouts { write } (docs/operations.md says why).
func takeConnection(w http.ResponseWriter, r *http.Request) net.Conn {
	if !r.ProtoAtLeast(1, 1) || r.ProtoMajor != 1 {
		return nil
	}
	hj, ok := live.HijackBelow(w).(http.Hijacker)
	if !ok {
		return nil
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return nil
	}
	return conn
}

// connOut writes the rest of an HTTP/1.1 response's chunked body to its connection.
type connOut struct {
	conn net.Conn
	head []byte        // a chunk's size line
	left chan struct{} // closed once the connection reads nothing more: the client left
}

// newConnOut writes to conn, and reads it to tell when the client leaves (a client of a
// stream sends nothing more; what it would is dropped).
func newConnOut(conn net.Conn) *connOut {
	o := &connOut{conn: conn, left: make(chan struct{})}
	go func() {
		var b [1]byte
		for {
			if _, err := conn.Read(b[:]); err != nil {
				_ = conn.Close() // net/http no longer does, once the connection is taken
				close(o.left)
				return
			}
		}
	}()
	return o
}

func (o *connOut) write(b []byte, deadline time.Time) bool {
	_ = o.conn.SetWriteDeadline(deadline)
	o.head = append(strconv.AppendInt(o.head[:0], int64(len(b)), 16), "\r\n"...)
	chunk := net.Buffers{o.head, b, []byte("\r\n")}
	if _, err := chunk.WriteTo(o.conn); err != nil {
		_ = o.conn.Close() // a client that took nothing within the deadline is ended, not held
		return false
	}
	return true
}

// end writes the last chunk, so that the client sees a whole response, and closes.
func (o *connOut) end() {
	_ = o.conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = o.conn.Write([]byte("0\r\n\r\n"))
	_ = o.conn.Close()
}

func (o *connOut) gone() <-chan struct{} { return o.left }

// cut closes the connection: the write in progress fails, and so does every later one.
func (o *connOut) cut() { _ = o.conn.Close() }

// canFlush says whether what is written to w can be flushed to the client, as
// http.ResponseController finds a writer that flushes: w or one it wraps. A writer that neither
// flushes nor tells what it wraps holds the response.
func canFlush(w http.ResponseWriter) bool {
	for {
		switch w.(type) {
		case http.Flusher, interface{ FlushError() error }:
			return true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return false
		}
		w = u.Unwrap()
	}
}

// ServeShallow serves a request that may become a stream over HTTP/2 or 3, whose handler's
// goroutine lasts as long as the stream: the setup (credentials, the document, joining the
// feed, the first bytes) runs on a goroutine of its own, which ends, and the stream's run then
// waits on the handler's goroutine, whose stack stays the few KiB of the wait rather than the
// 16 KiB the setup grows a stack to (row Sb of bench/RESULTS.md; without it, an idle stream held
// 1.3 times as much). A panic of the setup is the handler's, for Caddy to recover.
func ServeShallow(w http.ResponseWriter, r *http.Request, serve http.HandlerFunc) {
	var then func()
	var fault any
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { fault = recover() }()
		serve(w, r.WithContext(context.WithValue(r.Context(), thenKey{}, &then)))
	}()
	<-done
	if fault != nil {
		panic(fault)
	}
	if then != nil {
		then()
	}
}

// thenKey carries, in a request served by ServeShallow, where a stream leaves its run.
type thenKey struct{}
