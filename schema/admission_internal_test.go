package schema

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/posts"
)

// The bound on the work of one document, from Prepare to the end of graphql-go's validation.
const (
	admissionTime  = 50 * time.Millisecond
	admissionBytes = 16 << 20
)

// hostile is a document built to cost the most it can in DefaultLimits.MaxQueryLength bytes, and
// what Prepare must answer: the code of its refusal, or "" when it is admitted (graphql-go's
// validation may still refuse it).
type hostile struct {
	name, query, operationName string
	code                       string
}

// filled is head, unit(0), unit(1)… and tail, with as many units as keep it within
// DefaultLimits.MaxQueryLength bytes.
func filled(head string, unit func(i int) string, tail string) string {
	var b strings.Builder
	b.WriteString(head)
	for i := 0; ; i++ {
		u := unit(i)
		if b.Len()+len(u)+len(tail) > DefaultLimits.MaxQueryLength {
			break
		}
		b.WriteString(u)
	}
	return b.String() + tail
}

// repeated is filled with a unit that does not change.
func repeated(head, unit, tail string) string {
	return filled(head, func(int) string { return unit }, tail)
}

// nested is head, open n times, middle, close n times and tail, with n as large as keeps it
// within DefaultLimits.MaxQueryLength bytes.
func nested(head, open, middle, close, tail string) string {
	n := (DefaultLimits.MaxQueryLength - len(head) - len(middle) - len(tail)) / (len(open) + len(close))
	return head + strings.Repeat(open, n) + middle + strings.Repeat(close, n) + tail
}

// times is head, unit(0)…unit(n-1) and tail.
func times(head string, n int, unit func(i int) string, tail string) string {
	var b strings.Builder
	b.WriteString(head)
	for i := range n {
		b.WriteString(unit(i))
	}
	return b.String() + tail
}

