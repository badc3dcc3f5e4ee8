package graphqlhttp

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/handlerstest"
	"github.com/postsedge/caddy-posts/handlers/stream"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

func TestResponseType(t *testing.T) {
	tests := []struct{ accept, want string }{
		{"", answer.GraphQLResponseJSON},
		{"*/*", answer.GraphQLResponseJSON},
		{"application/*", answer.GraphQLResponseJSON},
		{"application/graphql-response+json", answer.GraphQLResponseJSON},
		{"application/json", answer.ApplicationJSON},
		{"application/json, application/graphql-response+json", answer.GraphQLResponseJSON},
		{"application/graphql-response+json;q=0.9, application/json", answer.ApplicationJSON},
		{"application/json;q=0.5, application/graphql-response+json;q=0.5", answer.GraphQLResponseJSON},
		{"application/json; charset=utf-8", answer.ApplicationJSON},
		{"application/json, */*;q=0.1", answer.ApplicationJSON},
		{"application/graphql-response+json;q=0, application/json", answer.ApplicationJSON},
		{"application/graphql-response+json;q=0, application/json;q=0", ""},
		{"*/*;q=0", ""},
		{"text/xml", ""},
		{"text/html", ""},
		{"application/json;q=lots", ""},
		{"garbage;;;", ""},
	}
	for _, tt := range tests {
		if got := accepting(tt.accept).responseType(); got != tt.want {
			t.Errorf("responseType(%q) = %q; want %q", tt.accept, got, tt.want)
		}
	}
}

func TestPrefersHTML(t *testing.T) {
	tests := []struct {
		accept string
		want   bool
	}{
		{"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8", true}, // Chromium and Firefox
		{"text/html", true},
		{"*/*", false},
		{"", false},
		{"application/json", false},
		{"text/html;q=0.5, application/json", false},
		{"text/html, application/graphql-response+json", false},
	}
	for _, tt := range tests {
		if got := accepting(tt.accept).prefersHTML(); got != tt.want {
			t.Errorf("prefersHTML(%q) = %v; want %v", tt.accept, got, tt.want)
		}
	}
}

// graphQLAPI is a Handler whose schema can prepare operations (its store is never reached).
func graphQLAPI(t testing.TB) *Handler {
	svc := posts.NewService(posts.Config{MaxLimit: 100, Logger: zap.NewNop()})
	s, err := schema.New(svc, zap.NewNop(), handlerstest.Limits)
	if err != nil {
		t.Fatal(err)
	}
	return &Handler{Posts: svc, GraphQL: s, MaxBodySize: 4 << 10, Answer: &answer.Failer{Logger: zap.NewNop()}}
}

func postGraphQL(h *Handler, body string) (schema.Request, error) {
	r := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return h.graphQLBody(httptest.NewRecorder(), r)
}

