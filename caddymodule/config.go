package caddymodule

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/handlers"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// Handler serves the posts API: REST under /posts, GraphQL at /graphql, and GraphQL
// subscriptions over WebSocket, server-sent events and multipart HTTP, from an embedded SQLite
// store or from MongoDB. Requests for other paths go on to the next handler.
type Handler struct {
	// The MongoDB deployment to use, as a mongodb:// or mongodb+srv:// URI. Placeholders such
	// as {env.MONGODB_URI} are expanded; a value that expands to nothing is refused, not read as
	// none. Default: none, which keeps the posts in the embedded store: the SQLite file posts.db
	// in data_dir.
	MongoDBURI string `json:"mongodb_uri,omitempty"`

	// The MongoDB database that holds the posts and users collections; used only with
	// mongodb_uri. Default: posts.
	Database string `json:"database,omitempty"`

	// Where the embedded store keeps its file, posts.db; used only without mongodb_uri. One Caddy
	// process at a time may use a directory. Placeholders are expanded. Default: the "posts"
	// folder in Caddy's data directory.
	DataDir string `json:"data_dir,omitempty"`

	// When the embedded store reports a write done: "normal" once it is in the write-ahead log,
	// so it survives a crash of the process but a power loss may lose the last moments of
	// writes; "full" once the log is on disk, so it survives a power loss too, for a slower
	// write. Used only without mongodb_uri; with MongoDB, the URI's w and journal options say
	// the same. Default: normal.
	Synchronous string `json:"synchronous,omitempty"`

	// The memory the embedded store may use to keep posts it has read or written, so that a
	// read of a post by its id (GET /posts/{id}, post(id)) answers from memory; a size such as
	// 64MiB. It is never stale: only this process writes the file, and each write updates it as
	// it commits. The default holds every post of a store of 200,000 posts of a few hundred bytes
	// (each costs its text's bytes and about 110 more). Used only without mongodb_uri: instances
	// that share a MongoDB database write it each, so none could know its copy is current. At
	// most 64GiB. Default: 64MiB.
	PostCacheSize int64 `json:"post_cache_size,omitempty"`

	// URLs of the JSON Web Key Sets whose keys sign the accepted bearer tokens, such as
	// https://{tenant}.auth0.com/.well-known/jwks.json; a key from any of them is accepted. The
	// sets are fetched in the background and refreshed every jwks_refresh. Placeholders are
	// expanded. A plain http URL draws a warning unless its host is loopback, since anyone on
	// the path could replace the keys. Default: none, and bearer tokens are refused.
	JWKSURLs []string `json:"jwks_urls,omitempty"`

	// The accepted values of a token's iss claim; when set, the claim must be one of them.
	// Default: any issuer.
	Issuers []string `json:"issuers,omitempty"`

	// The accepted values of a token's aud claim; when set, the claim must hold one of them.
	// Default: any audience.
	Audiences []string `json:"audiences,omitempty"`

	// The accepted signing algorithms, any of RS256 RS384 RS512 PS256 PS384 PS512 ES256 ES384
	// ES512 EdDSA. "none" and the HMAC algorithms (HS256 and the like) are never accepted: a
	// public key set must not verify a token signed with a shared secret.
	// Default: RS256 RS384 RS512 PS256 ES256 ES384 EdDSA.
	Algorithms []string `json:"algorithms,omitempty"`

	// The token claim that holds the user id, a non-empty string. Default: sub.
	UserClaim string `json:"user_claim,omitempty"`

	// The token claim that holds the user's name. Default: name.
	NameClaim string `json:"name_claim,omitempty"`

	// The token claim that holds the user's email. Default: email.
	EmailClaim string `json:"email_claim,omitempty"`

	// The clock skew allowed when checking a token's exp, nbf and iat, at most 5m. Default: 30s.
	Leeway *caddy.Duration `json:"leeway,omitempty"`

	// How often the key sets are fetched again, at least 1s. A token with an unknown kid also
	// triggers a fetch, at most once a minute. Default: 1h.
	JWKSRefresh caddy.Duration `json:"jwks_refresh,omitempty"`

	// Accept the user that an earlier Caddy handler (basic_auth, an authentication plugin)
	// authenticated, as found in {http.auth.user.id}. Default: false.
	TrustCaddyAuth bool `json:"trust_caddy_auth,omitempty"`

	// The accepted API keys, each with the user it authenticates. Default: none.
	APIKeys []APIKey `json:"api_keys,omitempty"`

	// A request header that carries an API key too, besides "Authorization: ApiKey <key>", such
	// as X-API-Key. Default: none. Caddy's access log redacts Authorization but writes every
	// other header as it is, so a key header is for the operator to allow, who then filters it
	// out of the access log (docs/authentication.md). Without one, a request whose only
	// credential is an X-API-Key header is refused with 400, saying to send the key as
	// "Authorization: ApiKey <key>".
	APIKeyHeader string `json:"api_key_header,omitempty"`

	// The largest request body accepted, in bytes, at most 1 TiB; larger ones get 413.
	// Default: 1 MiB.
	MaxBodySize int64 `json:"max_body_size,omitempty"`

	// The largest page of posts a client may ask for: REST's ?limit, and the limit or first
	// argument of a GraphQL list. Default: 100.
	MaxLimit int `json:"max_limit,omitempty"`

	// The most words a search may have: REST's ?q and the search argument of GraphQL's lists
	// and subscriptions; a search of more is refused with 400 (BAD_USER_INPUT). Each word is
	// one more list of the index to read. Default: 8.
	MaxSearchTerms int `json:"max_search_terms,omitempty"`

	// The deadline of each storage operation; past it the client gets 503. Default: 5s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// The longest GraphQL query document accepted, in bytes, at most 1 GiB. Default: 16 KiB.
	MaxQueryLength int `json:"max_query_length,omitempty"`

	// The deepest nesting of fields a GraphQL operation may have. Default: 15 (the standard
	// introspection query of graphql-js reaches 13).
	MaxDepth int `json:"max_depth,omitempty"`

	// The most values a GraphQL operation may return, counted before it runs: each object
	// (post, user, edge, page info) and each of its fields, with every list as long as its limit
	// or first argument (or its default) lets it be. At most 2^30. Default: 2000.
	MaxCost int `json:"max_cost,omitempty"`

	// How many values a search (the search argument of GraphQL's posts, postsConnection and
	// User.posts) counts for in max_cost, over those it returns. A search reads its words' lists
	// of the index, which a page of the feed does not: two words each in half of 200,000 posts,
	// never both in one, take 9 to 12 ms to find that no post holds both, as long as 43 to 77
	// pages of 20 (BenchmarkSearchCost in store/sqlite). Counted for all it may read, no search
	// would fit in max_cost; search_cost bounds how many one operation holds instead. At most
	// 2^30. Default: 500, so that an operation holds three searches of a page of 20 (as many as
	// three requests to REST make), not four.
	SearchCost int `json:"search_cost,omitempty"`

	// The most aliased fields a GraphQL operation may have, fragments expanded; more is refused
	// with MAX_ALIASES_LIMIT before anything runs. Default: 30.
	MaxAliases int `json:"max_aliases,omitempty"`

	// The most fields a GraphQL operation may select at its root, fragments expanded: for a
	// mutation, the most writes one request makes. More is refused with MAX_ROOT_FIELDS_LIMIT.
	// Default: 10.
	MaxRootFields int `json:"max_root_fields,omitempty"`

	// The most fields a GraphQL document may select in all, fragments expanded (every operation
	// of a document is validated, though one runs); more is refused with MAX_FIELDS_LIMIT.
	// Default: 500.
	MaxFields int `json:"max_fields,omitempty"`

	// The largest response body, in bytes, at most 1 TiB. A GraphQL operation whose result would
	// grow past it stops and answers RESPONSE_TOO_LARGE; a REST page of posts ends early, its
	// Link pointing at the rest. It also bounds what writes cost their subscribers: the
	// responses of every distinct subscription to one write may take 8 times it together,
	// past the first 64 KiB of each (a subscription whose response to that write would not fit
	// gets RESPONSE_TOO_LARGE for that event, and goes on), and the large responses being
	// resolved at once take it between them, the others waiting their turn. Default: 8 MiB.
	MaxResponseSize int64 `json:"max_response_size,omitempty"`

	// Refuse GraphQL introspection (__schema and __type); __typename still works.
	// Default: false (introspection on).
	DisableIntrospection bool `json:"disable_introspection,omitempty"`

	// How many prepared GraphQL documents the cache keeps, so that a repeated operation (or an
	// automatic persisted query's hash) skips parsing and admission. Default: 1000.
	DocumentCacheEntries int `json:"document_cache_entries,omitempty"`

	// The most memory the cached documents may take, counted as 128 bytes per byte of query text,
	// the most a parsed document takes (most take a fifth of it), and 192 per field of a query's
	// plan, fragments expanded. Default: 32 MiB.
	DocumentCacheSize int64 `json:"document_cache_size,omitempty"`

	// The file of an Apollo persisted query manifest, whose operations are prepared at start and
	// never evicted; placeholders are expanded. Default: none.
	PersistedQueries string `json:"persisted_queries,omitempty"`

	// Refuse every operation that is not in persisted_queries (a safelist), which must then name
	// a manifest. Default: false.
	PersistedQueriesOnly bool `json:"persisted_queries_only,omitempty"`

	// Refuse subscriptions without credentials, over a WebSocket and over HTTP alike.
	// Default: false (anyone may subscribe to the public events of posts).
	SubscriptionsRequireAuth bool `json:"subscriptions_require_auth,omitempty"`

	// The origins besides the site's own whose pages may use the API: open WebSockets and
	// streams, and read the answers of /posts, /graphql and openapi_path, with the browser's
	// cookies (CORS: Access-Control-Allow-Origin with the page's origin, and
	// Access-Control-Allow-Credentials). Host patterns such as app.example.com or
	// *.example.com, or scheme://host. A client that sends no Origin is not a browser and is let
	// in. Default: the site's own origin only.
	AllowedOrigins []string `json:"allowed_origins,omitempty"`

	// The largest WebSocket message a client may send, in bytes, at most 1 GiB; larger closes
	// with 1009. Default: 32 KiB.
	WSReadLimit int64 `json:"ws_read_limit,omitempty"`

	// How long a WebSocket client has to send connection_init; past it the server closes the
	// connection with 4408. Default: 3s.
	WSInitTimeout caddy.Duration `json:"ws_init_timeout,omitempty"`

	// How often the server pings a WebSocket client; one that does not answer in that time is
	// closed. Default: 12s.
	WSKeepAlive caddy.Duration `json:"ws_keepalive,omitempty"`

	// How many operations one WebSocket connection may run at once. Default: 100.
	MaxSubscriptions int `json:"max_subscriptions,omitempty"`

	// How many connections this handler may hold at once, WebSockets and subscriptions streamed
	// over HTTP (server-sent events, multipart) together; more get 503. Default: 10000.
	MaxConnections int `json:"max_connections,omitempty"`

	// How many of those connections one client may hold: a user, or an anonymous client by its
	// IP (as Caddy finds it, trusted_proxies honoured); more get 429. Default: 100, or a tenth
	// of max_connections if that is less.
	MaxConnectionsPerUser int `json:"max_connections_per_user,omitempty"`

	// How many bytes one client's connections (a user, or an anonymous client by its IP, as
	// for max_connections_per_user) may hold for it, on every transport together: the events
	// queued for it and being written, the responses held back for an earlier event, and the
	// pages of the log its resumes read. Past it, the connection that holds the most is cut off
	// with TOO_SLOW (an SSE client resumes from its last event), until the client is within it
	// again: a client that stops reading costs the server this much, however many streams it
	// holds. At least max_response_size. Default: 32MiB, or max_response_size if larger.
	MaxMemoryPerClient int64 `json:"max_memory_per_client,omitempty"`

	// How many distinct subscription operations may run at once on the server (subscribers of the
	// same document, operation name and variables share one). Default: 1000.
	MaxDistinctSubscriptions int `json:"max_distinct_subscriptions,omitempty"`

	// How many of those one client (a user, or an anonymous client by its IP, as for
	// max_connections_per_user) may take part in at once; more get TOO_MANY_SUBSCRIPTIONS.
	// Default: a tenth of max_distinct_subscriptions.
	MaxDistinctSubscriptionsPerClient int `json:"max_distinct_subscriptions_per_client,omitempty"`

	// How long a subscription streamed as server-sent events may last before the server ends it:
	// EventSource reconnects by itself, with the last event's cursor as Last-Event-ID, and misses
	// nothing. Behind a load balancer this spreads the streams again over the instances it has
	// now. Default: none (a stream lasts as long as its client stays).
	SSEMaxDuration caddy.Duration `json:"sse_max_duration,omitempty"`

	// The path, such as /healthz, that answers health probes (GET or HEAD, no credentials): 200
	// with {"status":"ok",...} when the store answers a ping within timeout and every key set of
	// jwks_urls has been fetched once, 503 naming the part that failed otherwise. It writes
	// nothing, and probes that arrive together share one ping. Default: none (no health path).
	HealthPath string `json:"health_path,omitempty"`

	// The path, such as /openapi.yaml, that serves the OpenAPI 3.1 description of the REST API
	// (application/yaml, to anyone, with an ETag). Default: none (not served).
	OpenAPIPath string `json:"openapi_path,omitempty"`

	// How long an Idempotency-Key is kept with the answer to its create: a retry within it gets
	// that answer again, and after it the same request creates again. From 1s to 720h (30 days).
	// Default: 24h.
	IdempotencyTTL caddy.Duration `json:"idempotency_ttl,omitempty"`

	// Whose writes subscribers hear of. Every write logs its event in the store's event log,
	// with the write; "relay" reads the log every events_poll_interval, so that the subscribers
	// of every instance on one MongoDB get every write, in one order; "local" hands only this
	// instance's writes. relay needs mongodb_uri. Default: local without mongodb_uri (the
	// embedded store), relay with it.
	Events string `json:"events,omitempty"`

	// How often the relay reads the events of other instances, from 10ms to 10s. Default: 100ms.
	EventsPollInterval caddy.Duration `json:"events_poll_interval,omitempty"`

	// How long the events are kept in the store's log, from 1m to 720h: an instance cut from
	// the database for longer misses what was written meanwhile. Default: 1h.
	EventsTTL caddy.Duration `json:"events_ttl,omitempty"`

	// How many events the store's log keeps at most, whatever their age: the oldest go first,
	// at the next expiry (every minute). A subscriber resumes from a cursor only while the log
	// keeps the events after it (events_ttl and this). From 1000 to 1000000000. Default: 1000000.
	EventsMax int `json:"events_max,omitempty"`

	// How many events of the log one subscription started with extensions.resumeFrom may
	// replay, counted in positions of the log whatever the subscription matches of them: a
	// cursor further behind is refused with RESUME_TOO_LONG. Default: 100000.
	MaxResumeEvents int `json:"max_resume_events,omitempty"`

	// How long, at least, a reader of MongoDB's event log waits for the event of a position
	// another write took before it gives the position up (it marks it a hole, and that write
	// logs its event at a new position), and, half of it, how long a write waits for the writer
	// of another write's pending event of the same post before it logs that event itself. Both
	// grow to four of the slowest of the latest 64 round trips when the database is slow. Shorter
	// hands events sooner after a writer that stopped; longer spares live writers that are
	// merely slow a relogged event. From 100ms to 1m; used only with mongodb_uri. Default: 2s,
	// over FerretDB's round trips on a loaded host (1.7s at p99.9, of 16 writers beside a full
	// test run on 2 cores).
	MongoDBHoleWait caddy.Duration `json:"mongodb_hole_wait,omitempty"`

	logger    *zap.Logger
	storeKey  string
	eventsKey string
	jwksKeys  []string
	api       *handlers.API
	sweepKey  string // of the sweep of expired idempotency keys (idempotency.go)

	hubKey      string    // of the hub of the WebSocket connections (hubs.go)
	hub         *live.Hub // the hub
	followerKey string    // of the follower of the store's event log (follower.go)
}