func hostileDocuments() []hostile {
	return []hostile{
		{name: "16 KiB of aliases of one field", query: filled(`{ user(id: "a") { `, func(i int) string { return fmt.Sprintf("a%d: name ", i) }, "} }"), code: errcode.MaxAliases.GraphQL},
		{name: "16 KiB of aliases of __typename at the root", query: filled("{ ", func(i int) string { return fmt.Sprintf("a%d: __typename ", i) }, "}"), code: errcode.MaxAliases.GraphQL},
		{name: "one field repeated 2,000 times without an alias", query: times(`{ post(id: 1) {`, 1998, func(int) string { return " id" }, " } }"), code: errcode.MaxFields.GraphQL},
		{name: "one field repeated 499 times, the most max_fields admits", query: times(`{ post(id: 1) {`, 499, func(int) string { return " id" }, " } }")},
		{name: "conflicting aliases of post with different ids to the byte limit", query: filled("{ ", func(i int) string { return fmt.Sprintf("a:post(id:%d){id} ", i) }, "}"), code: errcode.MaxAliases.GraphQL},
		{name: "conflicting aliases of a nested field with different arguments to the byte limit", query: filled(`{ user(id: 1) { `, func(i int) string { return fmt.Sprintf("a:posts(limit:%d){id} ", i) }, "} }"), code: errcode.MaxAliases.GraphQL},
		{name: "30 conflicting aliases, the most max_aliases admits", query: times("{ ", 30, func(i int) string { return fmt.Sprintf("a: post(id: %d) { id } ", i) }, "}"), code: errcode.MaxRootFields.GraphQL},
		{name: "249 fields of one name with different arguments, 500 fields in all", query: times("{ __schema { types { ", 249, func(i int) string { return fmt.Sprintf("fields(includeDeprecated: %t) { name } ", i%2 == 0) }, "} } }")},
		{name: "fields nested to the byte limit", query: nested("{ ", "user(id: 1) { ", "id", " }", " }"), code: errcode.ParseFailed.GraphQL},
		{name: "fields nested 999 deep, the most the parser reads", query: times("{ ", 998, func(int) string { return "a { " }, "b") + strings.Repeat(" }", 999), code: errcode.MaxFields.GraphQL},
		{name: "499 fields nested in each other", query: times("{ ", 498, func(int) string { return "a { " }, "b") + strings.Repeat(" }", 499)},
		{name: "inline fragments nested to the byte limit", query: nested("{ ", "... { ", "__typename", " }", " }"), code: errcode.ParseFailed.GraphQL},
		{name: "inline fragments nested 999 deep", query: times("{ ", 998, func(int) string { return "... { " }, "__typename") + strings.Repeat(" }", 999), code: errcode.MaxFields.GraphQL},
		{name: "inline fragments nested 500 deep, as many as max_fields admits", query: times("{ ", 500, func(int) string { return "... { " }, "__typename") + strings.Repeat(" }", 501)},
		{name: "lists nested to the byte limit in an argument", query: nested("{ posts(x: ", "[", "1", "]", ") { id } }"), code: errcode.ParseFailed.GraphQL},
		{name: "lists nested 998 deep in an argument the schema has", query: times("{ post(id: ", 997, func(int) string { return "[" }, "1") + strings.Repeat("]", 997) + ") { id } }", code: errcode.ValidationFailed.GraphQL},
		{name: "lists nested 998 deep in an unknown argument", query: times("{ posts(x: ", 997, func(int) string { return "[" }, "1") + strings.Repeat("]", 997) + ") { id } }", code: errcode.ValidationFailed.GraphQL},
		{name: "objects nested 998 deep in an input", query: times(`mutation { createPost(input: {title: "t", body: `, 996, func(int) string { return "{a: " }, "1") + strings.Repeat("}", 996) + "}) { id } }", code: errcode.ValidationFailed.GraphQL},
		{name: "objects nested 999 deep in a variable's default value", query: times(`query($v: PostInput = `, 999, func(int) string { return "{a: " }, "1") + strings.Repeat("}", 999) + ") { __typename }", code: errcode.ValidationFailed.GraphQL},
		{name: "16 KiB of list items in an unknown argument", query: repeated("{ posts(x: [", "1, ", "]) { id } }")},
		{name: "fragments each spreading the previous twice", query: times("{ ...F60 } fragment F0 on Query { __typename } ", 60, func(i int) string { return fmt.Sprintf("fragment F%d on Query { ...F%d ...F%d } ", i+1, i, i) }, ""), code: errcode.MaxFields.GraphQL},
		{name: "fragments each spreading the previous twice, with aliases", query: times("{ ...F60 } fragment F0 on Query { a: __typename } ", 60, func(i int) string { return fmt.Sprintf("fragment F%d on Query { ...F%d ...F%d } ", i+1, i, i) }, ""), code: errcode.MaxAliases.GraphQL},
		{name: "two fragments spreading each other", query: `{ ...A } fragment A on Query { ...B } fragment B on Query { ...A }`, code: errcode.ValidationFailed.GraphQL},
		{name: "a cycle through 450 fragments", query: times("{ ...F0 } ", 450, func(i int) string { return fmt.Sprintf("fragment F%d on Query { ...F%d } ", i, (i+1)%450) }, ""), code: errcode.ValidationFailed.GraphQL},
		{name: "fragments each spreading the next and the first", query: times("{ ...F0 } ", 400, func(i int) string { return fmt.Sprintf("fragment F%d on Query { ...F%d ...F0 } ", i, i+1) }, "fragment F400 on Query { __typename }"), code: errcode.ValidationFailed.GraphQL},
		{name: "a cycle no operation spreads", query: `{ __typename } fragment A on Query { ...B } fragment B on Query { ...A }`, code: errcode.ValidationFailed.GraphQL},
		{name: "thousands of variables never used", query: filled("query Q(", func(i int) string { return fmt.Sprintf("$v%d: Int ", i) }, ") { __typename }")},
		{name: "thousands of variables with defaults", query: filled("query Q(", func(i int) string { return fmt.Sprintf("$v%d: [Int] = [%d] ", i, i) }, ") { __typename }")},
		{name: "thousands of uses of a variable", query: repeated(`query($v: Boolean!) { __typename`, " @skip(if: $v)", " }"), code: errcode.MaxFields.GraphQL},
		{name: "thousands of directives", query: repeated("{ __typename", " @skip(if: false)", " }")},
		{name: "thousands of unknown directives", query: repeated("{ __typename", " @a", " }")},
		{name: "thousands of arguments of one name", query: repeated("{ posts(", "a: 1 ", ") { id } }")},
		{name: "thousands of arguments", query: filled("{ posts(", func(i int) string { return fmt.Sprintf("a%d: 1 ", i) }, ") { id } }")},
		{name: "thousands of arguments on two fields of one name", query: `{ user(id: 1) { posts(` + strings.Repeat("a: 1 ", 1600) + `) { id } posts(` + strings.Repeat("a: 1 ", 1600) + `) { id } } }`},
		{name: "thousands of operations", query: filled("", func(i int) string { return fmt.Sprintf("query Q%d { __typename } ", i) }, ""), operationName: "Q0", code: errcode.MaxFields.GraphQL},
		{name: "499 operations", query: times("", 499, func(i int) string { return fmt.Sprintf("query Q%d { __typename } ", i) }, ""), operationName: "Q0"},
		{name: "operations sharing a fragment that uses variables", query: filled("", func(i int) string { return fmt.Sprintf("query Q%d($v: ID!) { ...F } ", i) }, "fragment F on Query { post(id: $v) { id } }"), operationName: "Q0", code: errcode.MaxFields.GraphQL},
		{name: "operations sharing a fragment with thousands of uses of a variable", query: times("", 200, func(i int) string { return fmt.Sprintf("query Q%d { ...F } ", i) }, "fragment F on Query { post(id: $v "+strings.Repeat("x: $v ", 1800)+") { id } }"), operationName: "Q0", code: errcode.MaxFields.GraphQL},
		{name: "operations sharing a fragment of deep inline fragments", query: times("", 420, func(i int) string { return fmt.Sprintf("query Q%d { ...F } ", i) }, "fragment F on Query { "+strings.Repeat("... { ", 997)+"__typename"+strings.Repeat(" }", 997)+" }"), operationName: "Q0", code: errcode.MaxFields.GraphQL},
		{name: "operations sharing a fragment of inline fragments, as many as max_fields admits", query: times("", 40, func(i int) string { return fmt.Sprintf("query Q%d { ...F } ", i) }, "fragment F on Query { "+strings.Repeat("... { ", 10)+"__typename"+strings.Repeat(" }", 10)+" }"), operationName: "Q0"},
		{name: "440 fragments spread side by side", query: times("{ post(id: 1) { ", 440, func(i int) string { return fmt.Sprintf("...F%d ", i) }, "} } ") + times("", 440, func(i int) string { return fmt.Sprintf("fragment F%d on Post { id } ", i) }, "")},
		{name: "a string of 16 KiB", query: repeated(`{ post(id: "`, "x", `") { id } }`)},
		{name: "a block string of 16 KiB of line ends", query: repeated(`{ post(id: """`, "\n", `""") { id } }`)},
		{name: "a string of 16 KiB of escapes", query: repeated(`{ post(id: "`, `\u0001`, `") { id } }`)},
		{name: "a block string of 16 KiB of control characters", query: repeated(`{ post(id: """`, "\x01", `""") { id } }`), code: errcode.ParseFailed.GraphQL},
		{name: "a string of 16 KiB of DEL characters, which print six times as long", query: repeated(`{ post(id: "`, "\x7f", `") { id } }`)},
		{name: "introspection lists nested 998 deep", query: times("{ __schema { types { ", 498, func(int) string { return "fields { type { " }, "name") + strings.Repeat(" } }", 498) + " } } }", code: errcode.MaxFields.GraphQL},
		{name: "__type's ofType nested 996 deep", query: times(`{ __type(name: "Post") { `, 995, func(int) string { return "ofType { " }, "name") + strings.Repeat(" }", 997), code: errcode.MaxFields.GraphQL},
		{name: "__type's ofType nested 498 deep", query: times(`{ __type(name: "Post") { `, 497, func(int) string { return "ofType { " }, "name") + strings.Repeat(" }", 499)},
		{name: "ten copies of the schema's types and fields", query: times("{ ", 10, func(int) string { return "__schema { types { name fields { name args { name type { name } } } } } " }, "}")},
	}
}

