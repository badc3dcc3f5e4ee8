package caddymodule

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"
)

// TestCaddyfileAdaptsToJSON compares each testdata/caddyfile_adapt file's Caddyfile half, adapted,
// with its JSON half.
func TestCaddyfileAdaptsToJSON(t *testing.T) {
	files, err := filepath.Glob("testdata/caddyfile_adapt/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			caddyfile, expected, ok := strings.Cut(string(data), "----------")
			if !ok {
				t.Fatal("the file has no ---------- line between the Caddyfile and the JSON")
			}
			if !caddytest.CompareAdapt(t, file, strings.TrimSpace(caddyfile)+"\n", "caddyfile", strings.TrimSpace(expected)) {
				t.Error("the adapted JSON differs from the golden JSON (diff above)")
			}
		})
	}
}

// TestCaddyfileErrorsNameTheLineAndSubdirective adapts bad Caddyfiles: each fails with a message
// that gives the file and line and names the subdirective at fault.
func TestCaddyfileErrorsNameTheLineAndSubdirective(t *testing.T) {
	tests := []struct {
		name, block, want string
	}{
		{"an unknown subdirective", "frobnicate yes", `unrecognized subdirective "frobnicate"`},
		{"max_limit that is not a number", "max_limit lots", `max_limit: "lots" is not a whole number`},
		{"max_limit of zero", "max_limit 0", "max_limit must be at least 1, not 0"},
		{"a negative max_limit", "max_limit -5", "max_limit must be at least 1, not -5"},
		{"max_body_size that is not a size", "max_body_size huge", `max_body_size: "huge" is not a size`},
		{"max_body_size of zero", "max_body_size 0", "max_body_size must be from 1 byte to 1.0 TiB, not 0"},
		{"max_body_size over a TiB", "max_body_size 2TiB", "max_body_size must be from 1 byte to 1.0 TiB, not 2199023255552"},
		{"timeout that is not a duration", "timeout soon", `timeout: "soon" is not a duration such as 5s`},
		{"a negative timeout", "timeout -1s", "timeout must be positive, not -1s"},
		{"a timeout of zero", "timeout 0s", "timeout must be positive, not 0s"},
		{"api_key without a user", "api_key secret", "api_key takes 2 argument(s), got 1"},
		{"api_key with three arguments", "api_key secret alice bob", "api_key takes 2 argument(s), got 3"},
		{"synchronous that is neither normal nor full", "synchronous fast", `synchronous must be normal or full, not "fast"`},
		{"synchronous in capitals", "synchronous FULL", `synchronous must be normal or full, not "FULL"`},
		{"synchronous without a value", "synchronous", "synchronous takes 1 argument(s), got 0"},
		{"synchronous with two values", "synchronous normal full", "synchronous takes 1 argument(s), got 2"},
		{"post_cache_size that is not a size", "post_cache_size lots", `post_cache_size: "lots" is not a size such as 64MiB`},
		{"post_cache_size of zero", "post_cache_size 0", "post_cache_size must be from 1 byte to 64 GiB, not 0"},
		{"post_cache_size with two values", "post_cache_size 1MiB 2MiB", "post_cache_size takes 1 argument(s), got 2"},
		{"database without a name", "database", "database takes 1 argument(s), got 0"},
		{"a database name MongoDB refuses", "database my.posts", `database: "my.posts" is not a MongoDB database name`},
		{"an api_key digest that is not hex", "api_key sha256:xyz alice", `api_key: "sha256:" must be followed by 64 hex digits`},
		{"an api_key digest of the wrong length", "api_key sha256:abcd alice", `api_key: "sha256:" must be followed by 64 hex digits`},
		{"jwks_url without a URL", "jwks_url", "jwks_url takes at least 1 argument(s), got 0"},
		{"issuer without a value", "issuer", "issuer takes at least 1 argument(s), got 0"},
		{"the none algorithm", "algorithms RS256 none", `algorithms: "none" is not an accepted signing algorithm`},
		{"an HMAC algorithm", "algorithms HS256", `algorithms: "HS256" is not an accepted signing algorithm`},
		{"an algorithm in the wrong case", "algorithms rs256", `algorithms: "rs256" is not an accepted signing algorithm`},
		{"user_claim with two claims", "user_claim sub uid", "user_claim takes 1 argument(s), got 2"},
		{"leeway that is not a duration", "leeway lots", `leeway: "lots" is not a duration such as 30s`},
		{"a negative leeway", "leeway -1s", "leeway must be from 0s to 5m0s, not -1s"},
		{"a leeway over five minutes", "leeway 1h", "leeway must be from 0s to 5m0s, not 1h0m0s"},
		{"jwks_refresh that is not a duration", "jwks_refresh often", `jwks_refresh: "often" is not a duration such as 1h`},
		{"jwks_refresh under a second", "jwks_refresh 100ms", "jwks_refresh must be at least 1s, not 100ms"},
		{"trust_caddy_auth with an argument", "trust_caddy_auth yes", "trust_caddy_auth takes 0 argument(s), got 1"},
		{"max_query_length that is not a size", "max_query_length long", `max_query_length: "long" is not a size`},
		{"max_query_length of zero", "max_query_length 0", "max_query_length must be from 1 byte to 1.0 GiB, not 0"},
		{"max_depth of zero", "max_depth 0", "max_depth must be at least 1, not 0"},
		{"max_depth that is not a number", "max_depth deep", `max_depth: "deep" is not a whole number`},
		{"a negative max_cost", "max_cost -1", "max_cost must be from 1 to 1073741824, not -1"},
		{"max_cost over 2^30", "max_cost 2000000000", "max_cost must be from 1 to 1073741824, not 2000000000"},
		{"introspection that is neither on nor off", "introspection no", `introspection: "no" is neither on nor off`},
		{"introspection without a value", "introspection", "introspection takes 1 argument(s), got 0"},
		{"allowed_origins without a pattern", "allowed_origins", "allowed_origins takes at least 1 argument(s), got 0"},
		{"subscriptions_require_auth with an argument", "subscriptions_require_auth yes", "subscriptions_require_auth takes 0 argument(s), got 1"},
		{"ws_init_timeout that is not a duration", "ws_init_timeout soon", `ws_init_timeout: "soon" is not a duration such as 3s`},
		{"ws_keepalive of zero", "ws_keepalive 0s", "ws_keepalive must be positive, not 0s"},
		{"ws_read_limit that is not a size", "ws_read_limit big", `ws_read_limit: "big" is not a size`},
		{"ws_read_limit over a GiB", "ws_read_limit 2GiB", "ws_read_limit must be from 1 byte to 1.0 GiB, not 2147483648"},
		{"max_subscriptions of zero", "max_subscriptions 0", "max_subscriptions must be at least 1, not 0"},
		{"max_connections_per_user of zero", "max_connections_per_user 0", "max_connections_per_user must be at least 1, not 0"},
		{"max_memory_per_client that is not a size", "max_memory_per_client lots", `max_memory_per_client: "lots" is not a size`},
		{"max_aliases of zero", "max_aliases 0", "max_aliases must be at least 1, not 0"},
		{"max_root_fields that is not a number", "max_root_fields many", `max_root_fields: "many" is not a whole number`},
		{"a negative max_fields", "max_fields -1", "max_fields must be at least 1, not -1"},
		{"max_response_size that is not a size", "max_response_size vast", `max_response_size: "vast" is not a size`},
		{"max_response_size of zero", "max_response_size 0", "max_response_size must be from 1 byte to 1.0 TiB, not 0"},
		{"health_path that is not a path", "health_path healthz", `health_path must be a path such as /healthz, not "healthz"`},
		{"health_path with a query", "health_path /healthz?full", `health_path must be a path such as /healthz, not "/healthz?full"`},
		{"health_path on the API's paths", "health_path /posts/health", `health_path "/posts/health" is a path of the API`},
		{"health_path on GraphQL's path", "health_path /graphql", `health_path "/graphql" is a path of the API`},
		{"health_path without a path", "health_path", "health_path takes 1 argument(s), got 0"},
		{"openapi_path that is not a path", "openapi_path openapi.yaml", `openapi_path must be a path such as /openapi.yaml, not "openapi.yaml"`},
		{"openapi_path on the API's paths", "openapi_path /posts/openapi.yaml", `openapi_path "/posts/openapi.yaml" is a path of the API`},
		{"idempotency_ttl that is not a duration", "idempotency_ttl a-day", `idempotency_ttl: "a-day" is not a duration such as 24h`},
		{"idempotency_ttl under a second", "idempotency_ttl 500ms", "idempotency_ttl must be from 1s to 720h (30 days), not 500ms"},
		{"idempotency_ttl over 30 days", "idempotency_ttl 721h", "idempotency_ttl must be from 1s to 720h (30 days), not 721h0m0s"},
		{"document_cache_entries of zero", "document_cache_entries 0", "document_cache_entries must be at least 1, not 0"},
		{"document_cache_entries that is not a number", "document_cache_entries many", `document_cache_entries: "many" is not a whole number`},
		{"document_cache_size that is not a size", "document_cache_size big", `document_cache_size: "big" is not a size`},
		{"document_cache_size of zero", "document_cache_size 0", "document_cache_size must be from 1 byte to 1.0 TiB, not 0"},
		{"persisted_queries without a file", "persisted_queries", "persisted_queries takes 1 argument(s), got 0"},
		{"persisted_queries with two files", "persisted_queries a.json b.json", "persisted_queries takes 1 argument(s), got 2"},
		{"persisted_queries_only with an argument", "persisted_queries_only yes", "persisted_queries_only takes 0 argument(s), got 1"},
		{"events that is neither local nor relay", "events remote", `events must be local or relay, not "remote"`},
		{"events relay on the embedded store", "events relay", "events relay needs mongodb_uri: the embedded store serves one process"},
		{"events without a value", "events", "events takes 1 argument(s), got 0"},
		{"events_poll_interval under 10ms", "events_poll_interval 1ms", "events_poll_interval must be from 10ms to 10s, not 1ms"},
		{"events_poll_interval that is not a duration", "events_poll_interval often", `events_poll_interval: "often" is not a duration such as 100ms`},
		{"events_ttl under a minute", "events_ttl 30s", "events_ttl must be from 1m0s to 720h0m0s, not 30s"},
		{"mongodb_hole_wait under 100ms", "mongodb_hole_wait 10ms", "mongodb_hole_wait must be from 100ms to 1m0s, not 10ms"},
		{"mongodb_hole_wait that is not a duration", "mongodb_hole_wait long", `mongodb_hole_wait: "long" is not a duration such as 2s`},
	}
	adapter := caddyconfig.GetAdapter("caddyfile")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caddyfile := ":8080\n\nposts {\n\t\t" + tt.block + "\n}\n"
			_, _, err := adapter.Adapt([]byte(caddyfile), nil)
			if err == nil {
				t.Fatalf("adapting succeeded; want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), "Caddyfile:4") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q; want it to name Caddyfile:4 and contain %q", err, tt.want)
			}
		})
	}
	t.Run("mongodb_uri given twice", func(t *testing.T) {
		_, _, err := adapter.Adapt([]byte(":8080\n\nposts {\n\tmongodb_uri mongodb://a\n\tmongodb_uri mongodb://b\n}\n"), nil)
		if err == nil || !strings.Contains(err.Error(), "Caddyfile:5") || !strings.Contains(err.Error(), "mongodb_uri is given more than once") {
			t.Errorf("error = %v; want one naming Caddyfile:5 and saying mongodb_uri is given more than once", err)
		}
	})
	t.Run("events relay named before the mongodb_uri it needs", func(t *testing.T) {
		_, _, err := adapter.Adapt([]byte(":8080\n\nposts {\n\tevents relay\n\tmongodb_uri mongodb://a\n}\n"), nil)
		if err != nil {
			t.Errorf("error = %v; want none: mongodb_uri may come after events", err)
		}
	})
	t.Run("algorithms given twice", func(t *testing.T) {
		_, _, err := adapter.Adapt([]byte(":8080\n\nposts {\n\talgorithms RS256\n\talgorithms ES256\n}\n"), nil)
		if err == nil || !strings.Contains(err.Error(), "Caddyfile:5") || !strings.Contains(err.Error(), "algorithms is given more than once") {
			t.Errorf("error = %v; want one naming Caddyfile:5 and saying algorithms is given more than once", err)
		}
	})
	apiKeyBlocks := []struct{ name, block, want string }{
		{"an unknown member", "colour red", `unrecognized api_key subdirective "colour"`},
		{"a name without a value", "name", "api_key name takes 1 argument, got 0"},
		{"an email with two values", "email a@example.com b@example.com", "api_key email takes 1 argument, got 2"},
	}
	for _, tt := range apiKeyBlocks {
		t.Run("an api_key block with "+tt.name, func(t *testing.T) {
			caddyfile := ":8080\n\nposts {\n\tapi_key secret alice {\n\t\t" + tt.block + "\n\t}\n}\n"
			_, _, err := adapter.Adapt([]byte(caddyfile), nil)
			if err == nil || !strings.Contains(err.Error(), "Caddyfile:5") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v; want one naming Caddyfile:5 and containing %q", err, tt.want)
			}
		})
	}
	t.Run("arguments on the posts line itself", func(t *testing.T) {
		_, _, err := adapter.Adapt([]byte(":8080\n\nposts extra {\n}\n"), nil)
		if err == nil || !strings.Contains(err.Error(), "Caddyfile:3") || !strings.Contains(err.Error(), `posts takes no arguments`) {
			t.Errorf("error = %v; want one naming Caddyfile:3 and saying posts takes no arguments", err)
		}
	})
}
