package live_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/handlers/live"
)

// A connection taken over through HijackBelow holds what its sendBuffer holds for a client that
// stops reading, not the megabytes the kernel would grow its buffer to: the handler writes to a
// client whose receive buffer is 4 KiB, which reads nothing, until a write waits, and counts
// what it wrote.
func TestATakenOverConnectionHoldsLittleForAClientThatStopsReading(t *testing.T) {
	wrote := make(chan int64, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := live.HijackBelow(w).(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			wrote <- 0
			return
		}
		defer conn.Close()
		var n int64
		chunk := make([]byte, 64<<10)
		for n < 64<<20 {
			_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
			m, err := conn.Write(chunk)
			n += int64(m)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if err != nil {
				t.Error(err)
				break
			}
		}
		wrote <- n
	}))
	defer srv.Close()
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		_ = c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	conn, err := dialer.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	n := <-wrote
	t.Logf("the server wrote %d KiB before a write waited", n>>10)
	if n > 1<<20 {
		t.Errorf("the server wrote %d KiB to a client that reads nothing before a write waited; want at most 1 MiB", n>>10)
	}
}
