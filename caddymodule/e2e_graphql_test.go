// GraphQL end-to-end set-up: its sites, requests, response checks, FerretDB command log.
package caddymodule

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// The GraphQL end-to-end tests run on the sites of config() and three more:
//   - defaultsSite, every GraphQL limit and max_limit at their defaults, on the stored posts of
//     the main site (data_dir dataDir);
//   - strictSite, small limits on the same posts: max_body_size 4KiB, max_query_length 2KiB,
//     max_depth 4, max_cost 5, introspection off;
//   - mongoSite, the defaults too, on the FerretDB of the mongodb_uri sites, reached through
//     commandLog, a proxy that records every command sent to the database, so that a test sees
//     that a refused operation never reached it.
//
// On the main site max_limit is 5.

// graphQLSites is the Caddyfile of the three sites above, to follow config().
func graphQLSites() string {
	return fmt.Sprintf(`
%s {
	posts {
		data_dir %s
		api_key %s alice
	}
}

%s {
	posts {
		data_dir %s
		api_key %s alice
		max_body_size 4KiB
		max_query_length 2KiB
		max_depth 4
		max_cost 5
		introspection off
	}
}

%s {
	posts {
		mongodb_uri mongodb://%s/?directConnection=true
		api_key %s alice
		events local
	}
}
`, defaultsSite, dataDir, aliceKey, strictSite, dataDir, aliceKey, mongoSite, commands().addr, aliceKey)
}

// startGraphQLCaddy loads config() with graphQLSites().
func startGraphQLCaddy(t *testing.T) *client {
	t.Helper()
	return loadGraphQLConfig(t, config()+graphQLSites())
}

// loadGraphQLConfig loads caddyfile, which must have the sites of config().
func loadGraphQLConfig(t *testing.T, caddyfile string) *client {
	t.Helper()
	tc := caddytest.NewTester(t)
	tc.InitServer(caddyfile, "caddyfile")
	if t.Failed() {
		t.FailNow()
	}
	// A guard against a hang, not a bound on time: caddytest's 5 s is less than GraphiQL's
	// largest file takes under the race detector on a loaded machine (seen: TestGraphiQL).
	tc.Client.Timeout = time.Minute
	return &client{t: t, http: tc.Client}
}

// The media types of GraphQL responses.
const (
	graphQLResponse = "application/graphql-response+json"
	legacyJSON      = "application/json"
	acceptLegacy    = "Accept: " + legacyJSON
	browserAccept   = "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
)

// graphql POSTs query, with vars unless they are nil, to /graphql of siteURL.
func (c *client) graphql(siteURL, query string, vars map[string]any, header ...string) response {
	c.t.Helper()
	r := c.graphqlRequest(siteURL, query, vars, header...)
	return c.do(r.method, r.url, r.body, r.header...)
}

// graphqlRequest is the request of c.graphql.
func (c *client) graphqlRequest(siteURL, query string, vars map[string]any, header ...string) request {
	c.t.Helper()
	body := map[string]any{"query": query}
	if vars != nil {
		body["variables"] = vars
	}
	b, err := json.Marshal(body)
	if err != nil {
		c.t.Fatal(err)
	}
	return request{"POST", siteURL + "/graphql", string(b), append([]string{jsonBody}, header...)}
}

// graphqlGet sends params in the query string of a GET of /graphql of siteURL.
func (c *client) graphqlGet(siteURL string, params url.Values, header ...string) response {
	c.t.Helper()
	return c.do("GET", siteURL+"/graphql?"+params.Encode(), "", header...)
}

// gqlResponse is a GraphQL response; Data is nil when the response has no data member.
type gqlResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
	// Extensions of a query's answer hold the cursor of the event log's position it reflects.
	Extensions *struct {
		Cursor string `json:"cursor"`
	} `json:"extensions"`
}

type gqlError struct {
	Message    string           `json:"message"`
	Locations  []map[string]int `json:"locations"`
	Path       []any            `json:"path"`
	Extensions map[string]any   `json:"extensions"`
}

// gqlWant is what a GraphQL response must be.
type gqlWant struct {
	status int    // 0 for 200
	media  string // "" for application/graphql-response+json
	// data is the exact data member as JSON; "" when the response must have none, anyData when
	// any data but null will do.
	data   string
	errors []wantError
	header map[string]string // headers and their exact values
}

const anyData = "(any)"

// wantError is one error of a response.
type wantError struct {
	code    string // extensions.code
	message string // a part of the message, which must not be empty in any case
	field   string // extensions.field; "" when there must be none
	path    string // the path as JSON, such as ["updatePost"]; "" when there must be none
}

