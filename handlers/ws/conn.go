// Package ws serves GraphQL over WebSocket, in both subprotocols, graphql-ws's
// graphql-transport-ws and the legacy graphql-ws of subscriptions-transport-ws (protocol.go,
// message.go): a client's connection from the upgrade to its end (Handler.ServeHTTP, conn), the
// operations it runs (operations.go), what it sends, through a bounded queue (queue.go), and
// what it tells operators (observe.go). Its connections are held, counted and kept across
// reloads by a live.Hub, in one pool with the streams over HTTP.
package ws

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/requestid"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/spans"
)

// Handler serves GraphQL over WebSocket for one config: the API's, which lets connections in;
// once open, a connection applies its hub's current config (live.Hub.Current).
type Handler struct {
	// Hub holds the connections, in one pool with the site's streams over HTTP.
	Hub *live.Hub
	// Config is the API's: its credentials, limits, and how it tells clients apart.
	Config *live.Config
	// Answer writes the refusals of an upgrade.
	Answer *answer.Failer
}

// IsUpgrade says whether r asks for a WebSocket.
func IsUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// ServeHTTP serves GraphQL over a WebSocket: r is an upgrade (IsUpgrade).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	offered := websocketProtocols(r)
	if !slices.Contains(offered, transportWS) && !slices.Contains(offered, legacyWS) {
		h.Answer.Fail(w, r, answer.BadRequest("Sec-WebSocket-Protocol must offer %s or %s", transportWS, legacyWS))
		return
	}
	// Taken while r is live, the upgrade's credentials count again at connection_init.
	creds := h.Config.Auth.CredentialsOf(r)
	upgradeCaller, err := h.Config.Auth.Identify(r.Context(), creds)
	if err != nil {
		h.Answer.Fail(w, r, err)
		return
	}
	cfg := h.Config.Subscriptions
	address := h.Config.ClientAddress(r)
	client := live.ClientKey(upgradeCaller, address)
	if err := h.Hub.Reserve(client, cfg.MaxConnections, cfg.MaxConnectionsPerUser); err != nil {
		w.Header().Set("Retry-After", answer.RetryAfter)
		h.Answer.Fail(w, r, err)
		return
	}
	ws, err := websocket.Accept(live.HijackBelow(w), r, &websocket.AcceptOptions{Subprotocols: []string{transportWS, legacyWS}, OriginPatterns: cfg.OriginPatterns})
	if err != nil {
		h.Hub.Release(client)
		return // Accept has answered (403 for a foreign origin)
	}
	// The connection outlives the request: its context comes from the hub, not from r; it
	// carries the request's id, made here on the request's goroutine, for what its goroutines log,
	// and its span, the parent of its operations' spans.
	ctx, cancel := context.WithCancel(spans.Carry(requestid.With(context.Background(), h.Answer.ID(r)), r.Context()))
	writes, cutWrites := context.WithCancel(context.Background())
	c := &wsConn{
		hub: h.Hub, ws: ws, proto: protocols[ws.Subprotocol()], ctx: ctx, cancel: cancel, writes: writes, cutWrites: cutWrites,
		room: make(chan struct{}, 1), closing: make(chan struct{}),
		creds: creds, caller: upgradeCaller, ops: map[string]*operation{}, client: client, address: address,
		upgrade: r, opened: time.Now(),
	}
	if !h.Hub.Add(c, client) {
		h.Hub.Release(client)
		_ = ws.Close(websocket.StatusGoingAway, "the server is shutting down")
		return
	}
	metrics.WebSocketOpened()
	c.serve()
}

