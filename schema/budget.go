package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/postsedge/caddy-posts/posts"
)

// CodeResponseTooLarge is the code of the one error of an operation whose result grew past
// max_response_size: it stopped there, and the response has data: null.
const CodeResponseTooLarge = "RESPONSE_TOO_LARGE"

// A budget is what is left of max_response_size for one execution. graphql-go builds the
// whole result in memory before anything is written, so the resolvers charge it with the JSON
// each value will take, key and punctuation included, before graphql-go writes it: once it
// runs out, the execution's context is cancelled (graphql-go then calls no more resolvers),
// the resolvers that still run return zero values at once, and no store call starts.
//
// Every field of every object charges: key (the longest the operation writes that field
// under: exact unless one field has aliases of different lengths), quotes, colon and comma,
// then its value as graphql-go encodes it. An object charges its braces and, if the operation
// selects __typename anywhere, that member too. A nil *budget charges nothing.
type budget struct {
	left     atomic.Int64
	keys     map[string]int // by field name, the longest key it is written under
	unknown  int            // the key length of a field not in keys (none should be): the document's length
	typename int            // the key length of __typename, 0 when it is never selected
	stop     context.CancelCauseFunc
}

// errResponseTooLarge is the cause of an execution stopped by its budget, and what the
// resolvers that still run return.
var errResponseTooLarge = &Error{Code: CodeResponseTooLarge, Message: "the response is too large"}

// newBudget is the budget of one execution of document, limit bytes, whose exhaustion calls
// stop.
func newBudget(limit int64, document string, stop context.CancelCauseFunc) *budget {
	b := &budget{keys: map[string]int{}, unknown: len(document), stop: stop}
	b.left.Store(limit)
	doc, err := parser.ParseQuery(&ast.Source{Input: document})
	if err != nil { // Prepare printed it from a parsed tree: keep the safe bound for every key
		return b
	}
	for _, op := range doc.Operations {
		b.collectKeys(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		b.collectKeys(f.SelectionSet)
	}
	b.typename = b.keys["__typename"]
	return b
}

func (b *budget) collectKeys(set ast.SelectionSet) {
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			key := sel.Alias
			if key == "" {
				key = sel.Name
			}
			b.keys[sel.Name] = max(b.keys[sel.Name], len(key))
			b.collectKeys(sel.SelectionSet)
		case *ast.InlineFragment:
			b.collectKeys(sel.SelectionSet)
		}
	}
}

type budgetKey struct{}

func withBudget(ctx context.Context, b *budget) context.Context {
	return context.WithValue(ctx, budgetKey{}, b)
}

// budgetOf is the budget of the execution that ctx belongs to, or nil.
func budgetOf(ctx context.Context) *budget {
	b, _ := ctx.Value(budgetKey{}).(*budget)
	return b
}

// charge takes n bytes from b and says whether they fit. The first charge that does not fit
// stops the execution.
func (b *budget) charge(n int) bool {
	if b == nil {
		return true
	}
	if b.left.Add(-int64(n)) >= 0 {
		return true
	}
	if b.stop != nil {
		b.stop(errResponseTooLarge)
	}
	return false
}

// exceeded says whether b ran out.
func (b *budget) exceeded() bool { return b != nil && b.left.Load() < 0 }

// err is errResponseTooLarge once b ran out: resolvers check it before any store call.
func (b *budget) err() error {
	if b.exceeded() {
		return errResponseTooLarge
	}
	return nil
}

// member is the size of the object member of field name whose value takes n bytes.
func (b *budget) member(name string, n int) int {
	key, ok := b.keys[name]
	if !ok {
		key = b.unknown
	}
	return len(`"":,`) + key + n
}

// object is the size of an object of type typ, its members aside.
func (b *budget) object(typ string) int {
	n := len(`{}`) - len(`,`) // the members count a comma each; an object has one fewer
	if b.typename > 0 {
		n += len(`"":"",`) + b.typename + len(typ)
	}
	return n
}

// scalar charges the member name whose value takes n bytes of JSON.
func (b *budget) scalar(name string, n int) bool {
	return b == nil || b.charge(b.member(name, n))
}

// str charges the member name with the string s and returns s, or "" when it does not fit.
func (b *budget) str(name, s string) string {
	if !b.scalar(name, jsonStringLen(s)) {
		return ""
	}
	return s
}

// optStr is str of a nullable string.
func (b *budget) optStr(name string, s *string) *string {
	if s == nil {
		b.scalar(name, len(`null`))
		return nil
	}
	if !b.scalar(name, jsonStringLen(*s)) {
		return nil
	}
	return s
}

// time charges the member name with t as Time writes it.
func (b *budget) time(name string, t time.Time) bool {
	var buf [64]byte
	return b.scalar(name, len(`""`)+len(t.UTC().AppendFormat(buf[:0], posts.TimeFormat)))
}

// objectMember charges the member name with an object of type typ, or null when absent.
func (b *budget) objectMember(name, typ string, present bool) bool {
	if b == nil {
		return true
	}
	if !present {
		return b.scalar(name, len(`null`))
	}
	return b.charge(b.member(name, b.object(typ)))
}

// list charges the member name with a list of n objects of type typ.
func (b *budget) list(name, typ string, n int) bool {
	if b == nil {
		return true
	}
	return b.charge(b.member(name, len(`[]`)+max(n-1, 0)*len(`,`)+n*b.object(typ)))
}

// jsonStringLen is the length of s as a JSON string as graphql-go writes it: with
// encoding/json, which escapes <, > and & as \u003c (6 bytes for 1), control characters,
// each byte of invalid UTF-8 as \ufffd, and U+2028 and U+2029.
func jsonStringLen(s string) int {
	n := len(`""`)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += len(`\u0000`)
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += len(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			n += len(`\u2028`)
		default:
			n += size
		}
		i += size
	}
	return n
}

// tooLarge is the response of an operation stopped by its budget. Execution had begun, so, as
// the GraphQL specification has it (7.1.2, Data), data is present and null; the transports
// answer it as an executed operation (200, or a next message).
func tooLarge(limit int64) *graphql.Response {
	return &graphql.Response{
		Data: json.RawMessage(`null`),
		Errors: []*gqlerrors.QueryError{{
			Message:    fmt.Sprintf("the response would be larger than %d bytes (max_response_size): ask for fewer fields or aliases, or smaller limit or first arguments", limit),
			Extensions: map[string]any{"code": CodeResponseTooLarge},
		}},
	}
}
