package caddymodule

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/handlers"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// Provision fills in the defaults and loads the store, which connects on first use: provisioning
// (and so `caddy validate`) never needs a reachable database.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	repl := caddy.NewReplacer()
	uri := repl.ReplaceKnown(h.MongoDBURI, "")
	if uri == "" && h.MongoDBURI != "" {
		// Serving the embedded store instead would hide a deployment's missing variable.
		return fmt.Errorf("mongodb_uri %q expands to nothing: is its environment variable set? (omit mongodb_uri for the embedded store)", h.MongoDBURI)
	}
	// Before the defaults fill synchronous in.
	if uri != "" && h.Synchronous != "" {
		return errors.New("synchronous applies to the embedded store; with mongodb_uri, set the URI's w and journal options")
	}
	if uri != "" && h.PostCacheSize != 0 {
		return errors.New("post_cache_size applies to the embedded store; with mongodb_uri, posts are read from the database each time")
	}
	// Before the defaults too: a data_dir that expands to nothing takes the default.
	h.DataDir = repl.ReplaceKnown(h.DataDir, "")
	h.fillDefaults()
	if err := checkField(h, "events"); err != nil { // before a follower relays on a store that has none
		return err
	}
	authn, err := h.authenticator(repl)
	if err != nil {
		return err
	}
	pooled, err := h.loadStore(ctx, uri)
	if err != nil {
		return err
	}
	if err := metrics.Register(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	keys, err := h.idempotencyKeys(pooled)
	if err != nil {
		return err
	}
	// Observed inside the breaker: the metrics of the store count the calls that reached it.
	st := pooled.breaker.Guard(observeStore(pooled.Store, pooled.backend))
	// Every config on the same store shares one broker, so a write through one site reaches
	// the subscribers of the others, and a reload keeps it.
	h.eventsKey = "events " + h.storeKey
	broker, _, _ := brokers.LoadOrNew(h.eventsKey, func() (caddy.Destructor, error) {
		return pooledBroker{events.NewBroker[*posts.Event](EventQueue)}, nil
	})
	// Through the store itself, outside the breaker: its errors have metrics of their own
	// (relay_errors_total).
	app, err := ctx.App(AppName)
	if err != nil {
		return err
	}
	follower, err := h.loadFollower(app.(*App), pooled.Store, broker.(pooledBroker).Broker)
	if err != nil {
		return err
	}
	var relayHealth handlers.RelayHealth
	if h.Events == EventsRelay {
		relayHealth = follower
	}
	svc := posts.NewService(posts.Config{
		Store:                    st,
		Timeout:                  time.Duration(h.Timeout),
		MaxLimit:                 h.MaxLimit,
		MaxSearchTerms:           h.MaxSearchTerms,
		Logger:                   h.logger,
		Events:                   broker.(pooledBroker).Broker,
		Follower:                 follower,
		SubscriptionsRequireAuth: h.SubscriptionsRequireAuth,
		Keys:                     keys,
		KeyTTL:                   time.Duration(h.IdempotencyTTL),
	})
	manifest, persisted, err := h.persistedQueries(repl)
	if err != nil {
		return err
	}
	graph, err := schema.New(svc, h.logger, h.GraphQLLimits(), persisted...)
	if err != nil {
		if manifest != "" { // a persisted operation the limits refuse
			err = fmt.Errorf("persisted_queries %q: %w", manifest, err)
		}
		return fmt.Errorf("graphql schema: %w", err)
	}
	hub, err := h.loadHub(ctx, authn, repl)
	if err != nil {
		return err
	}
	h.api = handlers.New(handlers.Config{
		Posts:           svc,
		GraphQL:         graph,
		Subscriptions:   h.WebSocketConfig(),
		Auth:            authn,
		MaxBodySize:     h.MaxBodySize,
		MaxResponseSize: h.MaxResponseSize,
		ClientIP:        clientIP,
		Logger:          h.logger,
		RequestID:       requestID,
		Identified:      setUserPlaceholders,
		AccessLog:       accessLogField,
		HealthPath:      h.HealthPath,
		Relay:           relayHealth,
		OpenAPIPath:     h.OpenAPIPath,
		Hub:             hub,
		Exiting:         caddy.Exiting,
	})
	// The open connections apply this config from now on; if it fails to start, Cleanup hands
	// them back to the config before.
	hub.Register(h.api.LiveConfig())
	return nil
}

