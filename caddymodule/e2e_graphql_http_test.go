// GraphQL over HTTP end to end: methods, media types, bodies, and GraphiQL.
package caddymodule

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

func TestGraphQLOverHTTP(t *testing.T) {
	inProcess(t)
	c := startGraphQLCaddy(t)
	p := c.create(asAlice, "over HTTP")
	twoOperations := `query A($id: ID!) { post(id: $id) { title } } query B { __typename }`

	t.Run("GET runs a query with variables and the operation operationName names", func(t *testing.T) {
		res := c.graphqlGet(site, url.Values{"query": {twoOperations}, "variables": {fmt.Sprintf(`{"id": %q}`, p.ID)}, "operationName": {"A"}})
		check(t, res, dataOnly(`{"post": {"title": "over HTTP"}}`))
		if got := res.header.Get("Vary"); got != "Accept, Authorization, Origin" {
			t.Errorf("Vary = %q; want Accept, Authorization, Origin", got)
		}
	})
	t.Run("HEAD answers like GET without a body", func(t *testing.T) {
		res := c.do("HEAD", site+"/graphql?"+url.Values{"query": {"{ __typename }"}}.Encode(), "")
		if res.status != 200 || len(res.body) != 0 || res.header.Get("Content-Type") != graphQLResponse+"; charset=utf-8" {
			t.Errorf("HEAD = %d %q %v", res.status, res.body, res.header)
		}
	})
	t.Run("GET of a mutation gets 405 with Allow: POST and changes nothing", func(t *testing.T) {
		before := stored(t)
		res := c.graphqlGet(site, url.Values{"query": {fmt.Sprintf(`mutation { deletePost(id: %q) }`, p.ID)}}, asAlice)
		check(t, res, gqlWant{status: 405, header: map[string]string{"Allow": "POST"}, errors: []wantError{{code: "BAD_REQUEST", message: "a mutation cannot be sent with GET; use POST"}}})
		unchanged(t, before)
	})
	t.Run("GET of a mutation named by operationName gets 405 too", func(t *testing.T) {
		before := stored(t)
		res := c.graphqlGet(site, url.Values{"query": {`query Q { __typename } mutation M { createPost(input: {title: "x"}) { id } }`}, "operationName": {"M"}}, asAlice)
		check(t, res, gqlWant{status: 405, header: map[string]string{"Allow": "POST"}, errors: []wantError{{code: "BAD_REQUEST", message: "use POST"}}})
		unchanged(t, before)
	})
	t.Run("GET cannot run a mutation that block strings hide from one reading of the document", func(t *testing.T) {
		// graphql-go's lexer ends a block string at \""", the spec does not: each reading finds
		// a different operation B. What runs is the document the server checked, never the other.
		before := stored(t)
		query := `query A { post(id: """\""") { id } } mutation B { createPost(input: {title: "via GET"}) { id } } query C { post(id: """) { id } } query B { __typename } query D { post(id: """) { id } } #""") { id } }`
		for _, header := range [][]string{{asAlice}, nil} {
			res := c.graphqlGet(site, url.Values{"query": {query}, "operationName": {"B"}}, header...)
			if bytes.Contains(res.body, []byte("createPost")) {
				t.Errorf("GET ran the mutation: %d %s", res.status, res.body)
			}
		}
		unchanged(t, before)
	})
	t.Run("GET of a query from a document that also has a mutation runs the query", func(t *testing.T) {
		res := c.graphqlGet(site, url.Values{"query": {`query Q { __typename } mutation M { createPost(input: {title: "x"}) { id } }`}, "operationName": {"Q"}})
		check(t, res, dataOnly(`{"__typename": "Query"}`))
	})
	for _, method := range []string{"PUT", "DELETE", "PATCH", "OPTIONS"} {
		t.Run(method+" gets 405 with Allow: GET, HEAD, POST", func(t *testing.T) {
			before := stored(t)
			res := c.do(method, site+"/graphql", `{"query": "mutation { createPost(input: {title: \"x\"}) { id } }"}`, jsonBody, asAlice)
			check(t, res, gqlWant{status: 405, header: map[string]string{"Allow": "GET, HEAD, POST"}, errors: []wantError{{code: "BAD_REQUEST", message: method + " is not allowed"}}})
			unchanged(t, before)
		})
	}

	post := func(body string, header ...string) response {
		return c.do("POST", site+"/graphql", body, append([]string{jsonBody}, header...)...)
	}
	t.Run("POST runs the operation operationName names of two", func(t *testing.T) {
		check(t, post(fmt.Sprintf(`{"query": %q, "operationName": "B", "variables": {"id": %q}}`, twoOperations, p.ID)), dataOnly(`{"__typename": "Query"}`))
		check(t, post(fmt.Sprintf(`{"query": %q, "operationName": "A", "variables": {"id": %q}}`, twoOperations, p.ID)), dataOnly(`{"post": {"title": "over HTTP"}}`))
	})
	t.Run("POST ignores members other clients add, such as Relay's id", func(t *testing.T) {
		check(t, post(`{"id": "q1", "query": "{ __typename }", "operationName": null, "variables": null, "extensions": {"tracing": true}}`), dataOnly(`{"__typename": "Query"}`))
	})

	// Each request error, under each media type: the spec's own answers 400; application/json
	// answers 200 for an operation refused after the body was read, and 400 for a body that
	// holds no GraphQL request.
	requestErrors := []struct {
		name          string
		body          string // a POST body, or "?"+a query string for a GET
		code, message string
		legacyStatus  int
	}{
		{"a syntax error", `{"query": "{ posts { id "}`, "GRAPHQL_PARSE_FAILED", "syntax error", 200},
		{"a syntax error over GET", "?query=" + url.QueryEscape("{ posts { id "), "GRAPHQL_PARSE_FAILED", "syntax error", 200},
		{"a field the schema does not have", `{"query": "{ posts { nope } }"}`, "GRAPHQL_VALIDATION_FAILED", `Cannot query field "nope" on type "Post"`, 200},
		{"a required variable given as null", `{"query": "query($id: ID!) { post(id: $id) { id } }", "variables": {"id": null}}`, "BAD_USER_INPUT", "$id cannot be null", 200},
		{"an input variable with a member its type does not have", `{"query": "mutation($in: PostInput!) { createPost(input: $in) { id } }", "variables": {"in": {"title": "t", "tags": []}}}`, "BAD_USER_INPUT", `$in has no field "tags"`, 200},
		{"a required variable not given", `{"query": "query($id: ID!) { post(id: $id) { id } }"}`, "BAD_USER_INPUT", "$id is required", 200},
		{"two operations and no operationName", `{"query": "query A { __typename } query B { __typename }"}`, "GRAPHQL_VALIDATION_FAILED", "name the one to run in operationName", 200},
		{"an operationName the document does not have", `{"query": "query A { __typename }", "operationName": "C"}`, "GRAPHQL_VALIDATION_FAILED", `no operation named "C"`, 200},
		{"a document without an operation", `{"query": "fragment F on Query { __typename }"}`, "GRAPHQL_VALIDATION_FAILED", "", 200},
		{"a subscription over HTTP", `{"query": "subscription { postCreated { id } }"}`, "BAD_REQUEST", "a subscription is served over a WebSocket to this URL (subprotocol graphql-transport-ws), or streamed over HTTP to a request that accepts text/event-stream", 400},
		{"a body that is not JSON", `{"query": `, "BAD_REQUEST", "the body is not valid JSON", 400},
		{"an empty body", ``, "BAD_REQUEST", "the body is empty", 400},
		{"a JSON array", `[{"query": "{ __typename }"}]`, "BAD_REQUEST", "must be a JSON object", 400},
		{"no query", `{"variables": {}}`, "BAD_REQUEST", "the member query is required", 400},
		{"a null query", `{"query": null}`, "BAD_REQUEST", "the member query is required", 400},
		{"no query over GET", "?variables=%7B%7D", "BAD_REQUEST", "the query parameter query is required", 400},
		{"a query that is not a string", `{"query": 42}`, "BAD_REQUEST", "the member query must be a string", 400},
		{"an operationName that is not a string", `{"query": "{ __typename }", "operationName": 1}`, "BAD_REQUEST", "operationName must be a string", 400},
		{"variables that are an array", `{"query": "{ __typename }", "variables": [1]}`, "BAD_REQUEST", "the member variables must be a JSON object", 400},
		{"variables that are a string", `{"query": "{ __typename }", "variables": "{}"}`, "BAD_REQUEST", "the member variables must be a JSON object", 400},
		{"variables over GET that are not an object", "?query=%7B__typename%7D&variables=%5B1%5D", "BAD_REQUEST", "the query parameter variables must be a JSON object", 400},
		{"variables over GET that are not JSON", "?query=%7B__typename%7D&variables=%7B", "BAD_REQUEST", "the query parameter variables must be a JSON object", 400},
		{"extensions that are not an object", `{"query": "{ __typename }", "extensions": 1}`, "BAD_REQUEST", "the member extensions must be a JSON object", 400},
		{"query given twice over GET", "?query=%7B__typename%7D&query=%7B__typename%7D", "BAD_REQUEST", `"query" is given more than once`, 400},
		{"a member given twice", `{"query": "{ __typename }", "query": "{ posts { id } }"}`, "BAD_REQUEST", `"query" is given more than once`, 400},
		{"a persisted query whose hash is not its query's", `{"query": "{ __typename }", "extensions": {"persistedQuery": {"version": 1, "sha256Hash": "ecf4edb46db40b5132295c0291d62fb65d6759a9eedfa4d5d612dd5ec54a6b38"}}}`,
			"PERSISTED_QUERY_HASH_MISMATCH", "provided sha does not match query", 400},
		{"a persisted query over GET with a hash that is no SHA-256", "?extensions=" + url.QueryEscape(`{"persistedQuery": {"version": 1, "sha256Hash": "abc"}}`),
			"BAD_REQUEST", "sha256Hash must be the SHA-256 of the query", 400},
		{"a persisted query of version 2", `{"extensions": {"persistedQuery": {"version": 2, "sha256Hash": "ecf4edb46db40b5132295c0291d62fb65d6759a9eedfa4d5d612dd5ec54a6b38"}}}`,
			"BAD_REQUEST", "version must be 1", 400},
	}
	for _, tt := range requestErrors {
		for _, media := range []string{graphQLResponse, legacyJSON} {
			status := 400
			if media == legacyJSON {
				status = tt.legacyStatus
			}
			t.Run(fmt.Sprintf("%s gets %d %s under %s", tt.name, status, tt.code, media), func(t *testing.T) {
				before := stored(t)
				var res response
				if q, ok := strings.CutPrefix(tt.body, "?"); ok {
					res = c.do("GET", site+"/graphql?"+q, "", "Accept: "+media)
				} else {
					res = post(tt.body, "Accept: "+media, asAlice)
				}
				check(t, res, gqlWant{status: status, media: media, errors: []wantError{{code: tt.code, message: tt.message}}})
				unchanged(t, before)
			})
		}
	}

	// A variable whose value its type cannot take makes the request invalid (GraphQL spec,
	// CoerceVariableValues): nothing runs.
	for _, tt := range []struct{ name, body string }{
		{"a string for an Int variable", `{"query": "query($n: Int) { posts(limit: $n) { id } }", "variables": {"n": "two"}}`},
		{"a fraction for an Int variable", `{"query": "query($n: Int) { __typename posts(limit: $n) { id } }", "variables": {"n": 1.5}}`},
		{"a string for an Int variable of a nested field", `{"query": "query($n: Int) { user(id: \"alice\") { posts(limit: $n) { id } } }", "variables": {"n": "two"}}`},
		{"a number for the String title of an input variable", `{"query": "mutation($in: PostInput!) { createPost(input: $in) { id } }", "variables": {"in": {"title": 42}}}`},
		{"a userId in an input variable", `{"query": "mutation($in: PostInput!) { createPost(input: $in) { id } }", "variables": {"in": {"title": "t", "userId": "bob"}}}`},
		{"an input variable without its required title", `{"query": "mutation($in: PostInput!) { createPost(input: $in) { id } }", "variables": {"in": {"body": "b"}}}`},
		{"a required variable not given", `{"query": "mutation($id: ID!) { deletePost(id: $id) }"}`},
		{"an Int variable over 2^31", `{"query": "query($n: Int) { posts(limit: $n) { id } }", "variables": {"n": 2147483648}}`},
	} {
		for _, media := range []string{graphQLResponse, legacyJSON} {
			status := map[string]int{graphQLResponse: 400, legacyJSON: 200}[media]
			t.Run(fmt.Sprintf("%s gets %d BAD_USER_INPUT under %s and runs nothing", tt.name, status, media), func(t *testing.T) {
				before := stored(t)
				res := post(tt.body, "Accept: "+media, asAlice)
				unchanged(t, before)
				check(t, res, gqlWant{status: status, media: media, errors: []wantError{{code: "BAD_USER_INPUT"}}})
			})
		}
	}

	for _, tt := range []struct{ name, contentType string }{
		{"text/plain", "Content-Type: text/plain"},
		{"application/x-www-form-urlencoded", "Content-Type: application/x-www-form-urlencoded"},
		{"multipart/form-data", "Content-Type: multipart/form-data; boundary=x"},
		{"application/graphql", "Content-Type: application/graphql"},
		{"no Content-Type", ""},
	} {
		for _, media := range []string{graphQLResponse, legacyJSON} {
			t.Run(fmt.Sprintf("a POST with %s gets 415 under %s and runs nothing", tt.name, media), func(t *testing.T) {
				before := stored(t)
				res := c.do("POST", site+"/graphql", `{"query": "mutation { createPost(input: {title: \"x\"}) { id } }"}`, tt.contentType, "Accept: "+media, asAlice)
				check(t, res, gqlWant{status: 415, media: media, errors: []wantError{{code: "BAD_REQUEST", message: "Content-Type must be application/json"}}})
				unchanged(t, before)
			})
		}
	}
	t.Run("a POST with application/json; charset=utf-8 is accepted", func(t *testing.T) {
		check(t, c.do("POST", site+"/graphql", `{"query": "{ __typename }"}`, "Content-Type: application/json; charset=utf-8"), dataOnly(`{"__typename": "Query"}`))
	})

	big := `{"query": "mutation { createPost(input: {title: \"big\"}) { id } }", "variables": {"pad": "` + strings.Repeat("x", 4*1024) + `"}}`
	t.Run("a body over max_body_size gets 413 and runs nothing", func(t *testing.T) {
		before := stored(t)
		check(t, c.do("POST", strictSite+"/graphql", big, jsonBody, asAlice),
			gqlWant{status: 413, errors: []wantError{{code: "BAD_REQUEST", message: "the body is larger than the limit of 4 KiB"}}})
		unchanged(t, before)
	})
	t.Run("a body over max_body_size without a Content-Length gets 413 and runs nothing", func(t *testing.T) {
		before := stored(t)
		req, _ := http.NewRequest("POST", strictSite+"/graphql", io.MultiReader(strings.NewReader(big))) // unknown length: chunked
		req.Header.Set("Content-Type", legacyJSON)
		req.Header.Set("Authorization", "ApiKey "+aliceKey)
		res, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		check(t, response{res.StatusCode, res.Header, b}, gqlWant{status: 413, errors: []wantError{{code: "BAD_REQUEST", message: "larger than the limit"}}})
		unchanged(t, before)
	})

	for _, tt := range []struct{ accept, media string }{
		{"", graphQLResponse},
		{"*/*", graphQLResponse},
		{"application/*", graphQLResponse},
		{"application/graphql-response+json", graphQLResponse},
		{"application/json", legacyJSON},
		{"application/json, application/graphql-response+json", graphQLResponse},
		{"application/json;q=0.9, application/graphql-response+json;q=0.8", legacyJSON},
		{"application/graphql-response+json;q=0.9, application/json;q=0.9", graphQLResponse},
		{"application/graphql-response+json;q=0.5, application/json", legacyJSON},
		{"application/json, */*;q=0.1", legacyJSON},
		{"text/html;q=0.5, application/json", legacyJSON},
	} {
		t.Run(fmt.Sprintf("Accept %q gets %s", tt.accept, tt.media), func(t *testing.T) {
			header := ""
			if tt.accept != "" {
				header = "Accept: " + tt.accept
			}
			check(t, c.graphql(site, `{ __typename }`, nil, header), gqlWant{media: tt.media, data: `{"__typename": "Query"}`})
			check(t, c.graphqlGet(site, url.Values{"query": {"{ __typename }"}}, header), gqlWant{media: tt.media, data: `{"__typename": "Query"}`})
		})
	}
	for _, accept := range []string{"text/xml", "application/xml, text/plain", "application/graphql-response+json;q=0, application/json;q=0", "application/json;q=0"} {
		t.Run(fmt.Sprintf("Accept %q gets 406 and runs nothing", accept), func(t *testing.T) {
			before := stored(t)
			res := c.graphql(site, `mutation { createPost(input: {title: "x"}) { id } }`, nil, "Accept: "+accept, asAlice)
			check(t, res, gqlWant{status: 406, media: legacyJSON, errors: []wantError{{code: "BAD_REQUEST", message: "the response can only be application/graphql-response+json, application/json, text/event-stream"}}})
			unchanged(t, before)
		})
	}
}