// APIKey is one accepted API key.
type APIKey struct {
	// The key in clear (placeholders such as {env.POSTS_API_KEY} are expanded), or
	// "sha256:" followed by the hex SHA-256 digest of the key, which keeps it out of the config.
	Key string `json:"key"`

	// The user the key authenticates: the userId of the posts written with it.
	UserID string `json:"user_id"`

	// The user's name and email, saved in the users collection when the key writes. Optional.
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
}

// DefaultDatabase is the default of database, which the posts-import command offers too.
const DefaultDatabase = "posts"

// The values of Synchronous.
const (
	SyncNormal = "normal"
	SyncFull   = "full"
)

// Bounds of the config fields.
const (
	MaxLeeway      = caddy.Duration(5 * time.Minute)
	MinJWKSRefresh = caddy.Duration(time.Second)
	maxBodySize    = 1 << 40 // of max_body_size and max_response_size
	maxMessageSize = 1 << 30 // of max_query_length and ws_read_limit
)

// configField is the default and the rule of one config field.
type configField struct {
	name  string                 // in JSON and in the Caddyfile
	fill  func(h *Handler)       // sets the default when the field is unset; nil when unset is the default
	check func(h *Handler) error // the field's one rule, for Validate and the Caddyfile; nil: any value
}

// configFields are the fields of Handler that have a default or a rule, in the order Handler
// declares them: Provision fills them in this order, so a derived default comes after the field
// it derives from, and Validate reports their errors in it. Zero is unset, as JSON omits it.
var configFields = []configField{
	{"database", func(h *Handler) { orDefault(&h.Database, DefaultDatabase) },
		func(h *Handler) error { return validDatabase(h.Database) }},
	{"data_dir", func(h *Handler) { orDefault(&h.DataDir, filepath.Join(caddy.AppDataDir(), "posts")) }, nil},
	{"synchronous", func(h *Handler) { orDefault(&h.Synchronous, SyncNormal) }, checkSynchronous},
	{"post_cache_size", func(h *Handler) { orDefault(&h.PostCacheSize, sqlite.DefaultCacheSize) },
		func(h *Handler) error { return sizeUpTo("post_cache_size", h.PostCacheSize, sqlite.MaxCacheSize) }},
	{"algorithms", fillAlgorithms, checkAlgorithms},
	{"user_claim", func(h *Handler) { orDefault(&h.UserClaim, "sub") }, nil},
	{"name_claim", func(h *Handler) { orDefault(&h.NameClaim, "name") }, nil},
	{"email_claim", func(h *Handler) { orDefault(&h.EmailClaim, "email") }, nil},
	{"leeway", func(h *Handler) { orDefault(&h.Leeway, new(caddy.Duration(30*time.Second))) }, checkLeeway},
	{"jwks_refresh", func(h *Handler) { orDefault(&h.JWKSRefresh, caddy.Duration(time.Hour)) }, checkJWKSRefresh},
	{"max_body_size", func(h *Handler) { orDefault(&h.MaxBodySize, 1<<20) },
		func(h *Handler) error { return sizeUpTo("max_body_size", h.MaxBodySize, maxBodySize) }},
	{"max_limit", func(h *Handler) { orDefault(&h.MaxLimit, 100) },
		func(h *Handler) error { return atLeastOne("max_limit", h.MaxLimit) }},
	{"max_search_terms", func(h *Handler) { orDefault(&h.MaxSearchTerms, 8) },
		func(h *Handler) error { return atLeastOne("max_search_terms", h.MaxSearchTerms) }},
	{"timeout", func(h *Handler) { orDefault(&h.Timeout, caddy.Duration(5*time.Second)) },
		func(h *Handler) error { return positive("timeout", h.Timeout) }},
	{"max_query_length", func(h *Handler) { orDefault(&h.MaxQueryLength, 16<<10) },
		func(h *Handler) error { return sizeUpTo("max_query_length", int64(h.MaxQueryLength), maxMessageSize) }},
	{"max_depth", func(h *Handler) { orDefault(&h.MaxDepth, 15) },
		func(h *Handler) error { return atLeastOne("max_depth", h.MaxDepth) }},
	{"max_cost", func(h *Handler) { orDefault(&h.MaxCost, 2000) },
		func(h *Handler) error { return countUpTo("max_cost", h.MaxCost, schema.MaxMaxCost) }},
	{"search_cost", func(h *Handler) { orDefault(&h.SearchCost, 500) },
		func(h *Handler) error { return countUpTo("search_cost", h.SearchCost, schema.MaxMaxCost) }},
	{"max_aliases", func(h *Handler) { orDefault(&h.MaxAliases, 30) },
		func(h *Handler) error { return atLeastOne("max_aliases", h.MaxAliases) }},
	{"max_root_fields", func(h *Handler) { orDefault(&h.MaxRootFields, 10) },
		func(h *Handler) error { return atLeastOne("max_root_fields", h.MaxRootFields) }},
	{"max_fields", func(h *Handler) { orDefault(&h.MaxFields, 500) },
		func(h *Handler) error { return atLeastOne("max_fields", h.MaxFields) }},
	{"max_response_size", func(h *Handler) { orDefault(&h.MaxResponseSize, 8<<20) },
		func(h *Handler) error { return sizeUpTo("max_response_size", h.MaxResponseSize, maxBodySize) }},
	{"document_cache_entries", func(h *Handler) { orDefault(&h.DocumentCacheEntries, 1000) },
		func(h *Handler) error { return atLeastOne("document_cache_entries", h.DocumentCacheEntries) }},
	{"document_cache_size", func(h *Handler) { orDefault(&h.DocumentCacheSize, 32<<20) },
		func(h *Handler) error { return sizeUpTo("document_cache_size", h.DocumentCacheSize, maxBodySize) }},
	{"ws_read_limit", func(h *Handler) { orDefault(&h.WSReadLimit, 32<<10) },
		func(h *Handler) error { return sizeUpTo("ws_read_limit", h.WSReadLimit, maxMessageSize) }},
	{"ws_init_timeout", func(h *Handler) { orDefault(&h.WSInitTimeout, caddy.Duration(3*time.Second)) },
		func(h *Handler) error { return positive("ws_init_timeout", h.WSInitTimeout) }},
	{"ws_keepalive", func(h *Handler) { orDefault(&h.WSKeepAlive, caddy.Duration(12*time.Second)) },
		func(h *Handler) error { return positive("ws_keepalive", h.WSKeepAlive) }},
	{"max_subscriptions", func(h *Handler) { orDefault(&h.MaxSubscriptions, 100) },
		func(h *Handler) error { return atLeastOne("max_subscriptions", h.MaxSubscriptions) }},
	{"max_connections", func(h *Handler) { orDefault(&h.MaxConnections, 10000) },
		func(h *Handler) error { return atLeastOne("max_connections", h.MaxConnections) }},
	// A tenth of max_connections, at most 100: no one client takes every connection.
	{"max_connections_per_user", func(h *Handler) { orDefault(&h.MaxConnectionsPerUser, min(100, max(1, h.MaxConnections/10))) },
		func(h *Handler) error { return atLeastOne("max_connections_per_user", h.MaxConnectionsPerUser) }},
	// At least max_response_size: a client whose budget one response exceeds would be cut off
	// by each, and an SSE client would resume from before it for ever.
	{"max_memory_per_client", func(h *Handler) { orDefault(&h.MaxMemoryPerClient, max(32<<20, h.MaxResponseSize)) },
		func(h *Handler) error {
			if h.MaxMemoryPerClient < h.MaxResponseSize {
				return fmt.Errorf("max_memory_per_client (%d bytes) must be at least max_response_size (%d bytes): a client past it loses the connection that holds the most, and one response would be too much", h.MaxMemoryPerClient, h.MaxResponseSize)
			}
			return sizeUpTo("max_memory_per_client", h.MaxMemoryPerClient, maxBodySize)
		}},
	{"max_distinct_subscriptions", func(h *Handler) { orDefault(&h.MaxDistinctSubscriptions, 1000) },
		func(h *Handler) error { return atLeastOne("max_distinct_subscriptions", h.MaxDistinctSubscriptions) }},
	{"max_distinct_subscriptions_per_client", func(h *Handler) {
		orDefault(&h.MaxDistinctSubscriptionsPerClient, max(1, h.MaxDistinctSubscriptions/10))
	}, func(h *Handler) error {
		return atLeastOne("max_distinct_subscriptions_per_client", h.MaxDistinctSubscriptionsPerClient)
	}},
	{"sse_max_duration", nil, func(h *Handler) error {
		if h.SSEMaxDuration < 0 {
			return fmt.Errorf("sse_max_duration must be 0 (none) or positive, not %s", time.Duration(h.SSEMaxDuration))
		}
		return nil
	}},
	{"health_path", nil, func(h *Handler) error { return servedPath("health_path", h.HealthPath, "/healthz") }},
	{"openapi_path", nil, func(h *Handler) error {
		if err := servedPath("openapi_path", h.OpenAPIPath, "/openapi.yaml"); err != nil || h.OpenAPIPath == "" {
			return err
		}
		if h.OpenAPIPath == h.HealthPath {
			return fmt.Errorf("openapi_path %q is health_path too; give each its own", h.OpenAPIPath)
		}
		return nil
	}},
	{"idempotency_ttl", func(h *Handler) { orDefault(&h.IdempotencyTTL, caddy.Duration(24*time.Hour)) }, checkIdempotencyTTL},
	{"events", fillEvents, checkEvents},
	{"events_poll_interval", func(h *Handler) { orDefault(&h.EventsPollInterval, caddy.Duration(events.DefaultPollInterval)) },
		func(h *Handler) error {
			return durationIn("events_poll_interval", h.EventsPollInterval, 10*time.Millisecond, 10*time.Second)
		}},
	{"events_ttl", func(h *Handler) { orDefault(&h.EventsTTL, caddy.Duration(events.DefaultTTL)) },
		func(h *Handler) error { return durationIn("events_ttl", h.EventsTTL, time.Minute, 720*time.Hour) }},
	{"events_max", func(h *Handler) { orDefault(&h.EventsMax, events.DefaultKeep) },
		func(h *Handler) error {
			if h.EventsMax < 1000 || h.EventsMax > 1_000_000_000 {
				return fmt.Errorf("events_max must be from 1000 to 1000000000, not %d", h.EventsMax)
			}
			return nil
		}},
	{"max_resume_events", func(h *Handler) { orDefault(&h.MaxResumeEvents, 100_000) },
		func(h *Handler) error { return atLeastOne("max_resume_events", h.MaxResumeEvents) }},
	{"mongodb_hole_wait", func(h *Handler) { orDefault(&h.MongoDBHoleWait, caddy.Duration(mongo.DefaultHoleWait)) },
		func(h *Handler) error {
			return durationIn("mongodb_hole_wait", h.MongoDBHoleWait, 100*time.Millisecond, time.Minute)
		}},
}

// fillDefaults gives every unset field that has a default its default.
func (h *Handler) fillDefaults() {
	for _, f := range configFields {
		if f.fill != nil {
			f.fill(h)
		}
	}
}

// checkField applies the rule of the field called name, if it has one.
func checkField(h *Handler, name string) error {
	for _, f := range configFields {
		if f.name == name && f.check != nil {
			return f.check(h)
		}
	}
	return nil
}

// orDefault sets *field to value when it is unset (zero).
func orDefault[T comparable](field *T, value T) {
	var zero T
	if *field == zero {
		*field = value
	}
}

// fillAlgorithms takes auth's list, which knows which algorithms are safe to accept.
func fillAlgorithms(h *Handler) {
	if len(h.Algorithms) == 0 {
		h.Algorithms = slices.Clone(auth.DefaultAlgorithms)
	}
}
