// Package stream serves GraphQL subscriptions over plain HTTP: one operation's results in one
// long response (Handler.Serve), framed as server-sent events (graphql-sse's distinct
// connections mode, SSE) or as Apollo's multipart subscriptions (Multipart). Whatever the
// framing, a stream is let in, counted and fed as a WebSocket is: the same credentials, origins,
// per-client shares (one pool with the WebSockets, live.Hub), feeds and response budget, and it
// outlives a reload in the same hub. Which framing a request asks for is GraphQL over HTTP's to
// read (graphqlhttp.StreamRequested); out.go says where the bytes go.
package stream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/requestid"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/spans"
)

// Framing writes the bytes of one streaming transport (SSE, Multipart); each method appends to
// b.
type Framing interface {
	name() string        // the interface label of the metrics: metrics.SSE or metrics.Multipart
	contentType() string // of the response
	keepAliveEvery(cfg live.Subscriptions) time.Duration
	open(b []byte) []byte      // what the stream begins with, at once
	keepAlive(b []byte) []byte // what keeps an idle stream open through proxies
	// result is one execution result: an event's, whose cursor SSE makes its id (event), or a
	// query's or a refusal's, which a reconnect does not resume from.
	result(b []byte, payload json.RawMessage, event bool) []byte
	complete(b []byte) []byte // the end of the operation
	// failed ends the stream with errs. reconnect says that they are the transport's, not the
	// operation's (the client was too slow, the server is going): a framing whose clients
	// reconnect and resume by themselves (SSE) ends without a word, so that they do.
	failed(b []byte, errs []*gqlerrors.QueryError, reconnect bool) []byte
}

// stream is one operation served over a long response. One goroutine writes it (run: the
// request's, as a ResponseWriter is its handler's alone, or one of its own once it has taken its
// connection); events and the end reach it through the queue.
type stream struct {
	frame Framing
	wake  chan struct{} // signalled when something is queued or the stream ends
	hub   *live.Hub     // whose current Config the stream applies

	// For its log line.
	client string          // the client the stream counts against (a user, or an address)
	ctx    context.Context // carries the request's id
	caller string          // the user id, "" for anonymous
	opened time.Time
	sent   int // results written; only run touches it
	// traced is the subscription's of a traced request, for the spans of its deliveries (of
	// REST's change stream, its request's); nil when untraced.
	traced *schema.Traced

	undo []func() // what close undoes, in the order taken

	mu     sync.Mutex
	queue  []json.RawMessage // results to write, at most Subscriptions.SendQueue
	queued int               // the bytes of queue
	done   bool              // the stream is ending: end is set
	end    streamEnd
	room   live.Room // for a replay waiting (roomForEvents)
	o      out       // where run writes, once it runs
	cut    bool      // CutOff was called: nothing more reaches the client
}

// streamEnd is how a stream ends: with errs or not, and whether the client should reconnect.
type streamEnd struct {
	errs      []*gqlerrors.QueryError
	reconnect bool
}

// push queues a result; a client that lets the queue fill is too slow, and its stream is cut
// off (CutOff; for SSE, so that it reconnects and resumes), never waited for.
func (s *stream) push(payload json.RawMessage, limit int) {
	s.hold(len(payload)) // before run can take it, and give it back
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		s.hold(-len(payload))
		return
	}
	if len(s.queue) >= limit {
		s.mu.Unlock()
		s.hold(-len(payload))
		metrics.EventsDropped(metrics.StageConnection, limit+1)
		s.CutOff(errcode.New(errcode.TooSlow, "the client reads the stream too slowly; reconnect"))
		return
	}
	s.queue = append(s.queue, payload)
	s.queued += len(payload)
	s.mu.Unlock()
	s.signal()
}

// hold counts n more bytes (less than 0: fewer) that the stream holds for its client, against
// max_memory_per_client (live.Hub.Hold).
func (s *stream) hold(n int) {
	s.hub.Hold(s, n)
}

