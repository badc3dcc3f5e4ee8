// Package caddymodule is the Caddy glue of caddy-posts: the http.handlers.posts module, its
// config, its Caddyfile directive, and the resources it shares across config reloads. The API
// itself lives in package handlers.
package caddymodule

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/handlers"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Defaults of the config fields.
const (
	DefaultDatabase     = "posts"
	DefaultAPIKeyHeader = "X-API-Key"
	DefaultMaxBodySize  = 1 << 20
	DefaultMaxLimit     = 100
	DefaultTimeout      = caddy.Duration(5 * time.Second)
	DefaultUserClaim    = "sub"
	DefaultNameClaim    = "name"
	DefaultEmailClaim   = "email"
	DefaultLeeway       = caddy.Duration(30 * time.Second)
	DefaultJWKSRefresh  = caddy.Duration(time.Hour)
)

// The values of Synchronous.
const (
	SyncNormal = "normal"
	SyncFull   = "full"
)

// Bounds of the config fields.
const (
	MaxLeeway      = caddy.Duration(5 * time.Minute)
	MinJWKSRefresh = caddy.Duration(time.Second)
)

// Handler serves a posts REST API (GET, POST /posts; GET, PATCH, DELETE /posts/{id}) from
// MongoDB. Requests for other paths go on to the next handler.
type Handler struct {
	// The MongoDB deployment to use, as a mongodb:// or mongodb+srv:// URI. Placeholders such
	// as {env.MONGODB_URI} are expanded. Default: none, which keeps the posts in the embedded
	// store: the SQLite file posts.db in data_dir.
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

	// URLs of the JSON Web Key Sets whose keys sign the accepted bearer tokens, such as
	// https://{tenant}.auth0.com/.well-known/jwks.json; a key from any of them is accepted. The
	// sets are fetched in the background and refreshed every jwks_refresh. Placeholders are
	// expanded. Default: none, and bearer tokens are refused.
	JWKSURLs []string `json:"jwks_urls,omitempty"`

	// The accepted values of a token's iss claim; when set, the claim must be one of them.
	// Default: any issuer.
	Issuers []string `json:"issuers,omitempty"`

	// The accepted values of a token's aud claim; when set, the claim must hold one of them.
	// Default: any audience.
	Audiences []string `json:"audiences,omitempty"`

	// The accepted signing algorithms. "none" and the HMAC algorithms are never accepted.
	// Default: RS256 RS384 RS512 PS256 ES256 ES384 EdDSA.
	Algorithms []string `json:"algorithms,omitempty"`

	// The token claim that holds the user id. Default: sub.
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

	// The request header that carries an API key. Default: X-API-Key.
	APIKeyHeader string `json:"api_key_header,omitempty"`

	// The largest request body accepted, in bytes; larger ones get 413. Default: 1 MiB.
	MaxBodySize int64 `json:"max_body_size,omitempty"`

	// The largest page of posts a client may ask for with ?limit. Default: 100.
	MaxLimit int `json:"max_limit,omitempty"`

	// The deadline of each storage operation; past it the client gets 503. Default: 5s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// The longest GraphQL query document accepted, in bytes. Default: 16 KiB.
	MaxQueryLength int `json:"max_query_length,omitempty"`

	// The deepest nesting of fields a GraphQL operation may have. Default: 15 (the standard
	// introspection query of graphql-js reaches 13).
	MaxDepth int `json:"max_depth,omitempty"`

	// The most values a GraphQL operation may return, counted before it runs: each object
	// (post, user, edge, page info) and each of its fields, with every list as long as its limit
	// or first argument (or its default) lets it be. At most 2^30. Default: 2000.
	MaxCost int `json:"max_cost,omitempty"`

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

	// The largest response body, in bytes. A GraphQL operation whose result would grow past it
	// stops and answers RESPONSE_TOO_LARGE; a REST page of posts ends early, its Link pointing
	// at the rest. Default: 8 MiB.
	MaxResponseSize int64 `json:"max_response_size,omitempty"`

	// Refuse GraphQL introspection (__schema and __type); __typename still works. Default: false.
	DisableIntrospection bool `json:"disable_introspection,omitempty"`

	// Refuse WebSocket connections without credentials. Default: false (anyone may subscribe
	// to the public events of posts).
	SubscriptionsRequireAuth bool `json:"subscriptions_require_auth,omitempty"`

	// The origins besides the site's own that browsers may open WebSockets from: host patterns
	// such as app.example.com or *.example.com, or scheme://host. A client that sends no Origin
	// is not a browser and is let in. Default: the site's own origin only.
	AllowedOrigins []string `json:"allowed_origins,omitempty"`

	// The largest WebSocket message a client may send, in bytes; larger closes with 1009.
	// Default: 32 KiB.
	WSReadLimit int64 `json:"ws_read_limit,omitempty"`

	// How long a WebSocket client has to send connection_init; then 4408. Default: 3s.
	WSInitTimeout caddy.Duration `json:"ws_init_timeout,omitempty"`

	// How often the server pings a WebSocket client; one that does not answer in that time is
	// closed. Default: 12s.
	WSKeepAlive caddy.Duration `json:"ws_keepalive,omitempty"`

	// How many operations one WebSocket connection may run at once. Default: 100.
	MaxSubscriptions int `json:"max_subscriptions,omitempty"`

	// How many WebSocket connections one user may hold, anonymous connections counted by
	// client IP (as Caddy finds it, trusted_proxies honoured). Default: 100, or a tenth of
	// max_connections if that is less.
	MaxConnectionsPerUser int `json:"max_connections_per_user,omitempty"`

	// How many WebSocket connections this handler may hold at once; more get 503. Default: 10000.
	MaxConnections int `json:"max_connections,omitempty"`

	// How many distinct subscription operations may run at once on the server (subscribers of the
	// same document, operation name and variables share one). Default: 1000.
	MaxDistinctSubscriptions int `json:"max_distinct_subscriptions,omitempty"`

	// How many of those one client (a user, or an anonymous client by its IP) may take part in at
	// once; more get TOO_MANY_SUBSCRIPTIONS. Default: a tenth of max_distinct_subscriptions.
	MaxDistinctSubscriptionsPerClient int `json:"max_distinct_subscriptions_per_client,omitempty"`

	logger    *zap.Logger
	storeKey  string
	eventsKey string
	jwksKeys  []string
	api       *handlers.API
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

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.posts",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision fills in the defaults and loads the store, which connects on first use: provisioning
// (and so `caddy validate`) never needs a reachable database.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if h.Database == "" {
		h.Database = DefaultDatabase
	}
	if h.APIKeyHeader == "" {
		h.APIKeyHeader = DefaultAPIKeyHeader
	}
	if h.MaxBodySize == 0 {
		h.MaxBodySize = DefaultMaxBodySize
	}
	if h.MaxLimit == 0 {
		h.MaxLimit = DefaultMaxLimit
	}
	if h.Timeout == 0 {
		h.Timeout = DefaultTimeout
	}
	if len(h.Algorithms) == 0 {
		h.Algorithms = auth.DefaultAlgorithms
	}
	if h.UserClaim == "" {
		h.UserClaim = DefaultUserClaim
	}
	if h.NameClaim == "" {
		h.NameClaim = DefaultNameClaim
	}
	if h.EmailClaim == "" {
		h.EmailClaim = DefaultEmailClaim
	}
	if h.Leeway == nil {
		leeway := DefaultLeeway
		h.Leeway = &leeway
	}
	if h.JWKSRefresh == 0 {
		h.JWKSRefresh = DefaultJWKSRefresh
	}
	repl := caddy.NewReplacer()
	authn, err := h.authenticator(repl)
	if err != nil {
		return err
	}
	uri := repl.ReplaceKnown(h.MongoDBURI, "")
	if uri != "" && h.Synchronous != "" {
		return errors.New("synchronous applies to the embedded store; with mongodb_uri, set the URI's w and journal options")
	}
	st, err := h.loadStore(ctx, uri, repl.ReplaceKnown(h.DataDir, ""))
	if err != nil {
		return err
	}
	// Every config on the same store shares one broker, so a write through one site reaches
	// the subscribers of the others, and a reload keeps it.
	h.eventsKey = "events " + h.storeKey
	broker, _, _ := brokers.LoadOrNew(h.eventsKey, func() (caddy.Destructor, error) {
		return pooledBroker{events.NewBroker[posts.Event](EventQueue)}, nil
	})
	svc := posts.NewService(posts.Config{
		Store:    st,
		Timeout:  time.Duration(h.Timeout),
		MaxLimit: h.MaxLimit,
		Logger:   h.logger,
		Events:   broker.(pooledBroker).Broker,
	})
	graph, err := schema.New(svc, h.logger, schema.Limits{
		MaxQueryLength:       h.MaxQueryLength,
		MaxDepth:             h.MaxDepth,
		MaxCost:              h.MaxCost,
		DisableIntrospection: h.DisableIntrospection,
		MaxAliases:           h.MaxAliases,
		MaxRootFields:        h.MaxRootFields,
		MaxFields:            h.MaxFields,
		MaxResponseSize:      h.MaxResponseSize,
		MaxFeeds:             h.MaxDistinctSubscriptions,
		MaxFeedsPerClient:    h.MaxDistinctSubscriptionsPerClient,
	})
	if err != nil {
		return fmt.Errorf("graphql schema: %w", err)
	}
	h.api = handlers.New(handlers.Config{
		Posts:   svc,
		GraphQL: graph,
		Subscriptions: handlers.Subscriptions{
			RequireAuth:           h.SubscriptionsRequireAuth,
			OriginPatterns:        h.AllowedOrigins,
			ReadLimit:             h.WSReadLimit,
			InitTimeout:           time.Duration(h.WSInitTimeout),
			KeepAlive:             time.Duration(h.WSKeepAlive),
			MaxSubscriptions:      h.MaxSubscriptions,
			MaxConnectionsPerUser: h.MaxConnectionsPerUser,
			MaxConnections:        h.MaxConnections,
		},
		Auth:            authn,
		MaxBodySize:     h.MaxBodySize,
		MaxResponseSize: h.MaxResponseSize,
		ClientIP:        clientIP,
		Logger:          h.logger,
		RequestID:       requestID,
		Identified:      setUserPlaceholders,
	})
	return nil
}