// Defaults returns the config with every default of the table filled in, as Provision fills
// it; benchmarks build the API's parts from it as Provision does.
func Defaults() Handler {
	var h Handler
	h.fillDefaults()
	return h
}

// GraphQLLimits are the limits of the config that package schema applies.
func (h *Handler) GraphQLLimits() schema.Limits {
	return schema.Limits{
		MaxQueryLength:       h.MaxQueryLength,
		MaxDepth:             h.MaxDepth,
		MaxCost:              h.MaxCost,
		SearchCost:           h.SearchCost,
		DisableIntrospection: h.DisableIntrospection,
		MaxAliases:           h.MaxAliases,
		MaxRootFields:        h.MaxRootFields,
		MaxFields:            h.MaxFields,
		MaxResponseSize:      h.MaxResponseSize,
		MaxFeeds:             h.MaxDistinctSubscriptions,
		MaxFeedsPerClient:    h.MaxDistinctSubscriptionsPerClient,
		MaxResume:            int64(h.MaxResumeEvents),
		DocumentCacheEntries: h.DocumentCacheEntries,
		DocumentCacheSize:    h.DocumentCacheSize,
		PersistedOnly:        h.PersistedQueriesOnly,
	}
}

// persistedQueries reads the manifest of persisted_queries, if there is one: its path, expanded,
// and its operations.
func (h *Handler) persistedQueries(repl *caddy.Replacer) (string, []schema.PersistedQuery, error) {
	path := repl.ReplaceKnown(h.PersistedQueries, "")
	switch {
	case path == "" && h.PersistedQueriesOnly:
		return "", nil, errors.New("persisted_queries_only refuses every operation that is not in persisted_queries, which names no manifest")
	case path == "":
		return "", nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("persisted_queries: %w", err)
	}
	ops, err := schema.ParseManifest(data)
	if err != nil {
		return "", nil, fmt.Errorf("persisted_queries %q: %w", path, err)
	}
	return path, ops, nil
}

// WebSocketConfig is the part of the config that GraphQL over WebSocket applies.
func (h *Handler) WebSocketConfig() live.Subscriptions {
	return live.Subscriptions{
		OriginPatterns:   h.AllowedOrigins,
		ReadLimit:        h.WSReadLimit,
		InitTimeout:      time.Duration(h.WSInitTimeout),
		KeepAlive:        time.Duration(h.WSKeepAlive),
		MaxSubscriptions: h.MaxSubscriptions,
		// As many as a feed may have waiting: the relay hands a subscriber what one read found at
		// once, and a client that reads as fast as the events come must not be closed for the
		// burst. The events queued share their bytes with every other listener of their feed.
		SendQueue:             EventQueue,
		MaxConnectionsPerUser: h.MaxConnectionsPerUser,
		MaxMemoryPerClient:    h.MaxMemoryPerClient,
		MaxConnections:        h.MaxConnections,
		SSEMaxDuration:        time.Duration(h.SSEMaxDuration),
	}
}

// authenticator builds the credential checks: API keys, bearer tokens against the pooled key
// sets, and the user of an earlier Caddy handler.
func (h *Handler) authenticator(repl *caddy.Replacer) (*auth.Authenticator, error) {
	// Validate runs after Provision, too late: auth.NewTokens would refuse a bad one first,
	// without naming the field.
	if err := checkAlgorithms(h); err != nil {
		return nil, err
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