// finish ends the stream with how, unless it is ending already (the first reason wins).
func (s *stream) finish(how streamEnd) {
	s.mu.Lock()
	if !s.done {
		s.done, s.end = true, how
		s.room.Wake() // a replay waiting ends
	}
	s.mu.Unlock()
	s.signal()
}

// Fail ends the stream for a reason of the transport's or the server's: the hub's close on a
// reload or a shutdown, or a client too slow. It never blocks.
func (s *stream) Fail(why *errcode.Error) {
	s.finish(streamEnd{errs: []*gqlerrors.QueryError{answer.QueryError(why)}, reconnect: true})
}

// CutOff ends the stream of a client found too slow at once. Fail would have run write the
// stream's last words after what it is writing, which a client that has stopped reading never
// takes: run would wait out the write's deadline (deadline, 24 s by default) holding its
// goroutine, its buffers and its place in the hub. CutOff ends the write in progress (out.cut)
// and every later one, the last words with them; the client's connection or HTTP/2 stream ends
// there, mid-event maybe. It never blocks.
func (s *stream) CutOff(why *errcode.Error) {
	s.mu.Lock()
	s.cut = true
	o := s.o
	s.mu.Unlock()
	s.Fail(why)
	if o != nil {
		o.cut()
	}
}

// Ending says whether the stream is ending: its end is set (Fail, CutOff, its feed's end), and
// nothing more is queued.
func (s *stream) Ending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// lost is the end of a stream whose client can no longer be written to: the end CutOff set, or
// the client left.
func (s *stream) lost() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cut {
		return endReason(s.end)
	}
	return "client_left"
}

func (s *stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take is what is queued, up to batchBytes of it (one result at least), and whether the stream
// is ending with it; it signals the stream again when it leaves some queued.
func (s *stream) take() ([]json.RawMessage, bool, streamEnd) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, bytes := 0, 0
	for ; n < len(s.queue) && (n == 0 || bytes+len(s.queue[n]) <= batchBytes); n++ {
		bytes += len(s.queue[n])
	}
	q := slices.Clone(s.queue[:n])
	clear(s.queue[:n]) // what is written is not kept alive by the queue's array
	if s.queue = s.queue[n:]; len(s.queue) == 0 {
		s.queue = nil
	} else {
		s.signal()
	}
	s.queued -= bytes
	s.room.Taken(len(s.queue), s.queued, s.sendQueue)
	return q, s.done && s.queue == nil, s.end
}

// batchBytes is about how many bytes of results run writes at once: it copies them, framed, into
// one buffer, so a client that stops reading holds one such buffer besides its queue.
const batchBytes = 64 << 10

// Handler serves streams for one config: the API's, which lets them in; once open, a stream
// applies its hub's current config (live.Hub.Current), as a WebSocket does.
type Handler struct {
	// Hub holds the streams, in one pool with the site's WebSockets.
	Hub *live.Hub
	// Config is the API's: its schema, limits, and how it tells clients apart.
	Config *live.Config
	// Answer writes the refusals before a stream starts.
	Answer *answer.Failer
}

// Serve serves op, a prepared operation its caller may run, as a stream in the framing f: a
// subscription's events, or the one result of a query or mutation (to a client that takes only
// a stream). A refusal before the stream starts is JSON in the media type plain.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, f Framing, plain string, caller auth.Identity, op *schema.Operation) {
	if op.Type != "subscription" {
		ctx := requestid.With(auth.NewContext(r.Context(), caller), h.Answer.ID(r))
		Result(w, f, h.Config.GraphQL.Execute(ctx, op))
		return
	}
	fail := func(err error) { h.Answer.FailGraphQL(w, r, plain, err) }
	h.serve(w, r, f, fail, caller, []*schema.Operation{op})
}

