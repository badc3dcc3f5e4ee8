// What a connection sends, through a bounded queue and one writer at a time, its close code
// last; and the keep-alive.

package ws

import (
	"context"
	"errors"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/spans"
)

// reply queues a message the client's own messages call for (ack, pong, a result, an error),
// waiting while the queue is full: a client that sends faster than it reads is slowed down.
func (c *wsConn) reply(m message) {
	for !c.enqueue(m) {
		select {
		case <-c.room:
		case <-c.ctx.Done():
			return
		}
	}
}

// push queues an event. A client that lets the queue fill up is too slow, and is cut off
// (CutOff) rather than allowed to hold events (and memory) back.
func (c *wsConn) push(m message) {
	if c.ctx.Err() != nil {
		return
	}
	if !c.enqueue(m) {
		metrics.EventsDropped(metrics.StageConnection, c.sendQueue()+1) // the queue is full
		c.CutOff(errcode.New(errcode.TooSlow, "the client reads messages too slowly"))
	}
}

// hold counts n more bytes (less than 0: fewer) that the connection holds for its client,
// against max_memory_per_client (live.Hub.Hold).
func (c *wsConn) hold(n int) {
	c.hub.Hold(c, n)
}

// CutOff ends the connection of a client found too slow at once. Fail alone would have the
// writer send the queue and a close frame after the message it is writing, which a client that
// has stopped reading never takes: the writer would wait out the write's timeout (ws_keepalive)
// while the connection holds its place in the hub, its queue and its goroutines. CutOff cancels
// c.writes, on which coder/websocket closes the connection under the write in progress (or the
// next), and the reader's end follows; the close code is logged, not sent. It never blocks.
func (c *wsConn) CutOff(why *errcode.Error) {
	c.Fail(why)
	c.cutWrites()
}

// roomForEvents waits until the queue has room for a replay (live.Room); it fails once ctx or
// the connection ends.
func (c *wsConn) roomForEvents(ctx context.Context) error {
	return c.replayRoom.Wait(ctx, c.ctx.Done(), &c.queueMu, func() (int, int, int, error) {
		return len(c.queue), c.queuedBytes, c.sendQueue(), nil
	})
}

// sendQueue is how many messages the queue may hold: the current config's SendQueue.
func (c *wsConn) sendQueue() int { return c.current().Subscriptions.SendQueue }

// enqueue queues m for the writer and makes sure one runs, unless the queue is full.
func (c *wsConn) enqueue(m message) bool {
	c.hold(len(m.Payload)) // before the writer can take it, and give it back
	c.queueMu.Lock()
	full := len(c.queue) >= c.sendQueue()
	if !full {
		c.queue = append(c.queue, m)
		c.queuedBytes += len(m.Payload)
	}
	c.queueMu.Unlock()
	if full {
		c.hold(-len(m.Payload))
		return false
	}
	c.kick()
	return true
}

// dequeue takes the oldest message of the queue, if any, skipping those of operations the
// client has completed: the protocol sends nothing of an operation after its complete, and the
// client may have reused its id.
func (c *wsConn) dequeue() (message, bool) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	for len(c.queue) > 0 {
		m := c.queue[0]
		c.queue[0] = message{} // what is written is not kept alive by the queue's array
		if c.queue = c.queue[1:]; len(c.queue) == 0 {
			c.queue = nil
		}
		select {
		case c.room <- struct{}{}:
		default:
		}
		c.queuedBytes -= len(m.Payload)
		c.replayRoom.Taken(len(c.queue), c.queuedBytes, c.sendQueue)
		if m.op == nil || !m.op.completed.Load() {
			return m, true
		}
		c.freed(m)
	}
	return message{}, false
}

// freed gives back what m, dequeued, held against the client's memory, once it is written or
// dropped.
func (c *wsConn) freed(m message) { c.hold(-len(m.Payload)) }

// queued says whether messages wait.
func (c *wsConn) queued() bool {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return len(c.queue) > 0
}

// kick makes sure that a writer runs while messages wait or a close is due. The writer ends
// when there is nothing to write, so an idle connection holds no goroutine (and stack) for it.
func (c *wsConn) kick() {
	if c.writing.CompareAndSwap(false, true) {
		c.spawn(c.write)
	}
}

// errNotWritten is what the span of a delivery records when the connection broke under it.
var errNotWritten = errors.New("the connection broke before the event was written")

// write is the connection's only writer while it runs: it writes what is queued, and once Fail
// is called, closes the connection with Fail's code after the queue.
func (c *wsConn) write() {
	for {
		if m, ok := c.dequeue(); ok {
			delivery := spans.Span{}
			if m.op != nil && m.Type == c.proto.next {
				delivery = m.op.traced.Delivery(m.Payload) // a traced subscription's event
			}
			written := c.writeMessage(m)
			if !written {
				delivery.Fail(errNotWritten, "")
			}
			delivery.End()
			c.freed(m)
			if !written {
				return // the connection is broken: writing stays set, no writer runs again
			}
			continue
		}
		if c.Ending() {
			c.closeWithReason()
			return
		}
		c.writing.Store(false)
		// A message queued, or Fail called, since the queue was found empty saw this writer
		// running and started none: go on, unless another writer has started since.
		if !c.queued() && !c.Ending() || !c.writing.CompareAndSwap(false, true) {
			return
		}
	}
}

// closeWithReason sends what is queued, then closes the connection with Fail's code; one cut
// off (CutOff) it closes at once, as Close would wait for the client's close frame.
func (c *wsConn) closeWithReason() {
	for m, ok := c.dequeue(); ok; m, ok = c.dequeue() {
		written := c.writeMessage(m)
		c.freed(m)
		if !written {
			break
		}
	}
	c.cancel()
	if c.writes.Err() != nil {
		_ = c.ws.CloseNow()
		return
	}
	_ = c.ws.Close(websocket.StatusCode(c.closeErr.Code.Close), c.closeErr.Message)
}

func (c *wsConn) writeMessage(m message) bool {
	ctx, cancel := context.WithTimeout(c.writes, c.current().Subscriptions.KeepAlive)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, m.encode()); err != nil {
		c.cancel()
		if c.writes.Err() != nil {
			// Cut off (CutOff) before this write began: coder/websocket may then refuse it
			// without closing the connection, which would stay open, its reader waiting.
			_ = c.ws.CloseNow()
		}
		return false
	}
	c.sent.Add(1)
	return true
}

// keepAlive pings the client; one that does not answer in time is gone. The legacy protocol
// also gets its ka message. A timer spawns it, so that an idle connection holds no goroutine
// (and stack) for it.
func (c *wsConn) keepAlive() {
	if c.ctx.Err() != nil {
		return
	}
	if c.proto.keepAlive != "" && c.initialised() {
		c.reply(message{Type: c.proto.keepAlive})
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.current().Subscriptions.KeepAlive)
	err := c.ws.Ping(ctx)
	cancel()
	if err != nil {
		if c.ctx.Err() == nil {
			c.Fail(errcode.New(errcode.GoingAway, "no answer to the keep-alive ping"))
		}
		return
	}
	c.life.Lock()
	if !c.stopped {
		c.pinger.Reset(c.current().Subscriptions.KeepAlive)
	}
	c.life.Unlock()
}