// wsConn is one client's connection. Its goroutines: the reader (the upgrade request's until
// connection_init is answered, then its own; see serve), for as long as it is open, and while
// they have work, the writer, the keep-alive and each query or mutation (subscriptions are fed
// by their feed's goroutine); the reader's end waits for all of them.
type wsConn struct {
	hub    *live.Hub // whose current Config the connection applies
	ws     *websocket.Conn
	proto  protocol
	ctx    context.Context // the operations': ends with the connection
	cancel context.CancelFunc
	creds  auth.Credentials // the upgrade request's, to which connection_init adds its payload
	// writes is the context of every message written; cancelled by CutOff, it closes the
	// connection under the write in progress. Not ctx, which Fail cancels before the writer
	// sends the queue and the close frame.
	writes    context.Context
	cutWrites context.CancelFunc

	queueMu     sync.Mutex
	queue       []message     // to the writer, at most SendQueue; nil when empty, so idle costs nothing
	queuedBytes int           // the bytes of the payloads in queue
	room        chan struct{} // signalled when the writer takes a message, for a reply waiting for room
	replayRoom  live.Room     // for the replays waiting (roomForEvents)

	closeOnce sync.Once
	closing   chan struct{} // closed by Fail, after closeErr is set
	closeErr  *errcode.Error

	mu      sync.Mutex
	caller  auth.Identity
	acked   bool
	ops     map[string]*operation // the operations running, by id
	seq     *schema.Sequence      // orders the events of its subscriptions, from the first on
	client  string                // the client the connection counts against (live.ClientKey; schema's feed shares)
	address string                // the client's address, by which anonymous connections count
	expiry  *time.Timer           // closes the connection when its token expires

	writing atomic.Bool // a writer runs, or has closed the connection

	upgrade   *http.Request // live until connection_init is answered; read only by the reader
	initTimer *time.Timer   // closes the connection without a connection_init in time
	opened    time.Time
	received  int          // messages read; only the reader reads
	sent      atomic.Int64 // messages written
	readErr   error        // why reading ended

	life    sync.Mutex     // guards what follows, so that nothing joins wg once end waits for it
	stopped bool           // end has begun: spawn starts nothing more
	pinger  *time.Timer    // runs keepAlive
	wg      sync.WaitGroup // what spawn started
}

// current is the Config the connection applies: its hub's current one.
func (c *wsConn) current() *live.Config { return c.hub.Current() }

// serve reads the connection's messages and acts on them: on the upgrade request's goroutine
// until its connection_init is answered, so that the access log line Caddy writes when the
// handler returns names the user it authenticated; then on a goroutine of its own, so that
// Caddy's state of the request (its goroutine's stack among it) is freed for the connection's
// life. It ends the connection when reading ends.
func (c *wsConn) serve() {
	c.start()
	if !c.readRecovered() {
		c.end()
		return
	}
	c.upgrade = nil // the request ends with the handler
	go func() {
		c.readRecovered()
		c.end()
	}()
}

// start starts the keep-alive and the clock of connection_init.
func (c *wsConn) start() {
	cfg := c.current().Subscriptions
	c.life.Lock()
	c.pinger = time.AfterFunc(cfg.KeepAlive, func() { c.spawn(c.keepAlive) })
	c.life.Unlock()
	c.initTimer = time.AfterFunc(cfg.InitTimeout, func() {
		if !c.initialised() {
			metrics.LimitRefused("ws_init_timeout")
			c.Fail(errcode.New(errcode.InitTimeout, "Connection initialisation timeout"))
		}
	})
}

// readRecovered is read, with a panic turned into a 4500 close.
func (c *wsConn) readRecovered() (acknowledged bool) {
	defer c.recoverFault()
	return c.read()
}

// end stops what the connection started, waits for it, closes the connection if the writer
// has not, and gives back its place in the hub.
func (c *wsConn) end() {
	c.initTimer.Stop()
	c.life.Lock()
	c.stopped = true
	c.pinger.Stop()
	c.life.Unlock()
	c.mu.Lock()
	if c.expiry != nil {
		c.expiry.Stop()
	}
	for _, o := range c.ops {
		o.stop()
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.cutWrites()       // no write runs now: this releases the context alone
	_ = c.ws.CloseNow() // if the writer has not closed it with a code
	c.hub.Remove(c)
	metrics.WebSocketClosed()
	c.closed()
	c.hub.Release(c.client) // by then, maybe the user's rather than the address's
}

func (c *wsConn) initialised() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acked
}

// recoverFault turns a panic of one of the connection's goroutines, which would otherwise stop
// Caddy (only the HTTP handler's own goroutine is recovered by net/http), into a 4500 close
// and a log line.
func (c *wsConn) recoverFault() {
	if v := recover(); v != nil {
		c.current().Logger.Error("websocket connection failed", requestid.Field(c.ctx), zap.Any("panic", v), zap.StackSkip("stack", 1))
		c.Fail(errcode.New(errcode.Internal, "Internal server error"))
	}
}

// Fail ends the connection with why (the first reason wins): the writer sends what is queued,
// then closes with its code. It never blocks, so any goroutine may call it.
func (c *wsConn) Fail(why *errcode.Error) {
	c.closeOnce.Do(func() {
		c.closeErr = why
		close(c.closing)
		c.cancel() // no operation runs on, and none starts, once the connection is ending
		c.kick()
	})
}

