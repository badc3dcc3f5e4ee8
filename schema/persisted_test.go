package schema_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// TestAutomaticPersistedQueries follows Apollo's protocol: the hash alone first, answered
// PERSISTED_QUERY_NOT_FOUND, then the query with its hash, which registers it, then the hash
// alone again.
func TestAutomaticPersistedQueries(t *testing.T) {
	s := newSchema(t)
	id := create(t, s, alice, "persisted")
	query := `query Post($id: ID!) { post(id: $id) { title } }`
	hash, vars := sha256Hex(query), map[string]any{"id": id}
	ctx := auth.NewContext(t.Context(), alice)
	steps := []struct {
		name string
		req  schema.Request
		code errcode.Code // of the refusal, or none
	}{
		{"the hash of a document the server does not hold is not found", schema.Request{PersistedHash: hash, Variables: vars}, errcode.PersistedQueryNotFound},
		{"the query with its hash runs", schema.Request{Query: query, PersistedHash: hash, Variables: vars}, errcode.Code{}},
		{"then the hash alone runs it", schema.Request{PersistedHash: hash, Variables: vars}, errcode.Code{}},
		{"the query with the hash of another is refused", schema.Request{Query: query + " ", PersistedHash: hash, Variables: vars}, errcode.PersistedQueryHashMismatch},
		{"the hash alone still runs it after that", schema.Request{PersistedHash: hash, Variables: map[string]any{"id": "none"}}, errcode.Code{}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			res := s.Do(ctx, step.req)
			switch {
			case step.code == errcode.Code{} && (len(res.Errors) > 0 || !strings.Contains(string(res.Data), `"post"`)):
				t.Errorf("data %s, errors %v; want it run", res.Data, res.Errors)
			case step.code != errcode.Code{} && (len(res.Errors) != 1 || res.Errors[0].Extensions["code"] != step.code.GraphQL || res.Data != nil):
				t.Errorf("data %s, errors %v; want %s", res.Data, res.Errors, step.code.GraphQL)
			}
		})
	}
	if got := s.CacheStats(); got.Registrations != 2 || got.Entries != 2 { // the mutation create ran, and the query
		t.Errorf("stats %+v", got)
	}
	t.Run("the mismatch says so in Apollo's words", func(t *testing.T) {
		_, refusal := s.Prepare(schema.Request{Query: "{ posts { id } }", PersistedHash: hash})
		if refusal == nil || !strings.HasPrefix(refusal.Message, "provided sha does not match query") {
			t.Errorf("refusal %+v", refusal)
		}
	})
}

// manifestOf is a persisted query manifest of the given documents, as Apollo's
// generate-persisted-query-manifest writes one.
func manifestOf(bodies ...string) []byte {
	var ops []map[string]string
	for i, body := range bodies {
		ops = append(ops, map[string]string{"id": sha256Hex(body), "body": body, "name": fmt.Sprintf("Op%d", i), "type": "query"})
	}
	data, _ := json.Marshal(map[string]any{"format": schema.ManifestFormat, "version": 1, "operations": ops})
	return data
}

func TestParseManifest(t *testing.T) {
	good := manifestOf(`query Op0 { posts { id } }`, `query Op1 { post(id: "x") { id } }`)
	ops, err := schema.ParseManifest(good)
	if err != nil || len(ops) != 2 || ops[1].ID != sha256Hex(`query Op1 { post(id: "x") { id } }`) || ops[1].Name != "Op1" {
		t.Fatalf("ParseManifest = %+v, %v", ops, err)
	}
	for _, tt := range []struct{ name, data, message string }{
		{"not JSON", `{"format": `, "not a persisted query manifest"},
		{"a list", `[]`, "not a persisted query manifest"},
		{"another format", `{"format": "relay", "version": 1, "operations": []}`, `format is "relay" version 1`},
		{"another version", `{"format": "apollo-persisted-query-manifest", "version": 2, "operations": []}`, "version 2"},
		{"an id that is not the body's SHA-256", strings.Replace(string(good), sha256Hex(`query Op0 { posts { id } }`), sha256Hex("other"), 1), `operation 1 ("Op0"): its id`},
		{"an operation with no body", `{"format": "apollo-persisted-query-manifest", "version": 1, "operations": [{"id": "x", "name": "A"}]}`, `operation 1 ("A") has no body`},
	} {
		t.Run("a manifest of "+tt.name+" is refused", func(t *testing.T) {
			if _, err := schema.ParseManifest([]byte(tt.data)); err == nil || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error %v; want one containing %q", err, tt.message)
			}
		})
	}
}

// newPersistedSchema is a schema with the operations of manifest, built as Provision builds one.
func newPersistedSchema(t *testing.T, limits schema.Limits, manifest []byte) (*schema.Schema, error) {
	ops, err := schema.ParseManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	svc := posts.NewService(posts.Config{Store: newStore(t), Timeout: 5 * time.Second, MaxLimit: 100, Logger: zap.NewNop()})
	return schema.New(svc, zap.NewNop(), limits, ops...)
}

