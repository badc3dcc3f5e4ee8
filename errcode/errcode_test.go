package errcode_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/posts"
)

func TestEveryRowOfTheTableIsWellFormed(t *testing.T) {
	graphQLCode := regexp.MustCompile(`^[A-Z]+(_[A-Z]+)*$`)
	seen := map[errcode.Code]bool{}
	for _, c := range errcode.Table {
		t.Run(c.When, func(t *testing.T) {
			if seen[c] {
				t.Error("the row is listed twice")
			}
			seen[c] = true
			switch {
			case c.GraphQL == "" && c.Status == 0 && c.Close == 0:
				t.Error("the row shows on no interface")
			case c.GraphQL != "" && !graphQLCode.MatchString(c.GraphQL):
				t.Errorf("extensions.code %q is not UPPER_SNAKE_CASE", c.GraphQL)
			case c.Status != 0 && (c.Status < 400 || c.Status > 599) && c != errcode.PersistedQueryNotFound: // 200, as Apollo Server answers it
				t.Errorf("status %d is not an error status", c.Status)
			case c.Close != 0 && !(c.Close >= 1000 && c.Close <= 1015 || c.Close >= 4000 && c.Close <= 4999):
				t.Errorf("close code %d is neither RFC 6455's nor an application's", c.Close)
			case c.Close == 1005 || c.Close == 1006 || c.Close == 1015:
				t.Errorf("close code %d may not be sent in a close frame", c.Close)
			case c.When == "":
				t.Error("the row does not say when it happens")
			}
		})
	}
}

func TestOfGivesEachErrorItsRow(t *testing.T) {
	invalid := fmt.Errorf("create: %w", &posts.InvalidError{Field: "title", Message: "title is empty"})
	badToken := &auth.Error{Code: "invalid_token", Description: "the token has expired"}
	twice := &auth.Error{Code: "invalid_request", Description: "the request has more than one bearer token"}
	cause := errors.New("dial tcp: connection refused")
	conflict := &posts.ConflictError{Version: 7}
	for _, tt := range []struct {
		name    string
		err     error
		want    errcode.Code
		message string
		field   string
	}{
		{"a rule of posts broken is BAD_USER_INPUT naming the field", invalid, errcode.BadUserInput, "title is empty", "title"},
		{"no caller for a write is UNAUTHENTICATED", posts.ErrUnauthenticated, errcode.Unauthenticated, posts.ErrUnauthenticated.Error(), ""},
		{"another user's post is FORBIDDEN", posts.ErrForbidden, errcode.Forbidden, posts.ErrForbidden.Error(), ""},
		{"a missing post is NOT_FOUND", posts.ErrNotFound, errcode.NotFound, posts.ErrNotFound.Error(), ""},
		{"a post at another version than expected is VERSION_CONFLICT", fmt.Errorf("update: %w", conflict), errcode.VersionConflict, conflict.Error(), ""},
		{"a store that does not answer is UNAVAILABLE, its cause kept back", fmt.Errorf("%w: %w", posts.ErrUnavailable, cause), errcode.Unavailable, posts.ErrUnavailable.Error(), ""},
		{"a store known down, not sent the request, is UNAVAILABLE saying so", fmt.Errorf("%w: %w", posts.ErrNotTried, cause), errcode.Unavailable, posts.ErrNotTried.Error(), ""},
		{"key sets not fetched yet are UNAVAILABLE", auth.ErrKeysUnavailable, errcode.Unavailable, auth.ErrKeysUnavailable.Error(), ""},
		{"a refused token is UNAUTHENTICATED", badToken, errcode.InvalidCredentials, "the token has expired", ""},
		{"a malformed credential is a bad request", twice, errcode.MalformedCredentials, "the request has more than one bearer token", ""},
		{"an idempotency key sent before with another request is IDEMPOTENCY_KEY_REUSED", posts.ErrKeyReused, errcode.IdempotencyKeyReused, posts.ErrKeyReused.Error(), ""},
		{"an idempotency key held by a request under way is IDEMPOTENCY_KEY_IN_USE", &posts.KeyInUseError{RetryAfter: time.Second}, errcode.IdempotencyKeyInUse, (&posts.KeyInUseError{}).Error(), ""},
		{"a retry of an idempotency key whose post was deleted since is IDEMPOTENCY_KEY_POST_DELETED, naming it", fmt.Errorf("create: %w", &posts.KeyPostDeletedError{PostID: "67d446000000000000000001"}), errcode.IdempotencyKeyPostDeleted, (&posts.KeyPostDeletedError{PostID: "67d446000000000000000001"}).Error(), ""},
		{"an error of the table is its own row", errcode.New(errcode.MaxAliases, "too many aliases"), errcode.MaxAliases, "too many aliases", ""},
		{"anything else is INTERNAL_SERVER_ERROR, its cause kept back", cause, errcode.Internal, errcode.InternalMessage, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := errcode.Of(tt.err)
			if e.Code != tt.want || e.Message != tt.message || e.Field != tt.field {
				t.Errorf("got %+v; want %s %q field %q", e, tt.want.GraphQL, tt.message, tt.field)
			}
			if e.Fault() && !errors.Is(e, tt.err) {
				t.Errorf("the cause of a fault is not kept for the log: %v", e.Cause)
			}
		})
	}
}

// A row declared but left out of Table would escape every test that walks it, and the tables of
// docs/errors.md: every Code of errcode.go is in Table.
func TestTheTableHoldsEveryRowDeclared(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "errcode.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared, listed := map[string]bool{}, map[string]bool{}
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.VAR {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, value := range vs.Values {
				lit, ok := value.(*ast.CompositeLit)
				switch {
				case !ok:
				case isIdent(lit.Type, "Code"):
					declared[vs.Names[i].Name] = true
				case vs.Names[i].Name == "Table":
					for _, elt := range lit.Elts {
						if id, ok := elt.(*ast.Ident); ok {
							listed[id.Name] = true
						}
					}
				}
			}
		}
	}
	if len(declared) == 0 || len(listed) != len(errcode.Table) {
		t.Fatalf("read %d rows and %d names of Table in errcode.go; Table has %d", len(declared), len(listed), len(errcode.Table))
	}
	for name := range declared {
		if !listed[name] {
			t.Errorf("%s is not in Table", name)
		}
	}
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func TestAVersionConflictTellsTheCurrentVersion(t *testing.T) {
	ext := errcode.Of(&posts.ConflictError{Version: 7}).Extensions()
	if ext["code"] != "VERSION_CONFLICT" || ext["currentVersion"] != int64(7) || len(ext) != 2 {
		t.Errorf("extensions = %v; want the code and currentVersion 7", ext)
	}
	if ext := errcode.Of(posts.ErrNotFound).Extensions(); len(ext) != 1 {
		t.Errorf("extensions of NOT_FOUND = %v; want the code alone", ext)
	}
}
