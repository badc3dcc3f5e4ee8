// GraphQL limits end to end: an operation over one is refused before any resolver runs.
package caddymodule

import (
	"encoding/json"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
)

// introspectionQuery is graphql-js's standard introspection query (getIntrospectionQuery() of
// graphql 16), which GraphiQL and most tools send.
func introspectionQuery(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../schema/testdata/introspection.graphql")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGraphQLLimits: operations over a limit are refused before any resolver runs. The default
// limits are tried on the MongoDB site, which reaches its database through commandLog, which
// sees every command: a refused operation sends none.
func TestGraphQLLimits(t *testing.T) {
	inProcess(t)
	c := startGraphQLCaddy(t)
	p := c.createOn(mongoSite, asAlice, "limited")
	c.create(asAlice, "for the strict site") // whose query of depth 4 reads a post of alice's

	t.Run("an accepted query on the MongoDB site is seen reaching the database", func(t *testing.T) {
		n := commands().count()
		check(t, c.graphql(mongoSite, `query($id: ID!) { post(id: $id) { title } }`, map[string]any{"id": p.ID}), dataOnly(`{"post": {"title": "limited"}}`))
		if got := commands().since(n); !slices.Contains(got, "find") {
			t.Errorf("commands %v; want a find: the proxy would not see a resolver's query", got)
		}
		// The checks below that nothing changed see the site's writes only if they read its store.
		if docs := strings.Join(storedDocuments(t), "\n"); !strings.Contains(docs, p.ID) {
			t.Errorf("the FerretDB holds no post %s; the site writes elsewhere", p.ID)
		}
	})

	costly := `{ user(id:"alice") { posts(limit: 100) { author { posts(limit: 100) { id } } } } }`
	// user, 7 times posts and author, id: depth 16
	deep := `{ user(id: "alice") {` + strings.Repeat(` posts(limit: 1) { author {`, 7) + ` id` + strings.Repeat(` } }`, 7) + ` } }`
	refused := func(message string) gqlWant { return requestError(400, "GRAPHQL_VALIDATION_FAILED", message) }
	overCost := "could return more than 2000 values (max_cost)"
	for _, tt := range []struct {
		name   string
		query  string
		vars   map[string]any
		header []string
		get    bool
		want   gqlWant
	}{
		{name: "a query of 100 posts each with 100 posts of their author is over max_cost", query: costly, want: refused(overCost)},
		{name: "the same query over GET is over max_cost", query: costly, get: true, want: refused(overCost)},
		{name: "the same query under application/json is refused with 200", query: costly, header: []string{acceptLegacy},
			want: gqlWant{media: legacyJSON, errors: []wantError{{code: "GRAPHQL_VALIDATION_FAILED", message: overCost}}}},
		{name: "limits given in variables count as their values", query: `query($n: Int) { user(id: "alice") { posts(limit: $n) { author { posts(limit: $n) { id } } } } }`,
			vars: map[string]any{"n": 100}, want: refused(overCost)},
		{name: "limits from variables not given count as max_limit", query: `query($n: Int) { posts(limit: $n) { author { posts(limit: $n) { id } } } }`, want: refused(overCost)},
		{name: "lists without limits count at their defaults", query: `{ posts { author { posts { author { posts { id } } } } } }`, want: refused(overCost)},
		{name: "a fragment spread many times counts each time", query: `query { a: posts(limit: 100) { ...P } b: posts(limit: 100) { ...P } } fragment P on Post { author { posts(limit: 5) { id } } }`, want: refused(overCost)},
		{name: "a postsConnection of 100 edges each with 100 posts is over max_cost", query: `{ postsConnection(first: 100) { edges { node { author { posts(limit: 100) { id } } } } } }`, want: refused(overCost)},
		{name: "a costly mutation selection is refused and stores nothing", query: `mutation { createPost(input: {title: "costly"}) { author { posts(limit: 100) { author { posts(limit: 100) { id } } } } } }`,
			header: []string{asAlice}, want: refused(overCost)},
		{name: "four searches of a post are over max_cost, each counting search_cost 500", query: `{ a: posts(search: "a", limit: 1) { id } b: posts(search: "b", limit: 1) { id } ` +
			`c: postsConnection(search: "c", first: 1) { edges { node { id } } } d: user(id: "alice") { posts(search: "d", limit: 1) { id } } }`,
			want: refused(overCost + ": ask for fewer fields, smaller limit or first arguments, fewer nested lists, or fewer searches (search_cost: 500 each)")},
		{name: "a query deeper than max_depth 15 is refused", query: deep, want: refused("exceeds max depth 15")},
		{name: "a query of 16385 bytes is over max_query_length", query: `{ __typename }` + strings.Repeat(" ", 16385-len(`{ __typename }`)),
			want: refused("the query is 16385 bytes long, more than the limit of 16384 (max_query_length)")},
		{name: "introspection lists nested three deep are refused", query: `{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }`,
			want: refused("introspection lists (fields, interfaces, possibleTypes, inputFields) nest more than 2 deep")},
	} {
		t.Run(tt.name+", before any resolver", func(t *testing.T) {
			before := stored(t)
			n := commands().count()
			var res response
			if tt.get {
				params := url.Values{"query": {tt.query}}
				res = c.graphqlGet(mongoSite, params, tt.header...)
			} else {
				res = c.graphql(mongoSite, tt.query, tt.vars, tt.header...)
			}
			check(t, res, tt.want)
			if got := commands().since(n); len(got) > 0 {
				t.Errorf("the refused operation sent %v to the database; want nothing", got)
			}
			unchanged(t, before)
		})
	}
	t.Run("the over-cost query is refused alone where no database listens: no resolver ran into UNAVAILABLE", func(t *testing.T) {
		check(t, c.graphql(deadSite, costly, nil), refused(overCost))
	})

	t.Run("a query of exactly max_query_length bytes runs", func(t *testing.T) {
		check(t, c.graphql(mongoSite, `{ __typename }`+strings.Repeat(" ", 16384-len(`{ __typename }`)), nil), dataOnly(`{"__typename": "Query"}`))
	})
	t.Run("a query of depth 15 runs", func(t *testing.T) {
		// user, 6 times posts and author, posts, id: depth 15
		q := `{ user(id: "alice") {` + strings.Repeat(` posts(limit: 1) { author {`, 6) + ` posts(limit: 1) { id }` + strings.Repeat(` } }`, 6) + ` } }`
		check(t, c.graphql(mongoSite, q, nil), gqlWant{data: anyData})
	})
	t.Run("graphql-js's standard introspection query runs within the default limits", func(t *testing.T) {
		n := commands().count()
		out := check(t, c.graphql(mongoSite, introspectionQuery(t), map[string]any{}), gqlWant{data: anyData})
		var schema struct {
			Schema struct {
				QueryType, MutationType, SubscriptionType *struct{ Name string }
				Types                                     []struct{ Name string }
			} `json:"__schema"`
		}
		if err := json.Unmarshal(out.Data, &schema); err != nil {
			t.Fatal(err)
		}
		s := schema.Schema
		if s.QueryType == nil || s.QueryType.Name != "Query" || s.MutationType == nil || s.MutationType.Name != "Mutation" {
			t.Errorf("__schema = %s; want Query and Mutation", out.Data[:min(len(out.Data), 200)])
		}
		var names []string
		for _, typ := range s.Types {
			names = append(names, typ.Name)
		}
		for _, want := range []string{"Post", "User", "PostConnection", "PostEdge", "PageInfo", "PostInput", "PostPatch", "Time"} {
			if !slices.Contains(names, want) {
				t.Errorf("__schema.types %v has no %s", names, want)
			}
		}
		if got := commands().since(n); len(got) > 0 {
			t.Errorf("introspection sent %v to the database", got)
		}
	})
	t.Run("the standard introspection query runs over GET too", func(t *testing.T) {
		check(t, c.graphqlGet(site, url.Values{"query": {introspectionQuery(t)}}), gqlWant{data: anyData})
	})

	// The strict site: max_query_length 2KiB, max_depth 4, max_cost 5, introspection off.
	runCases(t, c, []gqlCase{
		{name: "with introspection off the standard introspection query is refused", site: strictSite, query: introspectionQuery(t),
			want: refused("introspection is turned off on this server")},
		{name: "with introspection off __type is refused", site: strictSite, query: `{ __type(name: "Post") { name } }`,
			want: refused("introspection is turned off on this server")},
		{name: "with introspection off __schema in a fragment is refused", site: strictSite, query: `{ ...F } fragment F on Query { __schema { queryType { name } } }`,
			want: refused("introspection is turned off on this server")},
		{name: "with introspection off __typename still works", site: strictSite, query: `{ __typename posts(limit: 1) { __typename } }`,
			want: gqlWant{data: anyData}},
		{name: "with max_cost 5 two posts with their ids, 4 values, are accepted", site: strictSite, query: `{ posts(limit: 2) { id } }`,
			want: gqlWant{data: anyData}},
		{name: "with max_cost 5 three posts with their ids, 6 values, are refused", site: strictSite, query: `{ posts(limit: 3) { id } }`,
			want: refused("could return more than 5 values (max_cost)")},
		{name: "with max_cost 5 one post with 5 aliases of its title, 6 values, is refused", site: strictSite, query: `{ posts(limit: 1) { a: title b: title c: title d: title e: title } }`,
			want: refused("could return more than 5 values (max_cost)")},
		{name: "with max_cost 5 the default of 20 posts is refused", site: strictSite, query: `{ posts { id } }`,
			want: refused("could return more than 5 values (max_cost)")},
		{name: "with max_cost 5 one post with its author's id, 3 values, is accepted", site: strictSite, query: `{ posts(limit: 1) { author { id } } }`,
			want: gqlWant{data: anyData}},
		{name: "with max_cost 5 a mutation's costly selection is refused", site: strictSite, query: `mutation { createPost(input: {title: "x"}) { author { posts(limit: 5) { id } } } }`, header: []string{asAlice},
			want: refused("could return more than 5 values (max_cost)")},
		{name: "with max_depth 4 a query of depth 4 runs", site: strictSite, query: `{ user(id: "alice") { posts(limit: 1) { author { id } } } }`,
			want: dataOnly(`{"user": {"posts": [{"author": {"id": "alice"}}]}}`)},
		{name: "with max_depth 4 a query of depth 5 is refused", site: strictSite, query: `{ user(id: "alice") { posts(limit: 1) { author { posts(limit: 1) { id } } } } }`,
			want: refused("exceeds max depth 4")},
		{name: "with max_query_length 2KiB a query of 2048 bytes runs", site: strictSite, query: `{ __typename }` + strings.Repeat(" ", 2048-len(`{ __typename }`)),
			want: dataOnly(`{"__typename": "Query"}`)},
		{name: "with max_query_length 2KiB a query of 2049 bytes is refused", site: strictSite, query: `{ __typename }` + strings.Repeat(" ", 2049-len(`{ __typename }`)),
			want: refused("the query is 2049 bytes long, more than the limit of 2048 (max_query_length)")},
	})
}
