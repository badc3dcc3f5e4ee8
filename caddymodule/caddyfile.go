package caddymodule

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/postsedge/caddy-posts/auth"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("posts", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("posts", httpcaddyfile.Before, "respond")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	handler := new(Handler)
	err := handler.UnmarshalCaddyfile(h.Dispenser)
	return handler, err
}

// arity is the least and the most arguments a subdirective takes; many means no most.
type arity struct{ least, most int }

const many = -1

// subdirectives are the arities of the subdirectives.
var subdirectives = map[string]arity{
	"mongodb_uri": {1, 1}, "database": {1, 1}, "data_dir": {1, 1}, "synchronous": {1, 1}, "post_cache_size": {1, 1},
	"jwks_url": {1, many}, "issuer": {1, many}, "audience": {1, many}, "algorithms": {1, many},
	"user_claim": {1, 1}, "name_claim": {1, 1}, "email_claim": {1, 1},
	"leeway": {1, 1}, "jwks_refresh": {1, 1}, "trust_caddy_auth": {0, 0},
	"api_key": {2, 2}, "api_key_header": {1, 1},
	"max_body_size": {1, 1}, "max_limit": {1, 1}, "max_search_terms": {1, 1}, "timeout": {1, 1},
	"max_query_length": {1, 1}, "max_depth": {1, 1}, "max_cost": {1, 1}, "search_cost": {1, 1}, "introspection": {1, 1},
	"max_aliases": {1, 1}, "max_root_fields": {1, 1}, "max_fields": {1, 1}, "max_response_size": {1, 1}, "max_memory_per_client": {1, 1},
	"max_distinct_subscriptions": {1, 1}, "max_distinct_subscriptions_per_client": {1, 1},
	"subscriptions_require_auth": {0, 0}, "allowed_origins": {1, many}, "ws_read_limit": {1, 1},
	"ws_init_timeout": {1, 1}, "ws_keepalive": {1, 1}, "max_subscriptions": {1, 1}, "max_connections_per_user": {1, 1},
	"max_connections": {1, 1}, "document_cache_entries": {1, 1}, "document_cache_size": {1, 1},
	"persisted_queries": {1, 1}, "persisted_queries_only": {0, 0}, "health_path": {1, 1}, "openapi_path": {1, 1},
	"idempotency_ttl": {1, 1}, "events": {1, 1}, "events_poll_interval": {1, 1}, "events_ttl": {1, 1}, "mongodb_hole_wait": {1, 1},
	"events_max": {1, 1}, "max_resume_events": {1, 1}, "sse_max_duration": {1, 1},
}

// repeatable are the subdirectives that may be given more than once; their arguments add up.
var repeatable = map[string]bool{"jwks_url": true, "issuer": true, "audience": true, "api_key": true, "allowed_origins": true}

func (a arity) allows(n int) bool { return n >= a.least && (a.most == many || n <= a.most) }

