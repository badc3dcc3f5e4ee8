// What an idempotency key needs to know of an operation: whether it is one create, and what it
// asks for.

package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/vektah/gqlparser/v2/ast"
)

// CreatesOnePost says whether op is a mutation whose only root field is createPost, selected as a
// field (an alias may name it) with no directive, so that it creates exactly one post: the
// operation an idempotency key can make safe to retry. A createPost spread from a fragment, or
// beside other fields, __typename included, is not one.
func (op *Operation) CreatesOnePost() bool {
	if op.Type != string(ast.Mutation) || len(op.root) != 1 {
		return false
	}
	f, ok := op.root[0].(*ast.Field)
	return ok && f.Name == "createPost" && len(f.Directives) == 0
}

// Fingerprint is what op asks for, as a SHA-256 in hex: the document as printed (so white space,
// commas and comments do not count, while aliases and the fields selected do), the operation that
// runs (whether operationName named it or not), and its variables as coerced (their order does
// not count). A request sent
// again, by its text or by a persisted query's hash, has the same.
func (op *Operation) Fingerprint() string {
	vars, _ := json.Marshal(op.request.Variables) // values decoded from JSON and coerced: they encode
	h := sha256.New()
	for _, part := range []string{"graphql", op.document, op.Name, string(vars)} {
		// Each part after its length, so that no two requests run into the same bytes.
		h.Write(strconv.AppendInt(nil, int64(len(part)), 10))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil))
}