// serve serves ops, subscriptions that caller may run, as one stream in the framing f, their
// events in the log's order (one schema.Sequence); fail answers a refusal before it starts.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, f Framing, fail func(error), caller auth.Identity, ops []*schema.Operation) {
	if x := answer.ExchangeOf(w); x != nil {
		x.Interface = f.name()
	}
	if r.Method == http.MethodHead { // the headers a GET would have, and no stream to feed
		startStream(w, f)
		return
	}
	if !canFlush(w) { // a handler in front holds the response: the client would get the opening, then nothing
		fail(errcode.Of(errors.New("a handler in front of posts buffers its responses (its writer cannot flush): subscriptions cannot stream through it; keep streams out of it (see the cache recipe of docs/recipes.md)")))
		return
	}
	cfg := h.Config.Subscriptions
	client := live.ClientKey(caller, h.Config.ClientAddress(r))
	if err := h.Hub.Reserve(client, cfg.MaxConnections, cfg.MaxConnectionsPerUser); err != nil {
		w.Header().Set("Retry-After", answer.RetryAfter)
		fail(err)
		return
	}
	s := &stream{frame: f, wake: make(chan struct{}, 1), client: client, hub: h.Hub, ctx: spans.Carry(requestid.With(context.Background(), h.Answer.ID(r)), r.Context()), caller: caller.UserID, opened: time.Now()}
	s.atEnd(func() { h.Hub.Release(client) })
	if !h.Hub.Add(s, client) {
		s.close()
		w.Header().Set("Retry-After", answer.RetryAfter)
		fail(errcode.New(errcode.ServerFull, "the server is closing; try again later"))
		return
	}
	s.atEnd(func() { h.Hub.Remove(s) })
	h.Hub.CloseOnExit(r, h.Config.Exiting)
	seq := schema.NewSequence(cfg.SendQueue, s.roomForEvents, s.hold)
	if len(ops) == 1 {
		s.traced = ops[0].Traced()
	} else { // REST's change stream, its operations made, not prepared from the request
		s.traced = h.Config.GraphQL.TracedIn(r.Context(), ops...)
	}
	listeners := make([]*schema.Listener, 0, len(ops))
	for _, op := range ops {
		l, err := h.Config.GraphQL.ListenIn(seq, client, op, caller,
			func(payload json.RawMessage) { s.push(payload, s.sendQueue()) },
			s.feedEnded)
		if err != nil { // ErrTooManyFeeds (503), or ErrTooManyFeedsPerClient (429)
			s.close()
			fail(err)
			return
		}
		s.atEnd(l.Close)
		listeners = append(listeners, l)
	}
	// The stream's first bytes tell the client it is subscribed: a write it makes once it has
	// them must reach it, so they wait for the feeds' subscriptions to the events.
subscribing:
	for _, l := range listeners {
		select {
		case <-l.Subscribed():
		case <-s.wake: // the stream ended first: run writes how
			s.signal()
			break subscribing
		case <-r.Context().Done():
			s.close()
			return
		}
	}
	if !caller.Expires.IsZero() { // ended when HTTP would refuse the token, as a WebSocket is
		expiry := time.AfterFunc(time.Until(caller.Expires), func() {
			s.finish(streamEnd{errs: []*gqlerrors.QueryError{answer.QueryError(errcode.New(errcode.InvalidCredentials, "Forbidden: the token has expired"))}})
		})
		s.atEnd(func() { expiry.Stop() })
	}
	if reconnects(f) && cfg.SSEMaxDuration > 0 {
		cut := time.AfterFunc(cfg.SSEMaxDuration, func() {
			s.Fail(errcode.New(errcode.ServiceRestart, "the stream lasted sse_max_duration; reconnect"))
		})
		s.atEnd(func() { cut.Stop() })
	}
	metrics.StreamOpened(f.name())
	s.atEnd(func() { metrics.StreamClosed(f.name()) })
	o := s.start(w, r)
	if o == nil {
		s.close()
		return
	}
	if _, taken := o.(*connOut); taken {
		go s.run(o) // the request ends here; the stream goes on, on a goroutine of its own
		return
	}
	if then, ok := r.Context().Value(thenKey{}).(*func()); ok {
		*then = func() { s.run(o) } // on the handler's goroutine, once the setup's has ended
		return
	}
	s.run(o)
}

// reconnects says whether the clients of framing f reconnect by themselves and resume, as
// EventSource does: server-sent events.
func reconnects(f Framing) bool {
	switch f.(type) {
	case SSE, Changes:
		return true
	}
	return false
}

