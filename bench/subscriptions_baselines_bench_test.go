//go:build !race

// Benchmarks only, which go test -race does not run: left out of its build rather than linked
// with the race detector for nothing.

// BenchmarkSubscriptions' baselines: a handshake-only listener, a minimal coder/websocket server.

package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/bench/wsload"
)

// rawServer completes the WebSocket handshake by hand, writes connection_ack and event 0, and
// then only holds the connections: no goroutine, no buffer, nothing read.
type rawServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func startRawServer() (*rawServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &rawServer{ln: ln}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.handshake(c) })
		}
	})
	return s, nil
}

func (s *rawServer) handshake(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		c.Close()
		return
	}
	sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	var out bytes.Buffer
	fmt.Fprintf(&out, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: %s\r\n\r\n",
		base64.StdEncoding.EncodeToString(sum[:]), wsload.Subprotocol)
	for _, m := range [][]byte{wsload.Ack, nextMessage} {
		out.WriteByte(0x81) // FIN, text
		if len(m) < 126 {
			out.WriteByte(byte(len(m)))
		} else {
			out.Write([]byte{126, byte(len(m) >> 8), byte(len(m))})
		}
		out.Write(m)
	}
	if _, err := c.Write(out.Bytes()); err != nil {
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.mu.Unlock()
}

func (s *rawServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
	s.mu.Unlock()
	s.wg.Wait()
}

// startFloorServer starts a minimal WebSocket server on net/http and coder/websocket: it
// accepts, writes connection_ack and event 0, and reads (and drops) messages until the client
// leaves. stop stops it, once its clients have left.
func startFloorServer(b *testing.B) (url string, stop func()) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var handlers sync.WaitGroup
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handlers.Add(1)
			defer handlers.Done()
			c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{wsload.Subprotocol}})
			if err != nil {
				return
			}
			defer c.CloseNow()
			ctx := context.Background()
			if c.Write(ctx, websocket.MessageText, wsload.Ack) != nil || c.Write(ctx, websocket.MessageText, nextMessage) != nil {
				return
			}
			for {
				if _, _, err := c.Read(ctx); err != nil {
					return
				}
			}
		}),
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = srv.Close() // not the hijacked connections: their clients close them
			<-served
			handlers.Wait()
		})
	}
	b.Cleanup(stop)
	return "ws://" + ln.Addr().String() + "/graphql", stop
}
