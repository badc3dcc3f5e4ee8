package schema_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/schema"
)

// fanOut is a query with n aliases of a list of limit posts.
func fanOut(n, limit int) string {
	var b strings.Builder
	b.WriteString("{ ")
	for i := range n {
		fmt.Fprintf(&b, "p%d: posts(limit: %d) { id } ", i, limit)
	}
	return b.String() + "}"
}

// TestMaxCost sends operations whose lists, as long as their limits let them be, could return
// more values than max_cost: each is refused before anything runs, whatever hides the limits
// (variables, their defaults, fragments), and those within it run.
func TestMaxCost(t *testing.T) {
	commands := &callLog{}
	defaults := newSchemaWith(t, 100, schema.DefaultLimits, commands)
	create(t, defaults, alice, "one")
	strict := newSchemaWith(t, 100, strictLimits)
	wide := newSchemaWith(t, 100, limitsWith(func(l *schema.Limits) { l.MaxRootFields = 20 }), commands) // for fan-outs at the root

	const deepTwice = `{ user(id: "alice") { posts(limit: 100) { author { posts(limit: 100) { id } } } } }`
	checkLimits(t, commands, []limitCase{
		{"a user's 100 posts, each with its author's 100 posts, is refused", defaults, deepTwice, nil, "more than 2000 values (max_cost)", ""},
		{"the same with the limits in variables is refused", defaults,
			`query($n: Int) { user(id: "alice") { posts(limit: $n) { author { posts(limit: $n) { id } } } } }`, map[string]any{"n": 100.0}, "max_cost", ""},
		{"the same with the limits in variable defaults is refused", defaults,
			`query($n: Int = 100) { user(id: "alice") { posts(limit: $n) { author { posts(limit: $n) { id } } } } }`, nil, "max_cost", ""},
		{"the same behind a fragment is refused", defaults,
			`{ ...F } fragment F on Query { user(id: "alice") { posts(limit: 100) { author { posts(limit: 100) { id } } } } }`, nil, "max_cost", ""},
		{"the same behind inline fragments is refused", defaults,
			`{ ... on Query { user(id: "alice") { ... { posts(limit: 100) { author { posts(limit: 100) { id } } } } } } }`, nil, "max_cost", ""},
		{"the same in a mutation's answer is refused, and nothing is written", defaults,
			`mutation { createPost(input: {title: "x"}) { author { posts(limit: 100) { author { posts(limit: 100) { id } } } } } }`, nil, "max_cost", ""},
		{"a connection of 100 edges whose authors list 100 posts is refused", defaults,
			`{ postsConnection(first: 100) { edges { node { author { posts(limit: 100) { id } } } } } }`, nil, "max_cost", ""},
		{"limits over max_limit count as max_limit, and 100 x 100 is still refused", defaults,
			`{ posts(limit: 100000) { author { posts(limit: 100000) { id } } } }`, nil, "max_cost", ""},
		{"an unset variable counts as max_limit", defaults,
			`query($n: Int) { posts(limit: $n) { author { posts(limit: $n) { id } } } }`, nil, "max_cost", ""},
		{"11 aliases of 100 posts with their ids (2200 values) are refused", wide, fanOut(11, 100), nil, "max_cost", ""},
		{"10 aliases of 100 posts with their ids (2000 values) run", wide, fanOut(10, 100), nil, "", ""},
		{"100 posts with 20 aliases of their body (2100 values) are refused", defaults,
			"{ posts(limit: 100) { " + aliases("body", 20) + "} }", nil, "max_cost", ""},
		{"100 posts with their authors run", defaults, `{ posts(limit: 100) { title author { name } } }`, nil, "", ""},
		{"50 posts whose authors list 10 posts each run", defaults, `{ posts(limit: 50) { author { posts(limit: 10) { id } } } }`, nil, "", ""},
		{"lists without limits take their defaults: 20 posts whose authors list 10 each run", defaults,
			`{ posts { author { posts { id } } } postsConnection { edges { node { id } } pageInfo { hasNextPage } } }`, nil, "", ""},
		{"the strict site refuses 6 values", strict, `{ posts(limit: 3) { id } }`, nil, "more than 5 values", ""},
		{"the strict site runs 4 values", strict, `{ posts(limit: 2) { id } }`, nil, "", ""},
	})
}

// searches is a query with n aliases of a search of posts, given as query, with their ids.
func searches(n int, query string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "s%d: posts(search: %s, limit: 1) { id } ", i, query)
	}
	return b.String()
}

// connectionSearches is a query with n aliases of a search of postsConnection's first post.
func connectionSearches(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `c%d: postsConnection(search: "one", first: 1) { edges { node { id } } } `, i)
	}
	return b.String()
}

