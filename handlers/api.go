// Package handlers serves the posts API over plain net/http: its front (New, API.Route) wires the
// transports, each in a package of its own under it (rest, graphqlhttp, ws, stream, with live
// for what subscriptions share, and the leaves answer and request), and serves the health path,
// the OpenAPI path and GraphiQL itself. Every rule is posts.Service's. Nothing here imports
// Caddy, so it is tested with httptest.
package handlers

import (
	"net/http"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/graphqlhttp"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/handlers/rest"
	"github.com/postsedge/caddy-posts/handlers/stream"
	"github.com/postsedge/caddy-posts/handlers/ws"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// Config is what the API needs.
type Config struct {
	// Posts applies the rules, and decides who may do what (Allow).
	Posts *posts.Service
	// GraphQL serves /graphql.
	GraphQL *schema.Schema
	// Subscriptions configures GraphQL subscriptions, over WebSocket and streamed over HTTP.
	Subscriptions live.Subscriptions
	// Auth finds the caller of each request.
	Auth *auth.Authenticator
	// MaxBodySize is the largest request body read, in bytes.
	MaxBodySize int64
	// MaxResponseSize is the largest response body written, in bytes: a page of posts ends
	// early rather than grow past it.
	MaxResponseSize int64
	// ClientIP, if set, returns the address of the client of r, by which anonymous clients are
	// counted against their shares; without it, the peer's address is used.
	ClientIP func(*http.Request) string
	// Logger receives the failures the client is not told about (5xx).
	Logger *zap.Logger
	// RequestID, if set, returns the id the request is logged under, so a 5xx in the log can be
	// matched with the access log.
	RequestID func(*http.Request) string
	// Identified, if set, is told the caller of every authenticated request before it is served
	// (Caddy sets its {http.auth.user.*} placeholders from it).
	Identified func(*http.Request, auth.Identity)
	// AccessLog, if set, adds a field to the access log line of a request (Caddy's extra log
	// fields): a GraphQL operation's type and name.
	AccessLog func(*http.Request, zap.Field)
	// HealthPath, if set, is the path that answers health probes (serveHealth).
	HealthPath string
	// Relay, if set, is the relay of the events of other instances, whose health probes report.
	Relay RelayHealth
	// OpenAPIPath, if set, is the path that serves the OpenAPI description of the REST API.
	OpenAPIPath string
	// Exiting, if set, says whether the process is exiting: the streams served over HTTP end at
	// once then, rather than hold the exit (live.Hub.CloseOnExit).
	Exiting func() bool
	// Hub, if set, holds the API's WebSocket connections and HTTP streams, and the caller
	// registers the API's LiveConfig with it (a server that reloads shares one hub between its
	// configs); without it, the API makes a hub of its own and registers with it.
	Hub *live.Hub
}

// API serves /posts, /posts/{id} and /graphql.
type API struct {
	cfg        Config
	collection http.Handler
	item       http.Handler
	noRoute    http.Handler
	graphql    http.Handler
	graphiql   http.Handler
	hub        *live.Hub          // the open WebSockets and HTTP streams
	live       *live.Config       // what they apply of cfg while the API is the hub's current
	streams    *stream.Handler    // subscriptions streamed over HTTP
	websockets *ws.Handler        // GraphQL over WebSocket
	answer     answer.Failer      // writes failures, and logs the server's faults
	vary       answer.Varies      // the Vary of REST and GraphQL answers
	probes     singleflight.Group // health probes under way

	cors *answer.CORS // which origins' pages may use it
}

// New returns the API described by cfg. It takes the sizes and limits of cfg as given: the
// caller fills them (caddymodule, from its table of defaults).
func New(cfg Config) *API {
	cfg.Subscriptions = cfg.Subscriptions.WithSendQueueFloor()
	a := &API{cfg: cfg, vary: answer.NewVaries(cfg.Auth), cors: answer.NewCORS(cfg.Subscriptions.OriginPatterns, cfg.Auth), hub: cfg.Hub}
	a.answer = answer.Failer{Logger: cfg.Logger, RequestID: cfg.RequestID}
	a.live = &live.Config{
		Subscriptions: cfg.Subscriptions, Posts: cfg.Posts, GraphQL: cfg.GraphQL, Auth: cfg.Auth, Logger: cfg.Logger,
		Identified: cfg.Identified, Exiting: cfg.Exiting, ClientIP: cfg.ClientIP,
	}
	if a.hub == nil {
		a.hub = live.NewHub()
		a.hub.Register(a.live)
	}
	a.streams = &stream.Handler{Hub: a.hub, Config: a.live, Answer: &a.answer}
	a.websockets = &ws.Handler{Hub: a.hub, Config: a.live, Answer: &a.answer}
	rs := &rest.Handler{Posts: cfg.Posts, Auth: cfg.Auth, MaxBodySize: cfg.MaxBodySize, MaxResponseSize: cfg.MaxResponseSize,
		Identified: cfg.Identified, Answer: &a.answer, Vary: a.vary, CORS: a.cors, ServeChanges: a.streams.ServeChanges}
	collection := rs.Collection()
	a.collection = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor >= 2 && rest.WantsChanges(r) {
			stream.ServeShallow(w, r, collection.ServeHTTP)
			return
		}
		collection.ServeHTTP(w, r)
	})
	a.item, a.noRoute = rs.Item(), rs.NoRoute()
	gh := &graphqlhttp.Handler{Posts: cfg.Posts, GraphQL: cfg.GraphQL, Auth: cfg.Auth, MaxBodySize: cfg.MaxBodySize,
		OriginPatterns: cfg.Subscriptions.OriginPatterns, Identified: cfg.Identified, AccessLog: cfg.AccessLog,
		Answer: &a.answer, Vary: a.vary, CORS: a.cors, Streams: a.streams, GraphiQL: serveGraphiQL}
	graphQLOverHTTP := answer.Observed(metrics.GraphQL, "none", gh.ServeHTTP)
	a.graphql = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ws.IsUpgrade(r) {
			a.websockets.ServeHTTP(w, r) // a connection, counted when it closes
			return
		}
		if r.ProtoMajor >= 2 && graphqlhttp.StreamRequested(r.Header.Get("Accept")) != nil {
			stream.ServeShallow(w, r, graphQLOverHTTP)
			return
		}
		graphQLOverHTTP(w, r)
	})
	a.graphiql = http.HandlerFunc(a.serveGraphiQLFiles)
	return a
}

