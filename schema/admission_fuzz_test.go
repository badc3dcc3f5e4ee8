package schema

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// FuzzAdmission checks Prepare on any document, with the hostile documents of
// TestHostileDocumentsAreAnsweredInBoundedTimeAndMemory, literals of every kind and the valid
// queries of the tests as seeds: Prepare never panics and answers exactly one of an operation
// and a refusal; a refusal has a code; graphql-go's validation of an admitted document does not
// panic and refuses none for its length; and the two together allocate at most 16 MB.
func FuzzAdmission(f *testing.F) {
	for _, h := range hostileDocuments() {
		f.Add(h.query, h.operationName)
	}
	for _, file := range []string{"testdata/introspection.graphql", "testdata/introspection_options.graphql"} {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), "IntrospectionQuery")
	}
	for _, seed := range []string{
		`{ posts { id title body createdAt updatedAt author { id name email posts(limit: 2) { id } } } }`,
		`query($n: Int = 3, $id: ID!) { posts(limit: $n) { id ... on Post { title } ...F } post(id: $id) { author { name } } } fragment F on Post { body }`,
		`query($first: Int, $after: String) { postsConnection(first: $first, after: $after, userId: "alice") { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }`,
		`mutation($in: PostInput!) { createPost(input: $in) { id } }`,
		`mutation { createPost(input: {title: """block""", body: null}) { id } updatePost(id: "x", input: {title: "t"}) { id } deletePost(id: "x") }`,
		`subscription { postCreated(userId: "alice") { id title } }`,
		`{ a: posts(limit: 1) @include(if: true) { id } b: posts(limit: 1) @skip(if: false) { id } __typename }`,
		`{ __type(name: "Post") { name fields(includeDeprecated: true) { name args { name } type { name ofType { name } } } } }`,
		`{ post(id: {a: 1}) { id } }`,
		`{ post(id: [[1], [2]]) { id } }`,
		`{ post(id: 99999999999) { id } }`,
		`{ posts(limit: 1.5, after: ENUM) { id } }`,
		`query($n: [Int] = [1, 2147483648], $p: PostInput = {title: {x: 1}}) { posts(limit: 1) { id } }`,
		`{ posts @include(if: {a: 1}) { id } }`,
		`{ ...A } fragment A on Query { ...B } fragment B on Query { ...A }`,
		`{ ...A } fragment A on Query { ...A ...A }`,
		`query A { ...F } query B { ...F } fragment F on Query { post(id: $v) { id } }`,
		`{ post(id: """\""") { id } evil: posts(limit: 100) { id } } #""") { id } }`,
		"{ post(id: \"\u0085\u2028\x7f\") { id } }",
	} {
		f.Add(seed, "")
	}
	s := admissionSchema(f)
	f.Fuzz(func(t *testing.T, query, operationName string) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		op, refusal := s.Prepare(Request{Query: query, OperationName: operationName})
		switch {
		case (op == nil) == (refusal == nil):
			t.Fatalf("operation %v and refusal %v; want exactly one", op, refusal)
		case refusal != nil:
			if code, _ := refusal.Extensions["code"].(string); code == "" || refusal.Message == "" {
				t.Fatalf("refusal %q without a code or a message: %v", refusal.Message, refusal.Extensions)
			}
		default:
			for _, e := range s.exec.ValidateWithVariables(op.document, op.request.Variables) {
				if strings.Contains(e.Message, "maximum allowed query length") {
					t.Fatalf("graphql-go refuses the printed document for its length (%d bytes, %d in the query): %v", len(op.document), len(query), e)
				}
			}
		}
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > admissionBytes {
			t.Fatalf("Prepare and validation allocated %d bytes; want at most %d", n, admissionBytes)
		}
	})
}