// Ending says whether Fail was called.
func (c *wsConn) Ending() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// read reads messages until the connection ends, or, while the upgrade request is live, until
// connection_init is acknowledged: it says whether it stopped there.
func (c *wsConn) read() (acknowledged bool) {
	for {
		// The current config's, from the next message on.
		c.ws.SetReadLimit(c.current().Subscriptions.ReadLimit)
		// Not c.ctx: cancelling a read would drop the connection before the writer's close code.
		typ, data, err := c.ws.Read(context.Background())
		if err != nil || c.Ending() {
			c.readErr = err
			return false // the client left, the read limit (1009), or the connection is ending
		}
		c.received++
		m, why := decodeMessage(typ, data)
		if why != nil {
			c.Fail(why)
			return false
		}
		if why := c.handle(m); why != nil {
			c.Fail(why)
			return false
		}
		if c.upgrade != nil && m.Type == "connection_init" {
			return true
		}
	}
}

// handle acts on one message; a non-nil result closes the connection.
func (c *wsConn) handle(m message) *errcode.Error {
	switch m.Type {
	case "connection_init":
		return c.init(m.Payload)
	case "ping":
		if c.proto.pings {
			c.reply(message{Type: "pong", Payload: m.Payload})
			return nil
		}
	case "pong":
		if c.proto.pings {
			return nil
		}
	case "connection_terminate":
		if !c.proto.pings {
			return errcode.New(errcode.Terminated, "terminated by the client")
		}
	case c.proto.subscribe:
		return c.subscribe(m)
	case c.proto.stop:
		c.mu.Lock()
		op := c.ops[m.ID]
		delete(c.ops, m.ID)
		c.mu.Unlock()
		if op != nil {
			op.completed.Store(true) // what is queued for it is not sent
			op.stop()
		}
		return nil
	}
	return errcode.New(errcode.BadRequest, "Invalid message received: unknown type "+answer.Truncate(m.Type))
}

// init authenticates the connection with the credentials of the upgrade request and of the
// connection_init payload, asks posts whether the caller may subscribe, and acknowledges it.
func (c *wsConn) init(payload json.RawMessage) *errcode.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.acked {
		return errcode.New(errcode.TooManyInitialisations, "Too many initialisation requests")
	}
	creds := c.creds
	creds.Init = payload
	cfg := c.current()
	caller, err := cfg.Auth.Identify(c.ctx, creds)
	if err == nil {
		err = cfg.Posts.Allow(caller, posts.Subscribe)
	}
	if err != nil {
		return c.refuse(errcode.Of(err))
	}
	// Counted by its address until now, a connection whose connection_init names a user counts
	// as theirs; a user who holds as many as they may is told so with 4429, as 429 would.
	if client := live.ClientKey(caller, c.address); client != c.client {
		if why := c.hub.Move(c, c.client, client, cfg.Subscriptions.MaxConnectionsPerUser); why != nil {
			return c.refuse(why)
		}
		c.client = client
	}
	if !caller.Expires.IsZero() { // closed when HTTP would refuse the token, so that a reconnect with it fails too
		c.expiry = time.AfterFunc(time.Until(caller.Expires), func() { c.Fail(errcode.New(errcode.InvalidCredentials, "Forbidden: the token has expired")) })
	}
	c.caller, c.acked = caller, true
	c.authenticated()
	c.reply(message{Type: "connection_ack"})
	if c.proto.keepAlive != "" {
		c.reply(message{Type: c.proto.keepAlive})
	}
	return nil
}

// refuse is a refused connection_init; the legacy protocol says why in a message first.
func (c *wsConn) refuse(why *errcode.Error) *errcode.Error {
	if why.Code.Close == errcode.InvalidCredentials.Close {
		why = &errcode.Error{Code: why.Code, Message: "Forbidden: " + why.Message} // as graphql-ws's server says it
	}
	if c.proto.connectionError != "" {
		c.reply(message{Type: c.proto.connectionError, Payload: answer.MustJSON(map[string]string{"message": why.Message})})
	}
	return why
}

// spawn runs f in a goroutine that end waits for, unless the connection has ended, and says
// whether it does.
func (c *wsConn) spawn(f func()) bool {
	c.life.Lock()
	defer c.life.Unlock()
	if !c.stopped {
		c.wg.Go(func() { defer c.recoverFault(); f() })
	}
	return !c.stopped
}
