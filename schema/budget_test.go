package schema_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/graph-gophers/graphql-go"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// bodyAliases is the body-alias attack: n aliases of body on each post of a list.
func bodyAliases(limit, n int) string {
	var q strings.Builder
	fmt.Fprintf(&q, "{ posts(limit: %d) {", limit)
	for i := range n {
		fmt.Fprintf(&q, " a%d: body", i+1)
	}
	q.WriteString(" } }")
	return q.String()
}

// tooLarge fails t unless res is the one RESPONSE_TOO_LARGE error with data null.
func tooLarge(t testing.TB, res *graphql.Response) {
	t.Helper()
	if string(res.Data) != "null" || len(res.Errors) != 1 || res.Errors[0].Extensions["code"] != errcode.ResponseTooLarge.GraphQL {
		t.Fatalf("got data %.200q, %d errors (%v); want data null and one %s", res.Data, len(res.Errors), res.Errors, errcode.ResponseTooLarge.GraphQL)
	}
	if out, err := json.Marshal(res); err != nil || !strings.Contains(string(out), `"data":null`) {
		t.Errorf("the response writes as %s, %v", out, err)
	}
}

func TestBodyAliasesStopAtMaxResponseSize(t *testing.T) {
	const limit = 1 << 20
	calls := &callLog{}
	st := newStore(t)
	s := newSchemaOver(t, counted{st, calls}, 20, limitsWith(func(l *schema.Limits) { l.MaxResponseSize = limit }))
	body := strings.Repeat("<", 50_000) // 300,002 bytes of JSON each
	insert(t, st, 20, "alice", &body)

	t.Run("a list of bodies in 19 aliases answers RESPONSE_TOO_LARGE with little allocated", func(t *testing.T) {
		calls.reset()
		var res *graphql.Response
		n := allocated(func() { res = s.Do(t.Context(), schema.Request{Query: bodyAliases(20, 19)}) })
		t.Logf("allocated %d bytes", n)
		tooLarge(t, res)
		// In full it is 20 × 19 × 300 kB = 114 MB of JSON. What is allocated is the page read
		// from the store (1 MB of bodies, copied by the driver) and the JSON up to the budget,
		// which graphql-go copies up through the buffers of field, post, list and data.
		if n > 16*limit*schema.RaceFactor {
			t.Errorf("allocated %d bytes; want at most %d", n, 16*limit*schema.RaceFactor)
		}
		if got := calls.list(); len(got) != 1 {
			t.Errorf("store calls %v; want the one list", got)
		}
	})
	t.Run("nested lists stop calling the store once the budget runs out", func(t *testing.T) {
		calls.reset()
		res := s.Do(t.Context(), schema.Request{Query: `{ posts(limit: 20) { a: body b: body c: body d: body author { posts(limit: 20) { body } } } }`})
		tooLarge(t, res)
		// In full: 1 list, 1 read of the authors, 20 lists of their posts. Resolvers run 10 at
		// a time, and the first post's four bodies alone exceed the budget.
		if got := calls.list(); len(got) > 12 {
			t.Errorf("%d store calls: %v", len(got), got)
		}
	})
	t.Run("mutations after the budget ran out do not run", func(t *testing.T) {
		calls.reset()
		res := s.Do(auth.NewContext(t.Context(), alice), schema.Request{
			Query:     `mutation($b: String) { one: createPost(input: {title: "one", body: $b}) { a: body b: body c: body d: body } two: createPost(input: {title: "two"}) { id } }`,
			Variables: map[string]any{"b": body},
		})
		tooLarge(t, res)
		if got := calls.list(); strings.Count(strings.Join(got, " "), "InsertPost") != 1 {
			t.Errorf("store calls %v; want one InsertPost", got)
		}
	})
}