// Result answers res as a stream of one result in the framing f: a refusal, or a query's result
// to a client that takes only a stream.
func Result(w http.ResponseWriter, f Framing, res *graphql.Response) {
	if x := answer.ExchangeOf(w); x != nil {
		x.Code = answer.ResponseCode(res)
	}
	startStream(w, f)
	_, _ = w.Write(f.complete(f.result(f.open(nil), answer.MustJSON(res), false)))
}

// startStream writes the headers of a stream in the framing f. Incremental tells Caddy's encode
// and reverse_proxy (and other proxies that know RFC 10036's field) to pass each part on at once.
func startStream(w http.ResponseWriter, f Framing) {
	h := w.Header()
	h.Set("Content-Type", f.contentType())
	answer.SetFixed(w, answer.FixedCacheControl, answer.CacheNoStore)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Incremental", "?1")
	h.Set("X-Accel-Buffering", "no") // nginx in front: do not buffer
	w.WriteHeader(http.StatusOK)
}

// start writes the stream's headers and first bytes, and says where the rest goes: the
// connection itself when start could take it from net/http (takeConnection), else the response.
// Caddy's read and write timeouts are lifted: a stream is as long as its subscription. nil: the
// client is gone already.
func (s *stream) start(w http.ResponseWriter, r *http.Request) out {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	if r.ProtoMajor == 1 {
		// The connection ends with the stream (takeConnection): a client must not send another
		// request on it.
		w.Header().Set("Connection", "close")
	}
	startStream(w, s.frame)
	o := &responseOut{w: w, rc: rc, ctx: r.Context()}
	if !o.write(s.frame.open(nil), s.deadline()) {
		return nil
	}
	if x := answer.ExchangeOf(w); x != nil {
		x.Code = "OK"
		x.Streaming(s.frame.name())
	}
	if w.Header().Get("Content-Encoding") != "" {
		return o // a handler in front (encode) transforms the body: the rest goes through it
	}
	if conn := takeConnection(w, r); conn != nil {
		return newConnOut(conn)
	}
	// Caddy's wrappers hold every write of a response to the server's write timeout (timeouts
	// { write }, a bound on the whole response since Caddy 2.11), which over HTTP/2 resets the
	// stream at that moment: the rest goes below them, and the deadline their write of the
	// opening set is moved at once.
	o.w = live.Innermost(w)
	o.rc = http.NewResponseController(o.w)
	_ = o.rc.SetWriteDeadline(s.deadline())
	return o
}

// deadline is that of a write now: one the client does not take within the keep-alive
// interval (ws_keepalive), past the next keep-alive, ends the stream. (Past the next keep-alive,
// because over HTTP/2 the deadline is a timer that resets the stream, idle or not.)
func (s *stream) deadline() time.Time {
	cfg := s.hub.Current().Subscriptions
	return time.Now().Add(cfg.KeepAlive + s.frame.keepAliveEvery(cfg))
}

// run writes the stream until it ends: its results as they come, a keep-alive when it is idle.
func (s *stream) run(o out) {
	defer s.close()
	defer s.recoverFault(o)
	s.mu.Lock()
	s.o = o
	cut := s.cut
	s.mu.Unlock()
	if cut { // before run began
		o.cut()
	}
	keepAlive := time.NewTicker(s.frame.keepAliveEvery(s.hub.Current().Subscriptions))
	defer keepAlive.Stop()
	var b []byte
	for {
		select {
		case <-o.gone():
			s.ended(s.lost())
			return
		case <-keepAlive.C:
			if s.hub.Exiting() {
				s.Fail(errcode.New(errcode.GoingAway, "the server is shutting down"))
				continue
			}
			if !o.write(s.frame.keepAlive(b[:0]), s.deadline()) {
				s.ended(s.lost())
				return
			}
		case <-s.wake:
			results, done, end := s.take()
			b = b[:0]
			taken := 0
			var deliveries []spans.Span // of a traced subscription's events
			for _, p := range results {
				b = s.frame.result(b, p, true)
				taken += len(p)
				if s.traced != nil {
					deliveries = append(deliveries, s.traced.Delivery(p))
				}
			}
			if done {
				if end.errs == nil {
					b = s.frame.complete(b)
				} else {
					b = s.frame.failed(b, end.errs, end.reconnect)
				}
			}
			written := len(b) == 0 || o.write(b, s.deadline())
			for _, d := range deliveries {
				if !written {
					d.Fail(errNotWritten, "")
				}
				d.End()
			}
			if !written {
				s.ended(s.lost())
				return
			}
			s.hold(-taken)
			s.sent += len(results)
			if done {
				o.end()
				s.ended(endReason(end))
				return
			}
			if cap(b) > 64<<10 {
				b = nil // a burst's buffer is not kept for the stream's life
			}
		}
	}
}

