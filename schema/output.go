package schema

import (
	"errors"
	"fmt"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"
)

// ID is the ID scalar as the resolvers return it. graphql.ID quotes itself with
// strconv.Quote, whose escapes (\x01, \a, invalid UTF-8 as \xff) are not JSON: graphql-go then
// panics and leaves the field half written, so a stored id holding a control character broke
// the whole response. ID has no MarshalJSON: encoding/json writes it as any other string.
type ID string

// ImplementsGraphQLType binds ID to the ID scalar.
func (ID) ImplementsGraphQLType(name string) bool { return name == "ID" }

// UnmarshalGraphQL reads an ID argument, as graphql.ID does.
func (id *ID) UnmarshalGraphQL(input any) error {
	switch input := input.(type) {
	case string:
		*id = ID(input)
	case int32:
		*id = ID(fmt.Sprint(input))
	default:
		return errors.New("an ID is a string or a whole number")
	}
	return nil
}

// MaxErrors is the most errors of a response; past it, one more error says how many more
// there were, as graphql-js ends validation ("Too many validation errors, error limit
// reached").
const MaxErrors = 100

// capErrors keeps the first MaxErrors of errs and one more error that says how many were left
// out. The last error has no extensions: the caller gives it the code of the response.
func capErrors(errs []*gqlerrors.QueryError) []*gqlerrors.QueryError {
	if len(errs) <= MaxErrors {
		return errs
	}
	cut := len(errs) - MaxErrors
	errs = append(errs[:MaxErrors:MaxErrors], &gqlerrors.QueryError{
		Message: fmt.Sprintf("Too many errors, error limit reached: %d more were left out.", cut),
	})
	return errs
}