// admissionSchema is a schema with the default limits and no store: the documents never run.
func admissionSchema(t testing.TB) *Schema {
	t.Helper()
	s, err := New(posts.NewService(posts.Config{MaxLimit: 100, Logger: zap.NewNop()}), zap.NewNop(), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// admitted is what Prepare answers for h, and the errors of graphql-go's validation of the
// document it admits, as Execute runs it.
func admitted(s *Schema, h hostile) (refusal string, validation int) {
	op, qerr := s.Prepare(Request{Query: h.query, OperationName: h.operationName})
	if qerr != nil {
		code, _ := qerr.Extensions["code"].(string)
		return code, 0
	}
	return "", len(s.exec.ValidateWithVariables(op.document, op.request.Variables))
}

// cost is the best time of three runs of admitted, and the bytes the last one allocated.
func cost(s *Schema, h hostile) (best time.Duration, bytes uint64) {
	for range 3 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		admitted(s, h)
		elapsed := time.Since(start)
		runtime.ReadMemStats(&after)
		if best == 0 || elapsed < best {
			best = elapsed
		}
		bytes = after.TotalAlloc - before.TotalAlloc
	}
	return best, bytes
}

// BenchmarkHostileDocuments measures Prepare and graphql-go's validation of each hostile
// document: ns/op and B/op are the time and memory one costs.
func BenchmarkHostileDocuments(b *testing.B) {
	s := admissionSchema(b)
	for _, h := range hostileDocuments() {
		b.Run(strings.ReplaceAll(h.name, " ", "_"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				admitted(s, h)
			}
		})
	}
}