// authenticator builds the credential checks: API keys, bearer tokens against the pooled key
// sets, and the user of an earlier Caddy handler.
func (h *Handler) authenticator(repl *caddy.Replacer) (*auth.Authenticator, error) {
	for _, alg := range h.Algorithms {
		if err := auth.ValidAlgorithm(alg); err != nil {
			return nil, fmt.Errorf("algorithms: %w", err)
		}
	}
	authn := &auth.Authenticator{APIKeyHeader: http.CanonicalHeaderKey(h.APIKeyHeader)} // no copy per request
	for i, k := range h.APIKeys {
		key, err := auth.ParseAPIKey(repl.ReplaceKnown(k.Key, ""), repl.ReplaceKnown(k.UserID, ""))
		if err != nil {
			return nil, fmt.Errorf("api_keys[%d]: %w", i, err)
		}
		key.Name, key.Email = repl.ReplaceKnown(k.Name, ""), repl.ReplaceKnown(k.Email, "")
		authn.APIKeys = append(authn.APIKeys, key)
	}
	if h.TrustCaddyAuth {
		authn.Upstream = caddyUser
	}
	if len(h.JWKSURLs) == 0 {
		if len(h.Issuers)+len(h.Audiences) > 0 {
			return nil, errors.New("issuers and audiences apply to bearer tokens, which need jwks_urls")
		}
		return authn, nil
	}
	var sets []*auth.JWKS
	for i, u := range h.JWKSURLs {
		u = repl.ReplaceKnown(u, "")
		if err := h.checkJWKSURL(u); err != nil {
			return nil, fmt.Errorf("jwks_urls[%d]: %w", i, err)
		}
		set, err := h.loadJWKS(u)
		if err != nil {
			return nil, err
		}
		sets = append(sets, set)
	}
	tokens, err := auth.NewTokens(auth.TokenConfig{
		Keys:       sets,
		Issuers:    replaceAll(repl, h.Issuers),
		Audiences:  replaceAll(repl, h.Audiences),
		Algorithms: h.Algorithms,
		UserClaim:  h.UserClaim,
		NameClaim:  h.NameClaim,
		EmailClaim: h.EmailClaim,
		Leeway:     time.Duration(*h.Leeway),
		Timeout:    time.Duration(h.Timeout),
	})
	if err != nil {
		return nil, err
	}
	authn.Tokens = tokens
	return authn, nil
}

