// Package wsbare is the hand-written WebSocket baseline of the benchmarks: plain net/http and
// coder/websocket broadcasting the bytes it is given to every subscribed connection, with no
// GraphQL. It speaks just enough graphql-transport-ws for the same client (bench/wsload):
// connection_ack, pong, and a subscribe that adds the connection to the broadcast: of every
// post, or, if its variables name a userId (postCreated's filter), of that user's alone.
//
// Each connection is served as coder/websocket's chat example serves one: its handler
// goroutine reads, a writer goroutine writes from a small buffered channel, and a subscriber
// whose channel is full when a message is broadcast is dropped.
package wsbare

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

const (
	subprotocol  = "graphql-transport-ws"
	queue        = 16 // messages waiting for a slow subscriber
	writeTimeout = 10 * time.Second
)

// Server serves the WebSocket on /graphql and takes the bytes to broadcast as the body of a
// POST to /publish, whose userId parameter is the post's author.
type Server struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	msgs   chan []byte
	cancel context.CancelFunc // drops a slow subscriber
	userID string             // the author of the posts it takes; "" for every post
}

// New returns a Server with no subscribers.
func New() *Server { return &Server{subs: map[*subscriber]struct{}{}} }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/graphql":
		s.serveWebSocket(w, r)
	case r.URL.Path == "/publish" && r.Method == http.MethodPost:
		msg, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.publish(msg, r.URL.Query().Get("userId"))
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{subprotocol}})
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := &subscriber{msgs: make(chan []byte, queue), cancel: cancel}
	defer s.remove(sub)

	written := make(chan struct{})
	go func() {
		defer close(written)
		for {
			select {
			case <-ctx.Done():
				return
			case msg := <-sub.msgs:
				wctx, done := context.WithTimeout(ctx, writeTimeout)
				err := c.Write(wctx, websocket.MessageText, msg)
				done()
				if err != nil {
					cancel()
					return
				}
			}
		}
	}()
	defer func() { <-written }()

	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		var m struct {
			Type    string
			Payload struct {
				Variables struct {
					UserID string `json:"userId"`
				}
			}
		}
		if json.Unmarshal(data, &m) != nil {
			c.Close(websocket.StatusPolicyViolation, "invalid message")
			return
		}
		switch m.Type {
		case "connection_init":
			sub.msgs <- []byte(`{"type":"connection_ack"}`)
		case "ping":
			sub.msgs <- []byte(`{"type":"pong"}`)
		case "subscribe":
			s.mu.Lock()
			sub.userID = m.Payload.Variables.UserID
			s.subs[sub] = struct{}{}
			s.mu.Unlock()
		}
	}
}

func (s *Server) remove(sub *subscriber) {
	s.mu.Lock()
	delete(s.subs, sub)
	s.mu.Unlock()
}

// publish queues msg, of a post of userID, for every subscriber that takes it, dropping those
// that cannot.
func (s *Server) publish(msg []byte, userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		if sub.userID != "" && sub.userID != userID {
			continue
		}
		select {
		case sub.msgs <- msg:
		default:
			sub.cancel()
		}
	}
}