func TestAManifestsOperationsAreHeldFromTheStart(t *testing.T) {
	listed, other := `query Listed($n: Int) { posts(limit: $n) { id } }`, `{ posts { title } }`
	for _, only := range []bool{false, true} {
		s, err := newPersistedSchema(t, limitsWith(func(l *schema.Limits) { l.PersistedOnly = only; l.DocumentCacheEntries = 1 }), manifestOf(listed))
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("with persisted_queries_only %v, a listed operation runs by hash and by text", only), func(t *testing.T) {
			for _, req := range []schema.Request{{PersistedHash: sha256Hex(listed)}, {Query: listed}, {Query: listed, PersistedHash: sha256Hex(listed)}} {
				req.Variables = map[string]any{"n": 1.0}
				prepareOK(t, s, req)
			}
			if got := s.CacheStats(); got.Hits != 3 || got.Persisted != 1 {
				t.Errorf("stats %+v; want 3 hits of the one persisted document", got)
			}
		})
		t.Run(fmt.Sprintf("with persisted_queries_only %v, a listed operation is still bound by the limits", only), func(t *testing.T) {
			if _, refusal := s.Prepare(schema.Request{Query: listed, Variables: map[string]any{"n": "ten"}}); refusal == nil || refusal.Extensions["code"] != errcode.BadUserInput.GraphQL {
				t.Errorf("refusal %+v; want BAD_USER_INPUT", refusal)
			}
		})
		t.Run(fmt.Sprintf("with persisted_queries_only %v, the manifest's documents are never evicted", only), func(t *testing.T) {
			for n := range 5 {
				s.Prepare(schema.Request{Query: nth(n)})
			}
			prepareOK(t, s, schema.Request{PersistedHash: sha256Hex(listed)})
		})
	}
	s, err := newPersistedSchema(t, limitsWith(func(l *schema.Limits) { l.PersistedOnly = true }), manifestOf(listed))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		req  schema.Request
		code errcode.Code
	}{
		{"a query not in the manifest", schema.Request{Query: other}, errcode.QueryNotInSafelist},
		{"a query not in the manifest, with its hash", schema.Request{Query: other, PersistedHash: sha256Hex(other)}, errcode.QueryNotInSafelist},
		{"a hash not in the manifest", schema.Request{PersistedHash: sha256Hex(other)}, errcode.PersistedQueryNotInList},
		{"the listed query with another's hash", schema.Request{Query: listed, PersistedHash: sha256Hex(other)}, errcode.PersistedQueryHashMismatch},
	} {
		t.Run("with persisted_queries_only, "+tt.name+" is refused with "+tt.code.GraphQL, func(t *testing.T) {
			for range 2 { // and not registered by the first
				if _, refusal := s.Prepare(tt.req); refusal == nil || refusal.Extensions["code"] != tt.code.GraphQL {
					t.Errorf("refusal %+v; want %s", refusal, tt.code.GraphQL)
				}
			}
		})
	}
	if got := s.CacheStats(); got.Registrations != 0 || got.Entries != 0 {
		t.Errorf("stats %+v; want nothing registered", got)
	}
}

func TestAManifestTheLimitsRefuseIsAnError(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		limits     func(l *schema.Limits)
		message    string
	}{
		{"a syntax error", `query Bad { posts { id }`, nil, "syntax error"},
		{"a body past max_query_length", `query Long { posts { id } }` + strings.Repeat(" ", 200), func(l *schema.Limits) { l.MaxQueryLength = 200 }, "max_query_length"},
		{"an operation past max_aliases", `query Aliased { ` + aliases("__typename", 31) + ` }`, nil, "max_aliases"},
		{"introspection where it is off", `query Schema { __schema { types { name } } }`, func(l *schema.Limits) { l.DisableIntrospection = true }, "introspection is turned off"},
		{"a fixed cost past max_cost", `query Costly { posts(limit: 100) { author { posts(limit: 100) { id } } } }`, nil, "max_cost"},
	} {
		t.Run("a manifest with "+tt.name+" is refused, naming the operation", func(t *testing.T) {
			limits := schema.DefaultLimits
			if tt.limits != nil {
				tt.limits(&limits)
			}
			_, err := newPersistedSchema(t, limits, manifestOf(`query Fine { posts { id } }`, tt.body))
			if err == nil || !strings.Contains(err.Error(), `persisted operation 2 ("Op1", id `+sha256Hex(tt.body)) || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error %v; want one naming operation 2 and containing %q", err, tt.message)
			}
		})
	}
	t.Run("a manifest whose cost depends on variables is checked with each request", func(t *testing.T) {
		body := `query Costly($n: Int) { posts(limit: $n) { author { posts(limit: $n) { id } } } }`
		s, err := newPersistedSchema(t, schema.DefaultLimits, manifestOf(body))
		if err != nil {
			t.Fatal(err)
		}
		prepareOK(t, s, schema.Request{PersistedHash: sha256Hex(body), Variables: map[string]any{"n": 2.0}})
		if _, refusal := s.Prepare(schema.Request{PersistedHash: sha256Hex(body), Variables: map[string]any{"n": 100.0}}); refusal == nil {
			t.Error("a cost past max_cost was admitted")
		}
	})
}