func replaceAll(repl *caddy.Replacer, values []string) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = repl.ReplaceKnown(v, "")
	}
	return out
}

// checkJWKSURL accepts http and https URLs. Plain http lets anyone on the path swap the keys, so
// it draws a warning unless the host is a loopback address.
func (h *Handler) checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q is not an http or https URL", raw)
	}
	if ip := net.ParseIP(u.Hostname()); u.Scheme == "http" && u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		h.logger.Warn("the JWKS is fetched over plain http, where anyone on the path could replace its keys; use https",
			zap.String("url", raw))
	}
	return nil
}

// jwksPool holds one key set per URL and refresh interval, shared by every config that names it,
// so a reload keeps the keys it has and does not fetch them again.
var jwksPool = caddy.NewUsagePool()

// pooledJWKS makes a key set a pool value.
type pooledJWKS struct{ *auth.JWKS }

// Destruct stops the key set's background fetches when the last config that used it is cleaned up.
func (s pooledJWKS) Destruct() error {
	s.Close()
	return nil
}

func (h *Handler) loadJWKS(u string) (*auth.JWKS, error) {
	refresh := time.Duration(h.JWKSRefresh)
	key := fmt.Sprintf("jwks %s every %s", u, refresh)
	val, _, err := jwksPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		return pooledJWKS{auth.NewJWKS(u, refresh, nil, h.logger.Named("jwks"))}, nil
	})
	if err != nil {
		return nil, err
	}
	h.jwksKeys = append(h.jwksKeys, key)
	return val.(pooledJWKS).JWKS, nil
}

