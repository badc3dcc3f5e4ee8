// The operations a connection runs, from its subscribe message to its complete.

package ws

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/request"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/schema"
)

// operation is one running operation of a connection.
type operation struct {
	id        string
	stop      func()         // leaves a subscription's feed, or cancels a query or mutation
	completed atomic.Bool    // by the client: no more of it may be sent, even what is queued
	traced    *schema.Traced // a subscription's whose request is traced: its deliveries' spans
}

// subscribe starts an operation. The protocol acknowledges no subscribe: a subscription's
// returns once its feed is subscribed to the events (with c.mu released), so that the client's
// next message is read then, and a write it makes once that message is answered (a ping's pong)
// reaches the subscription, as the first bytes of an HTTP stream say (stream.Handler.Serve).
func (c *wsConn) subscribe(m message) *errcode.Error {
	var subscribed func() // waits for the feed's subscription to the events
	defer func() {
		if subscribed != nil {
			subscribed()
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.acked:
		return errcode.New(errcode.NotAcknowledged, "Unauthorized")
	case m.ID == "":
		return errcode.New(errcode.BadRequest, "Invalid message received: an operation needs an id")
	case c.ops[m.ID] != nil:
		return errcode.New(errcode.SubscriberExists, "Subscriber for "+answer.Truncate(m.ID)+" already exists")
	}
	req, why := subscribeRequest(m.Payload)
	if why != nil {
		return why
	}
	start := time.Now()
	// One live.Config for the whole operation, whose schema prepares and runs it: the current one.
	cfg := c.current()
	if len(c.ops) >= cfg.Subscriptions.MaxSubscriptions {
		metrics.LimitRefused("max_subscriptions")
		c.refuseOperation(m.ID, nil, start, answer.QueryError(
			errcode.New(errcode.TooManyOperations, "this connection runs as many operations as it may; complete one first")))
		return nil
	}
	// ctx carries the operation's span when the connection's request is traced; it ends once
	// the operation is refused, subscribed, or answered.
	ctx, span, op, refusal := cfg.GraphQL.PrepareIn(c.ctx, req)
	if refusal != nil {
		span.End()
		c.refuseOperation(m.ID, nil, start, refusal)
		return nil
	}
	if err := cfg.Posts.Allow(c.caller, request.ActionOf(op.Type)); err != nil {
		e := errcode.Of(err)
		answer.RecordError(span, err, e)
		span.End()
		c.refuseOperation(m.ID, op, start, answer.QueryError(e))
		return nil
	}
	o := &operation{id: m.ID, traced: op.Traced()}
	if op.Type == "subscription" {
		defer span.End()
		if c.seq == nil { // the first subscription: an idle connection holds none
			c.seq = schema.NewSequence(cfg.Subscriptions.SendQueue, c.roomForEvents, c.hold)
		}
		endedEarly := make(chan struct{}) // closed by ended, which the feed calls once at most
		l, err := cfg.GraphQL.ListenIn(c.seq, c.client, op, c.caller,
			func(payload json.RawMessage) { c.push(message{ID: o.id, Type: c.proto.next, Payload: payload, op: o}) },
			func(err error) { close(endedEarly); c.spawn(func() { c.feedEnded(o, err) }) })
		if err != nil { // ErrTooManyFeeds or ErrTooManyFeedsPerClient
			e := errcode.Of(err)
			answer.RecordError(span, err, e)
			c.refuseOperation(m.ID, op, start, answer.QueryError(e))
			return nil
		}
		o.stop = l.Close
		c.ops[m.ID] = o
		c.operationDone(op, "OK", start)
		subscribed = func() {
			select {
			case <-l.Subscribed():
			case <-endedEarly:
			case <-c.ctx.Done():
			}
		}
		return nil
	}
	ctx, stop := context.WithCancel(auth.NewContext(ctx, c.caller))
	o.stop = stop
	c.ops[m.ID] = o
	spawned := c.spawn(func() {
		defer stop()
		defer span.End()
		res := cfg.GraphQL.Execute(ctx, op)
		c.operationDone(op, answer.ResponseCode(res), start)
		if res.Data == nil {
			c.complete(o, res.Errors)
			return
		}
		c.reply(message{ID: o.id, Type: c.proto.next, Payload: answer.MustJSON(res), op: o})
		c.complete(o, nil)
	})
	if !spawned { // the connection is ending
		span.End()
	}
	return nil
}

// refuseOperation answers the subscribe message id with the error why, and counts the
// operation refused: op, or nil when it was refused before it was prepared.
func (c *wsConn) refuseOperation(id string, op *schema.Operation, start time.Time, why *gqlerrors.QueryError) {
	errs := []*gqlerrors.QueryError{why}
	c.operationDone(op, answer.ResponseCode(&graphql.Response{Errors: errs}), start)
	c.reply(message{ID: id, Type: "error", Payload: answer.MustJSON(errs)})
}

// feedEnded tells the client how the feed of subscription o ended, as live.Hub.FeedEnd says.
func (c *wsConn) feedEnded(o *operation, err error) {
	switch end := c.hub.FeedEnd(err); {
	case end.Quiet:
	case end.Fail != nil:
		c.Fail(end.Fail)
	default:
		c.complete(o, end.Errors)
	}
}

// complete tells the client that o ended, with errs or without, unless the client stopped it
// (its id maybe reused since) or the connection is ending.
func (c *wsConn) complete(o *operation, errs []*gqlerrors.QueryError) {
	c.mu.Lock()
	running := c.ops[o.id] == o && c.ctx.Err() == nil
	if running {
		delete(c.ops, o.id)
	}
	c.mu.Unlock()
	switch {
	case !running:
	case errs != nil:
		c.reply(message{ID: o.id, Type: "error", Payload: answer.MustJSON(errs)})
	default:
		c.reply(message{ID: o.id, Type: c.proto.complete})
	}
}
