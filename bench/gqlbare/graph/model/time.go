package model

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
)

// timeFormat is caddy-posts' Time: RFC 3339 with milliseconds, always three digits.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// MarshalTime writes t as the Time scalar, in UTC.
func MarshalTime(t time.Time) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		b := make([]byte, 0, len(timeFormat)+2)
		b = append(b, '"')
		b = t.UTC().AppendFormat(b, timeFormat)
		b = append(b, '"')
		w.Write(b)
	})
}

// UnmarshalTime reads a Time scalar; the schema takes none as input, but gqlgen's binding wants
// both directions.
func UnmarshalTime(v any) (time.Time, error) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, fmt.Errorf("a Time is a string, not %s", strconv.Quote(fmt.Sprint(v)))
	}
	return time.Parse(time.RFC3339Nano, s)
}