func TestAResponseOfExactlyMaxResponseSizeAnswersInFull(t *testing.T) {
	queries := []string{
		`{ posts { id userId title body createdAt updatedAt author { id name email } } }`,
		`{ postsConnection(first: 3) { edges { cursor node { id title } } pageInfo { hasNextPage endCursor } } nobody: user(id: "nobody") { id } post(id: "nope") { id } }`,
		`{ user(id: "alice") { id name email posts(limit: 2) { title a: body b: body author { name } } } }`,
		`query Q { __typename posts { __typename id } }`,
	}
	for _, q := range queries {
		t.Run(q, func(t *testing.T) {
			st := newStore(t)
			body := "b<ody\u2028\xff"
			insert(t, st, 4, "alice", &body)
			insert(t, st, 1, "bob", nil)
			full := newSchemaOver(t, st, 5, schema.DefaultLimits).Do(auth.NewContext(t.Context(), alice), schema.Request{Query: q})
			if len(full.Errors) > 0 {
				t.Fatal(full.Errors)
			}
			size := int64(len(full.Data))
			res := newSchemaOver(t, st, 5, limitsWith(func(l *schema.Limits) { l.MaxResponseSize = size })).Do(auth.NewContext(t.Context(), alice), schema.Request{Query: q})
			if string(res.Data) != string(full.Data) || len(res.Errors) > 0 {
				t.Errorf("with max_response_size %d: %s %v; want %s", size, res.Data, res.Errors, full.Data)
			}
			res = newSchemaOver(t, st, 5, limitsWith(func(l *schema.Limits) { l.MaxResponseSize = size - 1 })).Do(auth.NewContext(t.Context(), alice), schema.Request{Query: q})
			tooLarge(t, res)
		})
	}
}

// TestBodyAliasesAtFullSize is the attack as reported: 100 posts of 50,000 '<', 19 aliases of
// body, 570 MB of JSON in full; the default max_response_size stops it.
func TestBodyAliasesAtFullSize(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short, as it writes 5 MB of posts; make test runs it")
	}
	st := newStore(t)
	s := newSchemaOver(t, st, 100, limitsWith(func(l *schema.Limits) { l.MaxCost = 4000 }))
	body := strings.Repeat("<", 50_000)
	insert(t, st, 100, "alice", &body)
	hwm := func() int64 {
		status, _ := os.ReadFile("/proc/self/status")
		for line := range strings.Lines(string(status)) {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				return kb << 10
			}
		}
		return 0
	}
	peak := hwm()
	start := time.Now()
	var res *graphql.Response
	n := allocated(func() { res = s.Do(context.Background(), schema.Request{Query: bodyAliases(100, 19)}) })
	took := time.Since(start)
	tooLarge(t, res)
	grown := hwm() - peak
	t.Logf("answered in %v, %d bytes allocated, peak resident grew %d bytes", took, n, grown)
	// The JSON up to the 8 MiB budget is copied up through graphql-go's buffers of field, post,
	// list and data, each grown by doubling; some are alive at once.
	if n > 128<<20*schema.RaceFactor || (schema.RaceFactor == 1 && grown > 64<<20) {
		t.Errorf("allocated %d bytes, peak resident grew %d; want under 128 MiB and 64 MiB", n, grown)
	}
}

// TestAListSureToBeTooLargeStopsBeforeItIsEncoded checks ahead: a list whose titles and bodies,
// as many times as the document is sure to write them, cannot fit stops before graphql-go
// encodes any of it, and fields that @skip or @include may leave out are not counted.
func TestAListSureToBeTooLargeStopsBeforeItIsEncoded(t *testing.T) {
	st := newStore(t)
	body := strings.Repeat("<", 50_000) // 300,002 bytes of JSON each
	insert(t, st, 20, "alice", &body)
	s := newSchemaOver(t, st, 100, limitsWith(func(l *schema.Limits) { l.MaxResponseSize, l.MaxCost = 1<<20, 4000 }))
	for _, tt := range []struct {
		name, query string
		fits        bool
	}{
		{"four bodies in a page of 20", `{posts(limit:20){a:body b:body c:body d:body}}`, false},
		{"the bodies in a fragment", `{posts(limit:20){...F}} fragment F on Post{a:body b:body}`, false},
		{"the bodies of a connection's nodes", `{postsConnection(first:20){edges{node{a:body}}}}`, false},
		{"bodies that @skip leaves out", `{posts(limit:20){id a:body @skip(if:true) b:body @skip(if:true)}}`, true},
		{"bodies that @include leaves out", `{posts(limit:20){id ...F @include(if:false)}} fragment F on Post{body}`, true},
		{"three bodies of three posts", `{posts(limit:3){a:body b:body c:body}}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var res *graphql.Response
			bytes := allocated(func() { res = s.Do(auth.NewContext(t.Context(), posts.Caller{}), schema.Request{Query: tt.query}) })
			if tt.fits {
				if len(res.Errors) > 0 {
					t.Fatalf("errors %v", res.Errors)
				}
				return
			}
			tooLarge(t, res)
			t.Logf("%d KiB allocated", bytes>>10)
			if !strings.Contains(tt.name, "three posts") && bytes > 4<<20 {
				t.Errorf("%d KiB allocated; a list sure not to fit should stop before it is encoded", bytes>>10)
			}
		})
	}
}