// stores holds the stores, one per MongoDB URI and database or per embedded data directory,
// shared by every config that names it, so that a reload keeps its connections and the
// embedded store's file open.
var stores = caddy.NewUsagePool()

// brokers holds the event brokers, one per store.
var brokers = caddy.NewUsagePool()

// EventQueue is how many events a subscription may have waiting before it is dropped as too slow.
const EventQueue = 256

// pooledBroker makes a broker a pool value.
type pooledBroker struct{ *events.Broker[posts.Event] }

// Destruct ends the broker's subscriptions when the last config that used it is cleaned up.
func (b pooledBroker) Destruct() error {
	b.Close()
	return nil
}

// pooledStore makes a store a pool value.
type pooledStore struct{ store.Store }

// Destruct closes the store when the last config that used it is cleaned up.
func (s pooledStore) Destruct() error { return s.Close() }

// loadStore returns the pooled store the config names. It does no I/O: the MongoDB driver
// connects on first use, and the app opens an embedded store when the config starts.
func (h *Handler) loadStore(ctx caddy.Context, uri, dataDir string) (store.Store, error) {
	key := "mongodb " + uri + " " + h.Database
	construct := func() (caddy.Destructor, error) {
		h.logger.Info("using MongoDB", zap.String("hosts", mongo.Redact(uri)), zap.String("database", h.Database))
		s, err := mongo.Open(uri, h.Database)
		return pooledStore{s}, err
	}
	if uri == "" {
		if dataDir == "" {
			dataDir = filepath.Join(caddy.AppDataDir(), "posts")
		}
		dataDir, err := filepath.Abs(dataDir)
		if err != nil {
			return nil, fmt.Errorf("data_dir: %w", err)
		}
		key = "sqlite " + dataDir
		construct = func() (caddy.Destructor, error) {
			h.logger.Info("using the embedded store; it opens when the config starts",
				zap.String("file", filepath.Join(dataDir, sqlite.DatabaseFile)))
			return pooledStore{sqlite.New(dataDir, sqlite.Options{Logger: h.logger.Named("store")})}, nil
		}
	}
	val, _, err := stores.LoadOrNew(key, construct)
	if err != nil {
		return nil, err
	}
	h.storeKey = key
	st := val.(pooledStore).Store
	if embedded, ok := st.(*sqlite.Store); ok {
		app, err := ctx.App(AppName)
		if err != nil {
			return nil, err
		}
		if err := app.(*App).open(embedded, h.Synchronous == SyncFull); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// Validate checks the config after Provision.
func (h *Handler) Validate() error {
	var errs []error
	if h.MaxBodySize < 1 {
		errs = append(errs, errors.New("max_body_size must be at least 1 byte"))
	}
	if h.MaxLimit < 1 {
		errs = append(errs, errors.New("max_limit must be at least 1"))
	}
	if h.Timeout <= 0 {
		errs = append(errs, errors.New("timeout must be positive"))
	}
	for name, n := range map[string]int{
		"max_query_length": h.MaxQueryLength, "max_depth": h.MaxDepth, "max_cost": h.MaxCost,
		"max_aliases": h.MaxAliases, "max_root_fields": h.MaxRootFields, "max_fields": h.MaxFields,
		"max_distinct_subscriptions": h.MaxDistinctSubscriptions, "max_distinct_subscriptions_per_client": h.MaxDistinctSubscriptionsPerClient,
	} {
		if n < 0 { // 0 is the default, which schema.New fills in
			errs = append(errs, fmt.Errorf("%s must be at least 1", name))
		}
	}
	for name, n := range map[string]int64{
		"ws_read_limit": h.WSReadLimit, "ws_init_timeout": int64(h.WSInitTimeout), "ws_keepalive": int64(h.WSKeepAlive),
		"max_subscriptions": int64(h.MaxSubscriptions), "max_connections_per_user": int64(h.MaxConnectionsPerUser),
		"max_connections": int64(h.MaxConnections), "max_response_size": h.MaxResponseSize,
	} {
		if n < 0 {
			errs = append(errs, fmt.Errorf("%s cannot be negative", name))
		}
	}
	if h.MaxCost > schema.MaxMaxCost {
		errs = append(errs, fmt.Errorf("max_cost must be at most %d", schema.MaxMaxCost))
	}
	if err := validDatabase(h.Database); err != nil {
		errs = append(errs, fmt.Errorf("database: %w", err))
	}
	if h.Synchronous != "" && h.Synchronous != SyncNormal && h.Synchronous != SyncFull {
		errs = append(errs, fmt.Errorf("synchronous must be %s or %s, not %q", SyncNormal, SyncFull, h.Synchronous))
	}
	if *h.Leeway < 0 || *h.Leeway > MaxLeeway {
		errs = append(errs, fmt.Errorf("leeway must be from 0 to %s", time.Duration(MaxLeeway)))
	}
	if h.JWKSRefresh < MinJWKSRefresh {
		errs = append(errs, fmt.Errorf("jwks_refresh must be at least %s", time.Duration(MinJWKSRefresh)))
	}
	return errors.Join(errs...)
}

// validDatabase checks a name against MongoDB's rules for database names.
func validDatabase(name string) error {
	if name == "" || len(name) > 63 || strings.ContainsAny(name, "/\\. \"$\x00") {
		return fmt.Errorf(`%q is not a MongoDB database name (1 to 63 characters, none of /\. "$)`, name)
	}
	return nil
}

// Cleanup releases this config's hold on the store and the key sets.
func (h *Handler) Cleanup() error {
	var errs []error
	if h.api != nil {
		h.api.Close() // WebSocket clients reconnect, to the next config if there is one
	}
	if h.eventsKey != "" {
		_, err := brokers.Delete(h.eventsKey)
		errs = append(errs, err)
	}
	for _, key := range h.jwksKeys {
		_, err := jwksPool.Delete(key)
		errs = append(errs, err)
	}
	if h.storeKey != "" {
		_, err := stores.Delete(h.storeKey)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ServeHTTP serves the API's paths and passes every other request to next.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	route := h.api.Route(r)
	if route == nil {
		return next.ServeHTTP(w, r)
	}
	route.ServeHTTP(w, r)
	return nil
}

// placeholder is the value of one of Caddy's placeholders for r, or "".
func placeholder(r *http.Request, name string) string {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return ""
	}
	value, _ := repl.GetString(name)
	return value
}

// clientIP is the client's address as Caddy found it: the peer's, or with trusted_proxies the
// one the proxies name.
func clientIP(r *http.Request) string {
	ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	return ip // "" outside Caddy's server: the API then counts by the peer's address
}

// requestID is Caddy's id of the request, as in its access log.
func requestID(r *http.Request) string { return placeholder(r, "http.request.uuid") }

// userPlaceholder prefixes the placeholders of the caller, as Caddy's authentication handler names them.
const userPlaceholder = "http.auth.user."

// caddyUser is the user an earlier Caddy authentication handler left in {http.auth.user.id}.
func caddyUser(r *http.Request) string { return placeholder(r, userPlaceholder+"id") }

// setUserPlaceholders puts the caller into {http.auth.user.id} (which the access log records as
// user_id), its token's claims into {http.auth.user.<claim>}, and an API key's profile into
// {http.auth.user.name} and {http.auth.user.email}.
func setUserPlaceholders(r *http.Request, caller auth.Identity) {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return
	}
	for claim, value := range caller.Claims {
		repl.Set(userPlaceholder+claim, value)
	}
	if caller.Claims == nil {
		if caller.Name != "" {
			repl.Set(userPlaceholder+"name", caller.Name)
		}
		if caller.Email != "" {
			repl.Set(userPlaceholder+"email", caller.Email)
		}
	}
	repl.Set(userPlaceholder+"id", caller.UserID)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