// TestSearchCost sends operations whose searches each count search_cost (500) values more than
// they return: 4 searches of one post are over max_cost (2000), however the search is given,
// and 3 run; lists without a search, or whose search is null, count what they return.
func TestSearchCost(t *testing.T) {
	commands := &callLog{}
	defaults := newSchemaWith(t, 100, schema.DefaultLimits, commands)
	create(t, defaults, alice, "one")
	checkLimits(t, commands, []limitCase{
		{"3 searches of one post (3 x 502 values) run", defaults, "{ " + searches(3, `"one"`) + "}", nil, "", ""},
		{"4 searches of one post (4 x 502 values) are refused", defaults, "{ " + searches(4, `"one"`) + "}", nil,
			"more than 2000 values (max_cost): ask for fewer fields, smaller limit or first arguments, fewer nested lists, or fewer searches (search_cost: 500 each)", ""},
		{"4 searches given as a variable are refused", defaults, "query($q: String) { " + searches(4, "$q") + "}", map[string]any{"q": "one"}, "max_cost", ""},
		{"4 searches given as a variable's default are refused", defaults, `query($q: String = "one") { ` + searches(4, "$q") + "}", nil, "max_cost", ""},
		{"10 lists whose search is a null variable run", defaults, "query($q: String) { " + searches(10, "$q") + "}", map[string]any{"q": nil}, "", ""},
		{"10 lists whose search is an unset variable run", defaults, "query($q: String) { " + searches(10, "$q") + "}", nil, "", ""},
		{"10 lists whose search is null run", defaults, "{ " + searches(10, "null") + "}", nil, "", ""},
		{"4 searches of postsConnection are refused", defaults, "{ " + connectionSearches(4) + "}", nil, "max_cost", ""},
		{"3 searches of postsConnection run", defaults, "{ " + connectionSearches(3) + "}", nil, "", ""},
		{"a search of each of 4 authors' posts is refused", defaults,
			`{ posts(limit: 4) { author { posts(search: "one", limit: 1) { id } } } }`, nil, "max_cost", ""},
		{"a search of each of 3 authors' posts runs", defaults,
			`{ posts(limit: 3) { author { posts(search: "one", limit: 1) { id } } } }`, nil, "", ""},
	})
}

// TestIntrospectionLimits sends introspection: graphql-js's standard queries run; aliases,
// lists of types nested more than twice, and any of it where it is turned off are refused.
func TestIntrospectionLimits(t *testing.T) {
	introspection, err := os.ReadFile("testdata/introspection.graphql")
	if err != nil {
		t.Fatal(err)
	}
	fullIntrospection, err := os.ReadFile("testdata/introspection_options.graphql")
	if err != nil {
		t.Fatal(err)
	}
	commands := &callLog{}
	defaults := newSchemaWith(t, 100, schema.DefaultLimits, commands)
	strict := newSchemaWith(t, 100, strictLimits)
	checkLimits(t, commands, []limitCase{
		{"graphql-js's standard introspection query runs", defaults, string(introspection), nil, "", ""},
		{"graphql-js's introspection query with specifiedByUrl and inputValueDeprecation runs", defaults, string(fullIntrospection), nil, "", ""},
		{"introspection lists nested three deep are refused", defaults,
			`{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }`, nil, "nest more than 2 deep", ""},
		{"introspection lists nested three deep through a fragment are refused", defaults,
			`{ __type(name: "Post") { ...T } } fragment T on __Type { fields { type { interfaces { possibleTypes { name } } } } }`, nil, "nest more than 2 deep", ""},
		{"an alias of __schema is refused", defaults, `{ a: __schema { queryType { name } } }`, nil, "introspection takes no aliases (a: __schema)", ""},
		{"an alias within __type is refused", defaults, `{ __type(name: "Post") { n: name } }`, nil, "introspection takes no aliases (n: name)", ""},
		{"aliases that repeat the schema through fragments are refused", defaults,
			`{ __schema { types { fields { ...A } } } } fragment A on __Field { t0: type { name } t1: type { name } }`, nil, "introspection takes no aliases (t0: type)", ""},
		{"__type without aliases runs", defaults, `{ __type(name: "Post") { name fields { name type { name ofType { name } } } } }`, nil, "", ""},
		{"the strict site refuses __schema", strict, `{ __schema { queryType { name } } }`, nil, "introspection is turned off", ""},
		{"the strict site refuses __type inside a fragment", strict, `{ ...F } fragment F on Query { __type(name: "Post") { name } }`, nil, "introspection is turned off", ""},
		{"the strict site still answers __typename", strict, `{ __typename }`, nil, "", ""},
	})
}