// check fails t unless res is want, and returns res decoded.
func check(t *testing.T, res response, want gqlWant) gqlResponse {
	t.Helper()
	status, media := cmp.Or(want.status, http.StatusOK), cmp.Or(want.media, graphQLResponse)
	if res.status != status {
		t.Fatalf("status = %d; want %d (body %s)", res.status, status, res.body)
	}
	if got := res.header.Get("Content-Type"); got != media+"; charset=utf-8" {
		t.Errorf("Content-Type = %q; want %s; charset=utf-8", got, media)
	}
	for name, value := range want.header {
		if got := res.header.Get(name); got != value {
			t.Errorf("%s = %q; want %q", name, got, value)
		}
	}
	var out gqlResponse
	dec := json.NewDecoder(bytes.NewReader(res.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("decoding %s: %v", res.body, err)
	}
	if out.Extensions != nil && len(out.Extensions.Cursor) != events.CursorLength {
		t.Errorf("extensions = %+v; want a cursor of the event log, or none (body %s)", *out.Extensions, res.body)
	}
	switch want.data {
	case "":
		if out.Data != nil {
			t.Errorf("data = %s; want no data member (body %s)", out.Data, res.body)
		}
	case anyData:
		if out.Data == nil || string(out.Data) == "null" {
			t.Errorf("data = %s; want some (body %s)", out.Data, res.body)
		}
	default:
		if got, w := compact(t, out.Data), compact(t, []byte(want.data)); got != w {
			t.Errorf("data = %s\n       want %s", got, w)
		}
	}
	if len(out.Errors) != len(want.errors) {
		t.Fatalf("%d errors; want %d (body %s)", len(out.Errors), len(want.errors), res.body)
	}
	for i, w := range want.errors {
		e := out.Errors[i]
		field, _ := e.Extensions["field"].(string)
		if code := e.Extensions["code"]; code != w.code {
			t.Errorf("errors[%d] code = %v; want %s (%s)", i, code, w.code, e.Message)
		}
		if e.Message == "" || !strings.Contains(e.Message, w.message) {
			t.Errorf("errors[%d] message = %q; want it to contain %q", i, e.Message, w.message)
		}
		if field != w.field {
			t.Errorf("errors[%d] extensions.field = %q; want %q", i, field, w.field)
		}
		path := ""
		if e.Path != nil {
			b, _ := json.Marshal(e.Path)
			path = string(b)
		}
		if path != w.path {
			t.Errorf("errors[%d] path = %s; want %s", i, path, w.path)
		}
	}
	return out
}

func compact(t *testing.T, data []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		t.Fatalf("not JSON: %s: %v", data, err)
	}
	return buf.String()
}

// gqlCase is one GraphQL request over POST and the response it must get.
type gqlCase struct {
	name   string
	site   string // "" for the main site
	query  string
	vars   map[string]any
	header []string
	want   gqlWant
}

// runCases runs each case as a subtest; none of them may change the stored posts.
func runCases(t *testing.T, c *client, cases []gqlCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := stored(t)
			check(t, c.graphql(cmp.Or(tc.site, site), tc.query, tc.vars, tc.header...), tc.want)
			unchanged(t, before)
		})
	}
}

// dataOnly is a want of exactly this data and no errors.
func dataOnly(format string, args ...any) gqlWant { return gqlWant{data: fmt.Sprintf(format, args...)} }

// idObjects is the JSON of a list of posts that show only their ids.
func idObjects(ids ...string) string {
	objects := make([]string, len(ids))
	for i, id := range ids {
		objects[i] = fmt.Sprintf(`{"id":%q}`, id)
	}
	return "[" + strings.Join(objects, ",") + "]"
}

// asJSON is v as JSON.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fieldError is a want of data and one error of an operation that ran.
func fieldError(dataJSON, code, message, field, path string) gqlWant {
	return gqlWant{data: dataJSON, errors: []wantError{{code: code, message: message, field: field, path: path}}}
}

// requestError is a want of a refusal before anything ran: status, one error with code, no data.
func requestError(status int, code, message string) gqlWant {
	return gqlWant{status: status, errors: []wantError{{code: code, message: message}}}
}

// commandLog is a TCP proxy to the FerretDB's unix socket that records the name of every
// command its clients send (the first key of an OP_MSG body), leaving out the driver's own
// handshakes and heartbeats, and the event log's search for pending events, which its follower
// makes every second for no request.
type commandLog struct {
	addr string
	mu   sync.Mutex
	seen []string
}

var commands = sync.OnceValue(func() *commandLog {
	p := &commandLog{}
	p.addr = mongotest.ServeTCP(ferret.Socket, p.pass)
	return p
})

// monitoring are the commands the driver sends on its own, for no operation.
var monitoring = map[string]bool{"hello": true, "isMaster": true, "ismaster": true, "ping": true, "buildInfo": true, "endSessions": true}

// pass records the command of msg, unless the driver sent it on its own or it is the log's
// search for pending events, and lets it through.
func (p *commandLog) pass(_ net.Conn, msg []byte) bool {
	if name := mongotest.CommandName(msg); name != "" && !monitoring[name] && !bytes.Contains(msg, []byte("ev.at")) {
		p.mu.Lock()
		p.seen = append(p.seen, name)
		p.mu.Unlock()
	}
	return true
}

// count is how many commands have been recorded.
func (p *commandLog) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seen)
}

// since returns the commands recorded after the first n.
func (p *commandLog) since(n int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen[n:])
}
