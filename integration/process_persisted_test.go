//go:build integration

// Persisted queries through Caddy run as a process: Apollo's automatic persisted queries, a
// manifest's safelist, and the manifests that fail the config.
package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// apq is the persistedQuery extension of query, as Apollo Client sends it.
func apq(query string) string {
	sum := sha256.Sum256([]byte(query))
	return `{"persistedQuery": {"version": 1, "sha256Hash": "` + hex.EncodeToString(sum[:]) + `"}}`
}

// writeManifest writes an Apollo persisted query manifest of bodies, with ids computed by id,
// and returns its path.
func writeManifest(t *testing.T, id func(body string) string, bodies ...string) string {
	t.Helper()
	var ops []map[string]string
	for i, body := range bodies {
		ops = append(ops, map[string]string{"id": id(body), "body": body, "name": fmt.Sprintf("Op%d", i), "type": "query"})
	}
	data, _ := json.Marshal(map[string]any{"format": "apollo-persisted-query-manifest", "version": 1, "operations": ops})
	path := filepath.Join(t.TempDir(), "persisted-query-manifest.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func sha256Of(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

// graphQLAnswer is what a process answered a GraphQL request: status, Cache-Control, and the
// code of its one error, or its data.
type graphQLAnswer struct {
	status             int
	cacheControl, code string
	data               string
}

// askGraphQL POSTs body to the process's /graphql, or with a query string ("?…") GETs it.
func askGraphQL(t *testing.T, p *caddyProcess, body string) graphQLAnswer {
	t.Helper()
	var res *http.Response
	var err error
	if q, ok := strings.CutPrefix(body, "?"); ok {
		res, err = keyed().Get(p.url + "/graphql?" + q)
	} else {
		res, err = keyed().Post(p.url+"/graphql", "application/json", strings.NewReader(body))
	}
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	var out struct {
		Data   json.RawMessage
		Errors []struct{ Extensions struct{ Code string } }
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%d %s: %v", res.StatusCode, data, err)
	}
	a := graphQLAnswer{status: res.StatusCode, cacheControl: res.Header.Get("Cache-Control"), data: string(out.Data)}
	if len(out.Errors) == 1 {
		a.code = out.Errors[0].Extensions.Code
	}
	return a
}

// step is a request to a process and what it must answer: a status and the code of one error,
// or data.
type step struct {
	name, body string
	status     int
	code, data string
}

func (s step) check(t *testing.T, p *caddyProcess) {
	t.Helper()
	a := askGraphQL(t, p, s.body)
	switch {
	case a.status != s.status || a.code != s.code || s.data != "" && a.data != s.data:
		t.Errorf("%d %s %s; want %d %s %s", a.status, a.code, a.data, s.status, s.code, s.data)
	case s.code != "" && a.cacheControl != "no-store":
		t.Errorf("Cache-Control %q; want a refusal no cache keeps", a.cacheControl)
	}
}

func TestAutomaticPersistedQueriesThroughAProcess(t *testing.T) {
	port := freePort(t)
	p := startProcess(t, processConfig("off", port, "\t\tdata_dir "+t.TempDir()+"\n\t\tdocument_cache_entries 10"), port)
	query := `query Typename { __typename }`
	for _, s := range []step{
		{"the hash alone is not found, with 200 as Apollo Server answers it", `{"extensions": ` + apq(query) + `}`, 200, "PERSISTED_QUERY_NOT_FOUND", ""},
		{"nor with GET", "?extensions=" + url.QueryEscape(apq(query)), 200, "PERSISTED_QUERY_NOT_FOUND", ""},
		{"the query with its hash runs", `{"query": "` + query + `", "extensions": ` + apq(query) + `}`, 200, "", `{"__typename":"Query"}`},
		{"then the hash alone runs it", `{"extensions": ` + apq(query) + `}`, 200, "", `{"__typename":"Query"}`},
		{"and with GET", "?extensions=" + url.QueryEscape(apq(query)), 200, "", `{"__typename":"Query"}`},
		{"a hash that is not the query's is refused", `{"query": "{ __typename }", "extensions": ` + apq(query) + `}`, 400, "PERSISTED_QUERY_HASH_MISMATCH", ""},
	} {
		t.Run(s.name, func(t *testing.T) { s.check(t, p) })
	}
	p.stop()
}

func TestASafelistThroughAProcess(t *testing.T) {
	listed := `query Listed { __typename }`
	port := freePort(t)
	manifest := writeManifest(t, sha256Of, listed)
	p := startProcess(t, processConfig("off", port, "\t\tdata_dir "+t.TempDir()+"\n\t\tpersisted_queries "+manifest+"\n\t\tpersisted_queries_only"), port)
	other := `{ posts { id } }`
	for _, s := range []step{
		{"the listed operation runs by its hash from the start", `{"extensions": ` + apq(listed) + `}`, 200, "", `{"__typename":"Query"}`},
		{"and by its text", `{"query": "` + listed + `"}`, 200, "", `{"__typename":"Query"}`},
		{"a hash not in the manifest gets 404", `{"extensions": ` + apq(other) + `}`, 404, "PERSISTED_QUERY_NOT_IN_LIST", ""},
		{"a query not in the manifest gets 403", `{"query": "` + other + `"}`, 403, "QUERY_NOT_IN_SAFELIST", ""},
		{"even with its hash, which registers nothing", `{"query": "` + other + `", "extensions": ` + apq(other) + `}`, 403, "QUERY_NOT_IN_SAFELIST", ""},
		{"so its hash is still refused after", `{"extensions": ` + apq(other) + `}`, 404, "PERSISTED_QUERY_NOT_IN_LIST", ""},
		{"a query not in the manifest gets 403 with GET", "?query=" + url.QueryEscape(other), 403, "QUERY_NOT_IN_SAFELIST", ""},
	} {
		t.Run(s.name, func(t *testing.T) { s.check(t, p) })
	}
	p.stop()
}

// TestABadManifestFailsTheConfig runs caddy validate, which provisions as caddy run does, on
// configs whose manifest is bad: each fails, naming the file and what is wrong.
func TestABadManifestFailsTheConfig(t *testing.T) {
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "not-json.json")
	if err := os.WriteFile(notJSON, []byte(`{"format": "apollo-persisted-query-manifest",`), 0o600); err != nil {
		t.Fatal(err)
	}
	introspecting := writeManifest(t, sha256Of, `query Schema { __schema { types { name } } }`)
	for _, tt := range []struct{ name, posts, want string }{
		{"a manifest that is not there", "persisted_queries " + filepath.Join(dir, "missing.json"), filepath.Join(dir, "missing.json") + ": no such file"},
		{"a manifest that is not JSON", "persisted_queries " + notJSON, `persisted_queries "` + notJSON + `": not a persisted query manifest`},
		{"an id that is not the body's SHA-256", "persisted_queries " + writeManifest(t, func(string) string { return sha256Of("other") }, `query A { __typename }`),
			`: operation 1 ("Op0"): its id ` + `"` + sha256Of("other") + `" is not the SHA-256 of its body`},
		{"an operation the limits refuse", "introspection off\n\t\tpersisted_queries " + introspecting,
			`persisted_queries "` + introspecting + `": persisted operation 1 ("Op0", id ` + sha256Of(`query Schema { __schema { types { name } } }`) + `) is refused: introspection is turned off`},
		{"persisted_queries_only without a manifest", "persisted_queries_only", "persisted_queries_only refuses every operation that is not in persisted_queries, which names no manifest"},
	} {
		t.Run(tt.name+" fails the config", func(t *testing.T) {
			config := writeConfig(t, processConfig("off", freePort(t), "\t\tdata_dir "+t.TempDir()+"\n\t\t"+tt.posts))
			out := &lockedBuffer{}
			err := caddyCommand(t, out, "validate", "--config", config, "--adapter", "caddyfile").Run()
			// The error is logged as JSON, its quotes escaped.
			if err == nil || !strings.Contains(strings.ReplaceAll(out.String(), `\"`, `"`), tt.want) {
				t.Errorf("caddy validate: %v\n%s\nwant a failure naming %q", err, out, tt.want)
			}
		})
	}
}