func TestGraphQLRequests(t *testing.T) {
	a := graphQLAPI(t)
	ok := []struct {
		name, body string
		want       schema.Request
	}{
		{"a query", `{"query": "{ posts { id } }"}`, schema.Request{Query: "{ posts { id } }"}},
		{"every member", `{"query": "q", "variables": {"n": 1}, "operationName": "Op", "extensions": {"x": 1}}`,
			schema.Request{Query: "q", OperationName: "Op", Variables: map[string]any{"n": 1.0}}},
		{"null members", `{"query": "q", "variables": null, "operationName": null, "extensions": null}`, schema.Request{Query: "q"}},
		{"members of other clients, ignored", `{"id": "relay-1", "query": "q", "documentId": "d"}`, schema.Request{Query: "q"}},
	}
	for _, tt := range ok {
		t.Run(tt.name+" is read", func(t *testing.T) {
			got, err := postGraphQL(a, tt.body)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	refused := []struct{ name, body, message string }{
		{"no query", `{"variables": {}}`, "member query is required"},
		{"a null query", `{"query": null}`, "member query is required"},
		{"a query that is not a string", `{"query": 1}`, "member query must be a string"},
		{"variables that are a list", `{"query": "q", "variables": [1]}`, "member variables must be a JSON object"},
		{"variables that are a string", `{"query": "q", "variables": "{}"}`, "member variables must be a JSON object"},
		{"an operationName that is not a string", `{"query": "q", "operationName": 1}`, "member operationName must be a string"},
		{"extensions that are not an object", `{"query": "q", "extensions": true}`, "member extensions must be a JSON object"},
		{"a persisted query hash that is not a SHA-256", `{"extensions": {"persistedQuery": {"version": 1, "sha256Hash": "ab"}}}`, "sha256Hash must be the SHA-256 of the query"},
		{"a query given twice", `{"query": "a", "query": "b"}`, `member "query" is given more than once`},
		{"a list", `[{"query": "q"}]`, "must be a JSON object"},
		{"JSON cut short", `{"query": "q"`, "not valid JSON"},
		{"an empty body", ``, "the body is empty"},
	}
	for _, tt := range refused {
		t.Run(tt.name+" is refused with 400", func(t *testing.T) {
			_, err := postGraphQL(a, tt.body)
			w := httptest.NewRecorder()
			if err == nil {
				t.Fatal("no error")
			}
			e := a.Answer.Problem(w, httptest.NewRequest(http.MethodPost, "/graphql", nil), err)
			status, message := e.Code.Status, e.Message
			if status != http.StatusBadRequest || !strings.Contains(message, tt.message) {
				t.Errorf("%d %q; want 400 and a message containing %q", status, message, tt.message)
			}
		})
	}
	t.Run("a GET reads the same parameters from the query string", func(t *testing.T) {
		q := url.Values{"query": {"query Op($n: Int) { posts(limit: $n) { id } }"}, "variables": {`{"n": 2}`}, "operationName": {"Op"}, "extensions": {`{}`}}
		got, err := graphQLQuery(q.Encode())
		want := schema.Request{Query: q.Get("query"), OperationName: "Op", Variables: map[string]any{"n": 2.0}}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, %v; want %+v", got, err, want)
		}
	})
	for name, raw := range map[string]string{
		"a query given twice":             "query=a&query=b",
		"variables that are not JSON":     "query=q&variables=%7Bn",
		"no query":                        "variables=%7B%7D",
		"a malformed query string":        "query=%zz",
		"a query that is not UTF-8":       "query=%7Bposts%7Bid%7D%7D%FF",
		"an operationName not UTF-8":      "query=q&operationName=%FF",
		"variables that are not UTF-8":    "query=q&variables=%7B%22n%22%3A%22%FF%22%7D",
		"variables with half a surrogate": "query=q&variables=%7B%22n%22%3A%22%5Cud800%22%7D",
	} {
		t.Run("a GET with "+name+" is refused", func(t *testing.T) {
			if _, err := graphQLQuery(raw); err == nil {
				t.Error("no error")
			}
		})
	}
}

// FuzzGraphQLRequest feeds hostile bodies to the decoding of a POST and to Prepare: neither may
// panic, a refusal is a 4xx with a message, and what is read holds together.
func FuzzGraphQLRequest(f *testing.F) {
	for _, seed := range []string{
		`{"query": "{ posts { id } }"}`,
		`{"query": "query($n: Int = 100) { posts(limit: $n) { author { posts(limit: $n) { id } } } }", "variables": {"n": 1e308}}`,
		`{"query": "{ ...A } fragment A on Query { ...A }"}`,
		`{"query": "{ __schema { types { fields { type { fields { name } } } } } }"}`,
		`{"query": "mutation { createPost(input: {title: \"\u0000\"}) { id } }", "operationName": "x"}`,
		`{"query": "{ posts(limit: -2147483649) { id } }"}`,
		`{"query": "query A { a } query A { b }", "operationName": "A"}`,
		`{"query": "{ a(b: \"\"\"\n\"\"\") }"}`,
		`{"query": "` + strings.Repeat("{a", 2000) + `"}`,
		`{"query": "q", "variables": ` + strings.Repeat("[", 3000) + `}`,
		`{"query": "\xff\xfe"}`,
		"\xef\xbb\xbf{\"query\": \"{ posts { id } }\"}",
		`{"query": "{ posts { id } }"} {"query": "again"}`,
		`{"query": "{ posts { id } }", "query": "{ user { id } }"}`,
		`{"__proto__": {"query": 1}}`,
		`[]`, `null`, `"query"`, `{`, ``,
	} {
		f.Add(seed)
	}
	a := graphQLAPI(f)
	f.Fuzz(func(t *testing.T, body string) {
		req, err := postGraphQL(a, body)
		if err != nil {
			e := a.Answer.Problem(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/graphql", nil), err)
			status, message := e.Code.Status, e.Message
			if status < 400 || status > 499 || message == "" {
				t.Fatalf("refused with %d %q; want a 4xx with a message", status, message)
			}
			return
		}
		op, refusal := a.GraphQL.Prepare(req)
		switch {
		case refusal != nil && (refusal.Message == "" || refusal.Extensions["code"] == nil):
			t.Fatalf("a refusal without a message or code: %+v", refusal)
		case refusal == nil && op.Type != "query" && op.Type != "mutation" && op.Type != "subscription":
			t.Fatalf("operation type %q", op.Type)
		}
	})
}

// FuzzStreamRequested reads any Accept header: it never panics, and the stream it picks is one
// the header names: multipart only with a subscriptionSpec of 1.0 (quoted, or in RFC 2231's
// encodings, which mime.ParseMediaType reads).
func FuzzStreamRequested(f *testing.F) {
	for _, seed := range []string{
		"text/event-stream", "text/event-stream;q=0", "TEXT/EVENT-STREAM;Q=0.5", "text/event-stream;q=nan",
		`multipart/mixed;boundary="graphql";subscriptionSpec="1.0",application/json`, `multipart/mixed;subscriptionSpec="1.0";q=0, text/event-stream`, "multipart/mixed",
		"*/*", "", ",,;;==", "text/event-stream;q", "text/event-stream;=0",
		`multipart/mixed;subscriptionSpec=99`, `multipart/mixed;subscriptionSpec=""`, "multipart/mixed;boundary=subscriptionSpec",
		`multipart/mixed;boundary="subscriptionSpec=1.0"`, "multipart/mixed;subscriptionSpec*=utf-8''1.0",
		"text/event-stream;q=0.5, multipart/mixed;subscriptionSpec=1.0",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		lower := strings.ToLower(accept)
		switch got := StreamRequested(accept).(type) {
		case stream.SSE:
			if !strings.Contains(lower, "text/event-stream") {
				t.Errorf("%q: SSE, which it does not name", accept)
			}
		case stream.Multipart:
			if !strings.Contains(lower, "multipart/mixed") || !strings.Contains(lower, "subscriptionspec") || !strings.Contains(accept, "1") || !strings.Contains(accept, ".0") {
				t.Errorf("%q: multipart, which it does not name with subscriptionSpec 1.0", accept)
			}
			if strings.Contains(lower, `subscriptionspec=99`) && !strings.Contains(lower, "subscriptionspec=1.0") && !strings.Contains(lower, `subscriptionspec="1.0"`) {
				t.Errorf("%q: multipart for subscriptionSpec=99", accept)
			}
		case nil:
		default:
			t.Errorf("%q: %T", accept, got)
		}
	})
}
