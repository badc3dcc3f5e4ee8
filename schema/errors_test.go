package schema_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/schema"
)

func TestErrorsAreCutAfterMaxErrors(t *testing.T) {
	for _, n := range []int{schema.MaxErrors, schema.MaxErrors + 1, 1000} {
		t.Run(strconv.Itoa(n)+" errors", func(t *testing.T) {
			st := newStore(t)
			s := newSchemaOver(t, st, 1000, limitsWith(func(l *schema.Limits) { l.MaxCost = schema.MaxMaxCost }))
			insert(t, st, n, "alice", nil)
			// Each post's author lists posts with a limit out of range: one error per post, and
			// the author is null (User.posts is non-null).
			res := s.Do(t.Context(), schema.Request{Query: fmt.Sprintf(`{ posts(limit: %d) { author { posts(limit: 0) { id } } } }`, n)})
			want := min(n, schema.MaxErrors+1)
			if len(res.Errors) != want {
				t.Fatalf("%d errors; want %d", len(res.Errors), want)
			}
			for _, e := range res.Errors[:min(n, schema.MaxErrors)] {
				if e.Extensions["code"] != errcode.BadUserInput.GraphQL {
					t.Fatalf("error %v", e)
				}
			}
			if n > schema.MaxErrors {
				last := res.Errors[schema.MaxErrors]
				if msg := fmt.Sprintf("Too many errors, error limit reached: %d more were left out.", n-schema.MaxErrors); last.Message != msg || last.Extensions["code"] != errcode.TooManyErrors.GraphQL {
					t.Errorf("last error %q %v; want %q", last.Message, last.Extensions, msg)
				}
			}
			if !json.Valid(res.Data) || strings.Count(string(res.Data), `{"author":null}`) != n {
				t.Errorf("data %.300s", res.Data)
			}
		})
	}
}

func TestCapErrors(t *testing.T) {
	for _, n := range []int{0, 1, schema.MaxErrors - 1, schema.MaxErrors, schema.MaxErrors + 1, 1000} {
		errs := make([]*gqlerrors.QueryError, n)
		for i := range errs {
			errs[i] = &gqlerrors.QueryError{Message: "e"}
		}
		got := schema.CapErrors(errs)
		switch {
		case n <= schema.MaxErrors && len(got) != n:
			t.Errorf("%d errors became %d", n, len(got))
		case n > schema.MaxErrors && (len(got) != schema.MaxErrors+1 || got[schema.MaxErrors].Message != "Too many errors, error limit reached: "+strconv.Itoa(n-schema.MaxErrors)+" more were left out."):
			t.Errorf("%d errors became %d, the last %q", n, len(got), got[len(got)-1].Message)
		}
	}
}
