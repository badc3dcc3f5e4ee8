// What a connection tells operators: a log line once it is authenticated and one when it
// closes, and its lines in the metrics.

package ws

import (
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/requestid"
	"github.com/postsedge/caddy-posts/schema"
)

// authenticated tells Caddy (for the access log's user_id, written when the handler returns,
// once connection_init is answered) and the log who the connection_init named. It runs on the
// request's goroutine, which serves the connection until then.
func (c *wsConn) authenticated() {
	if c.caller.Anonymous() {
		return
	}
	cfg := c.current()
	if cfg.Identified != nil {
		cfg.Identified(c.upgrade, c.caller)
	}
	cfg.Logger.Info("websocket authenticated", requestid.Field(c.ctx),
		zap.String("user_id", c.caller.UserID), zap.String("method", c.caller.Method))
}

// closed logs and counts the connection once it has ended.
func (c *wsConn) closed() {
	code := c.CloseCode()
	if code == websocket.StatusMessageTooBig && !c.Ending() {
		metrics.LimitRefused("ws_read_limit") // closed by the library, not by Fail
	}
	metrics.Connection(strconv.Itoa(int(code)))
	c.mu.Lock()
	userID := c.caller.UserID
	c.mu.Unlock()
	c.current().Logger.Info("websocket closed", requestid.Field(c.ctx), zap.String("user_id", userID),
		zap.String("subprotocol", c.ws.Subprotocol()), zap.Duration("duration", time.Since(c.opened)),
		zap.Int("messages_received", c.received), zap.Int64("messages_sent", c.sent.Load()),
		zap.Int("close_code", int(code)))
}

// CloseCode is the code the connection closed with: the server's, the client's, 1009 for a
// message past the read limit, or 1006 when it ended without a close frame.
func (c *wsConn) CloseCode() websocket.StatusCode {
	if c.Ending() { // closeErr is set before closing is closed
		return websocket.StatusCode(c.closeErr.Code.Close)
	}
	if code := websocket.CloseStatus(c.readErr); code != -1 {
		return code
	}
	// coder/websocket closes a connection past its read limit itself, and says so only in text.
	if c.readErr != nil && strings.Contains(c.readErr.Error(), "read limited at") {
		return websocket.StatusMessageTooBig
	}
	return websocket.StatusAbnormalClosure
}

// operationDone counts an operation of the connection (nil: one refused before it was
// prepared), answered with code: its result, or for a subscription its start. Its log line, at
// debug level, names its type and name, as the access log line of a GraphQL request over HTTP does.
func (c *wsConn) operationDone(op *schema.Operation, code string, start time.Time) {
	typ, name := "none", ""
	if op != nil {
		typ, name = op.Type, answer.Truncate(op.Name)
	}
	took := time.Since(start)
	metrics.Request(metrics.WebSocket, typ, code, took)
	if ce := c.current().Logger.Check(zap.DebugLevel, "graphql operation"); ce != nil {
		ce.Write(requestid.Field(c.ctx), zap.String("graphql_operation_type", typ),
			zap.String("graphql_operation_name", name), zap.String("code", code), zap.Duration("duration", took))
	}
}

// Running is how many operations the connection runs.
func (c *wsConn) Running() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ops)
}

// Queued is how many messages wait for the connection's writer.
func (c *wsConn) Queued() int {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return len(c.queue)
}