func (a arity) String() string {
	switch {
	case a.least == a.most:
		return fmt.Sprintf("%d argument(s)", a.least)
	case a.most == many:
		return fmt.Sprintf("at least %d argument(s)", a.least)
	}
	return fmt.Sprintf("%d to %d arguments", a.least, a.most)
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	posts [<matcher>] {
//	    mongodb_uri      <uri>
//	    database         <name>
//	    data_dir         <path>
//	    synchronous      normal|full
//	    post_cache_size  <size>
//	    jwks_url         <url...>
//	    issuer           <iss...>
//	    audience         <aud...>
//	    algorithms       <alg...>
//	    user_claim       <claim>
//	    name_claim       <claim>
//	    email_claim      <claim>
//	    leeway           <duration>
//	    jwks_refresh     <duration>
//	    trust_caddy_auth
//	    api_key          <key>|sha256:<hex> <user-id> {
//	        name  <name>
//	        email <email>
//	    }
//	    api_key_header   <name>
//	    max_body_size    <size>
//	    max_limit        <n>
//	    max_search_terms <n>
//	    timeout          <duration>
//	    max_query_length <size>
//	    max_depth        <n>
//	    max_cost         <n>
//	    search_cost      <n>
//	    max_aliases      <n>
//	    max_root_fields  <n>
//	    max_fields       <n>
//	    max_response_size <size>
//	    introspection    on|off
//	    document_cache_entries <n>
//	    document_cache_size <size>
//	    persisted_queries <manifest.json>
//	    persisted_queries_only
//	    subscriptions_require_auth
//	    allowed_origins  <pattern...>
//	    ws_read_limit    <size>
//	    ws_init_timeout  <duration>
//	    ws_keepalive     <duration>
//	    max_subscriptions <n>
//	    max_connections  <n>
//	    max_connections_per_user <n>
//	    max_memory_per_client <size>
//	    max_distinct_subscriptions <n>
//	    max_distinct_subscriptions_per_client <n>
//	    sse_max_duration <duration>
//	    health_path      <path>
//	    openapi_path     <path>
//	    idempotency_ttl  <duration>
//	    events           local|relay
//	    events_poll_interval <duration>
//	    events_ttl       <duration>
//	    events_max       <n>
//	    max_resume_events <n>
//	    mongodb_hole_wait <duration>
//	}
//
// Every subdirective is optional. jwks_url, issuer, audience, api_key and allowed_origins may be
// repeated; the others may not. The block of api_key is optional.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	if d.NextArg() {
		return d.Errf("posts takes no arguments, only a block of subdirectives; got %q", d.Val())
	}
	seen := map[string]bool{}
	var eventsLine *caddyfile.Dispenser
	for d.NextBlock(0) {
		name := d.Val()
		want, known := subdirectives[name]
		switch {
		case !known:
			return d.Errf("unrecognized subdirective %q", name)
		case seen[name] && !repeatable[name]:
			return d.Errf("%s is given more than once", name)
		}
		seen[name] = true
		args := d.RemainingArgs()
		if !want.allows(len(args)) {
			return d.Errf("%s takes %s, got %d", name, want, len(args))
		}
		var arg string
		if len(args) > 0 {
			arg = args[0]
		}
		switch name {
		case "mongodb_uri":
			h.MongoDBURI = arg
		case "database":
			h.Database = arg
		case "data_dir":
			h.DataDir = arg
		case "synchronous":
			h.Synchronous = arg
		case "jwks_url":
			h.JWKSURLs = append(h.JWKSURLs, args...)
		case "issuer":
			h.Issuers = append(h.Issuers, args...)
		case "audience":
			h.Audiences = append(h.Audiences, args...)
		case "algorithms":
			h.Algorithms = args
		case "user_claim":
			h.UserClaim = arg
		case "name_claim":
			h.NameClaim = arg
		case "email_claim":
			h.EmailClaim = arg
		case "leeway":
			t, err := caddy.ParseDuration(arg)
			if err != nil {
				return d.Errf("leeway: %q is not a duration such as 30s", arg)
			}
			h.Leeway = new(caddy.Duration(t))
		case "trust_caddy_auth":
			h.TrustCaddyAuth = true
		case "api_key":
			if _, err := auth.ParseAPIKey(arg, args[1]); err != nil && !strings.Contains(arg+args[1], "{") {
				return d.Errf("api_key: %v", err) // a placeholder is checked once Provision expands it
			}
			key := APIKey{Key: arg, UserID: args[1]}
			if err := parseAPIKeyProfile(d, &key); err != nil {
				return err
			}
			h.APIKeys = append(h.APIKeys, key)
		case "api_key_header":
			h.APIKeyHeader = arg
		case "max_body_size":
			size, ok := parseSize(arg)
			if !ok {
				return d.Errf("max_body_size: %q is not a size such as 1MiB or 512KB", arg)
			}
			h.MaxBodySize = size
		case "max_query_length":
			size, ok := parseSize(arg)
			if !ok {
				return d.Errf("max_query_length: %q is not a size such as 16KiB or 8000", arg)
			}
			h.MaxQueryLength = int(min(size, math.MaxInt)) // past 1 GiB either way
		case "max_response_size":
			size, ok := parseSize(arg)
			if !ok {
				return d.Errf("max_response_size: %q is not a size such as 8MiB", arg)
			}
			h.MaxResponseSize = size
		case "max_memory_per_client":
			size, ok := parseSize(arg)
			if !ok {
				return d.Errf("max_memory_per_client: %q is not a size such as 32MiB", arg)
			}
			h.MaxMemoryPerClient = size
		case "max_limit", "max_search_terms", "max_depth", "max_cost", "search_cost", "max_aliases", "max_root_fields", "max_fields",
			"max_subscriptions", "max_connections_per_user", "max_connections",
			"max_distinct_subscriptions", "max_distinct_subscriptions_per_client", "document_cache_entries",
			"events_max", "max_resume_events":
			n, err := strconv.Atoi(arg)
			if err != nil {
				return d.Errf("%s: %q is not a whole number", name, arg)
			}
			*map[string]*int{
				"max_limit": &h.MaxLimit, "max_search_terms": &h.MaxSearchTerms, "max_depth": &h.MaxDepth, "max_cost": &h.MaxCost,
				"search_cost": &h.SearchCost,
				"max_aliases": &h.MaxAliases, "max_root_fields": &h.MaxRootFields, "max_fields": &h.MaxFields,
				"max_subscriptions": &h.MaxSubscriptions, "max_connections_per_user": &h.MaxConnectionsPerUser,
				"max_connections": &h.MaxConnections, "max_distinct_subscriptions": &h.MaxDistinctSubscriptions,
				"max_distinct_subscriptions_per_client": &h.MaxDistinctSubscriptionsPerClient,
				"document_cache_entries":                &h.DocumentCacheEntries,
				"events_max":                            &h.EventsMax, "max_resume_events": &h.MaxResumeEvents,
			}[name] = n
		case "post_cache_size":
			size, ok := parseSize(arg)
			if !ok {
				return d.Errf("post_cache_size: %q is not a size such as 64MiB", arg)
			}
			h.PostCacheSize = size
		case "document_cache_size":
			size, ok := parseSize(arg)
			if !ok {
				return d.Errf("document_cache_size: %q is not a size such as 32MiB", arg)
			}
			h.DocumentCacheSize = size
		case "persisted_queries":
			h.PersistedQueries = arg
		case "persisted_queries_only":
			h.PersistedQueriesOnly = true
		case "subscriptions_require_auth":
			h.SubscriptionsRequireAuth = true
		case "allowed_origins":
			h.AllowedOrigins = append(h.AllowedOrigins, args...)
		case "ws_read_limit":
			size, ok := parseSize(arg)
			if !ok {
				return d.Errf("ws_read_limit: %q is not a size such as 32KiB", arg)
			}
			h.WSReadLimit = size
		case "jwks_refresh", "timeout", "ws_init_timeout", "ws_keepalive", "idempotency_ttl",
			"events_poll_interval", "events_ttl", "sse_max_duration", "mongodb_hole_wait":
			field := map[string]struct {
				value   *caddy.Duration
				example string
			}{
				"jwks_refresh": {&h.JWKSRefresh, "1h"}, "timeout": {&h.Timeout, "5s"}, "ws_init_timeout": {&h.WSInitTimeout, "3s"},
				"ws_keepalive": {&h.WSKeepAlive, "3s"}, "idempotency_ttl": {&h.IdempotencyTTL, "24h"},
				"events_poll_interval": {&h.EventsPollInterval, "100ms"}, "events_ttl": {&h.EventsTTL, "1h"},
				"sse_max_duration": {&h.SSEMaxDuration, "10m"}, "mongodb_hole_wait": {&h.MongoDBHoleWait, "2s"},
			}[name]
			t, err := caddy.ParseDuration(arg)
			if err != nil {
				return d.Errf("%s: %q is not a duration such as %s", name, arg, field.example)
			}
			*field.value = caddy.Duration(t)
		case "introspection":
			switch arg {
			case "on":
				h.DisableIntrospection = false
			case "off":
				h.DisableIntrospection = true
			default:
				return d.Errf("introspection: %q is neither on nor off", arg)
			}
		case "health_path":
			h.HealthPath = arg
		case "openapi_path":
			h.OpenAPIPath = arg
		case "events":
			// Its rule looks at mongodb_uri, which may come after it: checked after the block,
			// naming this line.
			h.Events, eventsLine = arg, caddyfile.NewDispenser([]caddyfile.Token{d.Token()})
			continue
		}
		// The value's rule is the one Validate applies; here its error names the line.
		if err := checkField(h, name); err != nil {
			return d.WrapErr(err)
		}
	}
	if eventsLine != nil {
		eventsLine.Next()
		if err := checkField(h, "events"); err != nil {
			return eventsLine.WrapErr(err)
		}
	}
	return nil
}

// parseSize reads a size such as 16KiB or 8000.
func parseSize(arg string) (int64, bool) {
	size, err := humanize.ParseBytes(arg)
	return int64(size), err == nil && size <= math.MaxInt64
}

// parseAPIKeyProfile reads the optional block of api_key: the user's name and email.
func parseAPIKeyProfile(d *caddyfile.Dispenser, key *APIKey) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		field := d.Val()
		args := d.RemainingArgs()
		if len(args) != 1 {
			return d.Errf("api_key %s takes 1 argument, got %d", field, len(args))
		}
		switch field {
		case "name":
			key.Name = args[0]
		case "email":
			key.Email = args[0]
		default:
			return d.Errf("unrecognized api_key subdirective %q (want name or email)", field)
		}
	}
	return nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Handler)(nil)