func TestGraphiQL(t *testing.T) {
	inProcess(t)
	c := startGraphQLCaddy(t)
	page := c.do("GET", site+"/graphql", "", browserAccept)

	t.Run("a browser's GET gets the GraphiQL page under a Content-Security-Policy", func(t *testing.T) {
		if page.status != 200 || page.header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("got %d %q; want 200 text/html", page.status, page.header.Get("Content-Type"))
		}
		csp := page.header.Get("Content-Security-Policy")
		for _, directive := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, directive) {
				t.Errorf("Content-Security-Policy = %q; want %s in it", csp, directive)
			}
		}
		if strings.Contains(csp, "'unsafe-eval'") || strings.Contains(csp, "script-src 'self' 'unsafe-inline'") {
			t.Errorf("Content-Security-Policy = %q allows inline or eval'd scripts", csp)
		}
		if got := page.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("X-Content-Type-Options = %q", got)
		}
		if got := page.header.Get("Vary"); got != "Accept, Authorization, Origin" {
			t.Errorf("Vary = %q; want Accept (and the credentials, as every answer of /graphql)", got)
		}
		if !bytes.Contains(page.body, []byte(`src="graphql/graphiql/3.9.0/graphiql.min.js"`)) {
			t.Errorf("the page does not load GraphiQL 3.9.0:\n%s", page.body)
		}
	})
	t.Run("Accept: text/html alone gets the page too", func(t *testing.T) {
		res := c.do("GET", site+"/graphql", "", "Accept: text/html")
		if res.status != 200 || res.header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("got %d %q", res.status, res.header.Get("Content-Type"))
		}
	})
	t.Run("a browser's GET with a query in the URL gets the page, not the result", func(t *testing.T) {
		res := c.do("GET", site+"/graphql?"+url.Values{"query": {"{ __typename }"}}.Encode(), "", browserAccept)
		if res.header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("Content-Type = %q", res.header.Get("Content-Type"))
		}
	})
	t.Run("a POST with a browser's Accept never gets GraphiQL", func(t *testing.T) {
		check(t, c.graphql(site, `{ __typename }`, nil, browserAccept), dataOnly(`{"__typename": "Query"}`))
	})
	t.Run("a POST with Accept: text/html alone gets 406, not GraphiQL", func(t *testing.T) {
		check(t, c.graphql(site, `{ __typename }`, nil, "Accept: text/html"),
			gqlWant{status: 406, media: legacyJSON, errors: []wantError{{code: "BAD_REQUEST", message: "the response can only be"}}})
	})

	assets := regexp.MustCompile(`(?:src|href)="(graphql/graphiql/[^"]+)"`).FindAllSubmatch(page.body, -1)
	if len(assets) < 5 {
		t.Fatalf("the page names %d assets; want the CSS, React, ReactDOM, GraphiQL and its init script", len(assets))
	}
	for _, m := range assets {
		path := "/" + string(m[1])
		t.Run(path+" is served for good with its content type", func(t *testing.T) {
			res := c.do("GET", site+path, "", "Accept-Encoding: identity")
			want := "text/javascript; charset=utf-8"
			if strings.HasSuffix(path, ".css") {
				want = "text/css; charset=utf-8"
			}
			if res.status != 200 || len(res.body) == 0 || res.header.Get("Content-Type") != want {
				t.Fatalf("got %d %q, %d bytes; want 200 %s", res.status, res.header.Get("Content-Type"), len(res.body), want)
			}
			if got := res.header.Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
				t.Errorf("Cache-Control = %q; want public, max-age=31536000, immutable", got)
			}
			etag := res.header.Get("ETag")
			if again := c.do("GET", site+path, "", "Accept-Encoding: identity", "If-None-Match: "+etag); etag == "" || again.status != 304 {
				t.Errorf("ETag %q; a GET with If-None-Match got %d; want 304", etag, again.status)
			}
			gz := c.do("GET", site+path, "", "Accept-Encoding: gzip")
			if gz.header.Get("Content-Encoding") != "gzip" || gz.header.Get("Cache-Control") != res.header.Get("Cache-Control") {
				t.Fatalf("with Accept-Encoding: gzip, Content-Encoding = %q, Cache-Control = %q", gz.header.Get("Content-Encoding"), gz.header.Get("Cache-Control"))
			}
			zr, err := gzip.NewReader(bytes.NewReader(gz.body))
			if err != nil {
				t.Fatal(err)
			}
			if unzipped, err := io.ReadAll(zr); err != nil || !bytes.Equal(unzipped, res.body) {
				t.Errorf("the gzipped asset does not unzip to the asset (%v)", err)
			}
		})
	}
	t.Run("an asset GraphiQL does not have is 404", func(t *testing.T) {
		c.do("GET", site+"/graphql/graphiql/3.9.0/nope.js", "").wantError(t, 404, "no such GraphiQL file")
	})
	t.Run("another version's asset is 404", func(t *testing.T) {
		c.do("GET", site+"/graphql/graphiql/3.8.0/graphiql.min.js", "").wantError(t, 404, "no such GraphiQL file")
	})
	t.Run("a POST to an asset is 405 with Allow: GET, HEAD", func(t *testing.T) {
		res := c.do("POST", site+"/graphql/graphiql/3.9.0/graphiql.min.js", "{}", jsonBody)
		res.wantError(t, 405, "POST is not allowed")
		if got := res.header.Get("Allow"); got != "GET, HEAD" {
			t.Errorf("Allow = %q", got)
		}
	})
}
