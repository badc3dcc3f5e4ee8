// The scalars the resolvers return: ID and Time, each written as JSON exactly as the REST API
// writes it.

package schema

import (
	"errors"
	"fmt"
	"time"

	"github.com/postsedge/caddy-posts/posts"
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

// Time is the Time scalar: RFC 3339 in UTC with milliseconds.
type Time struct{ time.Time }

// ImplementsGraphQLType binds Time to the schema's Time scalar.
func (Time) ImplementsGraphQLType(name string) bool { return name == "Time" }

// UnmarshalGraphQL reads a Time argument.
func (t *Time) UnmarshalGraphQL(input any) error {
	s, ok := input.(string)
	if !ok {
		return fmt.Errorf("a Time is an RFC 3339 string, not %T", input)
	}
	parsed, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("a Time is an RFC 3339 string such as 2026-11-21T04:35:44.036Z")
	}
	t.Time = parsed
	return nil
}

// TimeArg is a Time argument as the client wrote it, which the resolver that takes it reads
// (posts.ParseTime), so that one that is not RFC 3339 is refused as every bad argument of a
// list is, naming it, whether a plan or graphql-go runs the query.
type TimeArg struct{ text string }

// ImplementsGraphQLType binds TimeArg to the schema's Time scalar.
func (TimeArg) ImplementsGraphQLType(name string) bool { return name == "Time" }

// UnmarshalGraphQL keeps a Time argument's text.
func (t *TimeArg) UnmarshalGraphQL(input any) error {
	s, ok := input.(string)
	if !ok {
		return fmt.Errorf("a Time is an RFC 3339 string, not %T", input)
	}
	t.text = s
	return nil
}

// timeArgs reads the since and until arguments of a list or a subscription: the zero time for
// one not given (posts.ParseTime).
func timeArgs(since, until *TimeArg) (from, to time.Time, err error) {
	if since != nil {
		if from, err = posts.ParseTime("since", since.text); err != nil {
			return from, to, err
		}
	}
	if until != nil {
		to, err = posts.ParseTime("until", until.text)
	}
	return from, to, err
}

// MarshalJSON writes a Time as the REST API does.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.UTC().Format(posts.TimeFormat) + `"`), nil
}
