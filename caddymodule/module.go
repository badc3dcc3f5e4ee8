// Package caddymodule is the Caddy glue of caddy-posts: the http.handlers.posts module, its
// config, its Caddyfile directive, and the resources it shares across config reloads. The API
// itself lives in package handlers.
package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/handlers"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store"
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
)

// Handler serves a posts REST API (GET, POST /posts; GET, PATCH, DELETE /posts/{id}) from
// MongoDB. Requests for other paths go on to the next handler.
type Handler struct {
	// The MongoDB deployment to use, as a mongodb:// or mongodb+srv:// URI. Placeholders such
	// as {env.MONGODB_URI} are expanded. Default: none, which runs the embedded store
	// (FerretDB on SQLite, in-process, on a unix socket only) with its files in data_dir.
	MongoDBURI string `json:"mongodb_uri,omitempty"`

	// The database that holds the posts collection. Default: posts.
	Database string `json:"database,omitempty"`

	// Where the embedded store keeps its files; used only without mongodb_uri. Placeholders are
	// expanded. Default: the "posts" folder in Caddy's data directory.
	DataDir string `json:"data_dir,omitempty"`

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

	logger   *zap.Logger
	storeKey string
	api      *handlers.API
}

// APIKey is one accepted API key.
type APIKey struct {
	// The key in clear (placeholders such as {env.POSTS_API_KEY} are expanded), or
	// "sha256:" followed by the hex SHA-256 digest of the key, which keeps it out of the config.
	Key string `json:"key"`

	// The user the key authenticates: the userId of the posts written with it.
	UserID string `json:"user_id"`
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
	repl := caddy.NewReplacer()
	authn := &auth.Authenticator{APIKeyHeader: h.APIKeyHeader}
	for i, k := range h.APIKeys {
		key, err := auth.ParseAPIKey(repl.ReplaceKnown(k.Key, ""), repl.ReplaceKnown(k.UserID, ""))
		if err != nil {
			return fmt.Errorf("api_keys[%d]: %w", i, err)
		}
		authn.APIKeys = append(authn.APIKeys, key)
	}
	client, err := h.loadStore(repl.ReplaceKnown(h.MongoDBURI, ""), repl.ReplaceKnown(h.DataDir, ""))
	if err != nil {
		return err
	}
	h.api = handlers.New(handlers.Config{
		Posts:       posts.NewService(store.NewPosts(client, h.Database, time.Duration(h.Timeout)), h.MaxLimit),
		Auth:        authn,
		MaxBodySize: h.MaxBodySize,
		Logger:      h.logger,
		RequestID:   requestID,
	})
	return nil
}

// stores holds one store client per MongoDB URI or embedded data directory, shared by every
// config that names it, so a reload keeps its connections (and the embedded server) running.
var stores = caddy.NewUsagePool()

// pooledStore makes a store client a pool value.
type pooledStore struct{ *store.Client }

// Destruct closes the client when the last config that used it is cleaned up.
func (s pooledStore) Destruct() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.Close(ctx)
}

func (h *Handler) loadStore(uri, dataDir string) (*store.Client, error) {
	key := "mongodb " + uri
	construct := func() (caddy.Destructor, error) {
		h.logger.Info("using MongoDB", zap.String("hosts", store.Redact(uri)), zap.String("database", h.Database))
		c, err := store.Connect(uri)
		return pooledStore{c}, err
	}
	if uri == "" {
		if dataDir == "" {
			dataDir = filepath.Join(caddy.AppDataDir(), "posts")
		}
		dataDir, err := filepath.Abs(dataDir)
		if err != nil {
			return nil, fmt.Errorf("data_dir: %w", err)
		}
		key = "embedded " + dataDir
		construct = func() (caddy.Destructor, error) {
			h.logger.Info("using the embedded store (FerretDB on SQLite); it starts on first use",
				zap.String("data_dir", dataDir), zap.String("database", h.Database))
			return pooledStore{store.Embedded(dataDir, h.logger.Named("store"))}, nil
		}
	}
	val, _, err := stores.LoadOrNew(key, construct)
	if err != nil {
		return nil, err
	}
	h.storeKey = key
	return val.(pooledStore).Client, nil
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
	if err := validDatabase(h.Database); err != nil {
		errs = append(errs, fmt.Errorf("database: %w", err))
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

// Cleanup releases this config's hold on the store.
func (h *Handler) Cleanup() error {
	if h.storeKey == "" {
		return nil
	}
	_, err := stores.Delete(h.storeKey)
	return err
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

// requestID is Caddy's id of the request, as in its access log.
func requestID(r *http.Request) string {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return ""
	}
	id, _ := repl.GetString("http.request.uuid")
	return id
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