// graphqlPath is the GraphQL endpoint.
const graphqlPath = "/graphql"

// Route returns the handler for r, or nil when r is for none of the API's paths and should go
// to whatever comes next. Every path under /posts/ is the API's: one that names no post
// (/posts/, /posts/{id}/, /posts/a/b) is a 404 from here, not another handler's to serve.
func (a *API) Route(r *http.Request) http.Handler {
	switch {
	case r.URL.Path == graphqlPath:
		return a.graphql
	case r.URL.Path == a.cfg.HealthPath && a.cfg.HealthPath != "":
		return http.HandlerFunc(a.serveHealth)
	case r.URL.Path == a.cfg.OpenAPIPath && a.cfg.OpenAPIPath != "":
		return http.HandlerFunc(a.serveOpenAPI)
	case strings.HasPrefix(r.URL.Path, graphiqlAssetPrefix):
		return a.graphiql
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/posts")
	switch {
	case !ok:
		return nil
	case rest == "":
		return a.collection
	case rest[0] != '/':
		return nil // /postsXYZ is another path
	case len(rest) > 1 && !strings.Contains(rest[1:], "/"):
		return a.item
	}
	return a.noRoute
}

// LiveConfig is what the API's open connections apply while it is its hub's current: the caller
// registers it with the hub it gave New (live.Hub.Register), and unregisters it when the config
// ends.
func (a *API) LiveConfig() *live.Config { return a.live }

// Close ends the connections of the API's hub at once with 1001 (going away), and refuses new
// ones: for a server that stops. (caddymodule closes the pooled hub, not the API.)
func (a *API) Close() {
	a.hub.Close(errcode.New(errcode.GoingAway, "the server is shutting down"), 0)
}

// serveGraphiQLFiles serves GraphiQL's JavaScript and CSS, to anyone: they hold no data.
func (a *API) serveGraphiQLFiles(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		a.answer.Fail(w, r, errcode.New(errcode.MethodNotAllowed, r.Method+" is not allowed here; allowed: GET, HEAD"))
		return
	}
	serveGraphiQLAsset(w, r)
}