// errNotWritten is what the span of a delivery records when the stream broke under it.
var errNotWritten = errors.New("the stream broke before the event was written")

// recoverFault turns a panic of run into the end of its stream alone. run goes on a goroutine
// of its own once it has taken its connection (Handler.Serve), which no handler of Caddy's
// recovers: a panic there would end Caddy. As Caddy's own goroutines do, the panic is logged at
// error with its stack (and the request's id, as handlers/ws's recoverFault logs a
// WebSocket's); the client's connection or HTTP/2 stream is cut, with no word of the fault, as
// what run was writing when it panicked is unknown. SSE's EventSource reconnects and resumes.
func (s *stream) recoverFault(o out) {
	v := recover()
	if v == nil {
		return
	}
	s.hub.Current().Logger.Error("graphql stream failed", requestid.Field(s.ctx), zap.String("user_id", s.caller),
		zap.String("interface", s.frame.name()), zap.Any("panic", v), zap.StackSkip("stack", 1))
	s.finish(streamEnd{errs: []*gqlerrors.QueryError{answer.QueryError(errcode.New(errcode.Internal, errcode.InternalMessage))}}) // nothing more is queued
	o.cut()
	s.ended(errcode.Internal.GraphQL)
}

// endReason names how a stream ended, for its log line: complete, or its first error's code.
func endReason(end streamEnd) string {
	if len(end.errs) == 0 {
		return "complete"
	}
	if code, ok := end.errs[0].Extensions["code"].(string); ok && code != "" {
		return code
	}
	return "error"
}

// ended logs the stream's end, as a WebSocket's "websocket closed" line does.
func (s *stream) ended(why string) {
	s.hub.Current().Logger.Info("graphql stream closed", requestid.Field(s.ctx), zap.String("user_id", s.caller),
		zap.String("interface", s.frame.name()), zap.Duration("duration", time.Since(s.opened)),
		zap.Int("events_sent", s.sent), zap.String("end", why))
}

// atEnd adds f to what close undoes, last first.
func (s *stream) atEnd(f func()) { s.undo = append(s.undo, f) }

// close undoes what the stream took: its listener, its timers, its place in the hub.
func (s *stream) close() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.undo = nil
}

// feedEnded ends the stream as its subscription's feed ended, as live.Hub.FeedEnd says.
func (s *stream) feedEnded(err error) {
	switch end := s.hub.FeedEnd(err); {
	case end.Quiet:
	case end.Fail != nil:
		s.Fail(end.Fail)
	default:
		s.finish(streamEnd{errs: end.Errors})
	}
}

// sendQueue is how many results the queue may hold: the current config's SendQueue.
func (s *stream) sendQueue() int { return s.hub.Current().Subscriptions.SendQueue }

// roomForEvents waits until the queue has room for a replay (live.Room) under the current
// config's SendQueue, the one Room.Taken reads; it fails once ctx or the stream ends.
func (s *stream) roomForEvents(ctx context.Context) error {
	return s.room.Wait(ctx, nil, &s.mu, func() (int, int, int, error) {
		if s.done {
			return 0, 0, 0, context.Canceled
		}
		return len(s.queue), s.queued, s.sendQueue(), nil
	})
}
