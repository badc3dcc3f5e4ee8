// What an Accept header asks for, read for GraphQL over HTTP (handlers/graphqlhttp) and REST's
// change stream (handlers/rest).

package request

import (
	"mime"
	"strconv"
	"strings"
)

// MediaRange is one media range of an Accept header, with its parameters and its q.
type MediaRange struct {
	Name   string            // lower case, as mime.ParseMediaType gives it
	Params map[string]string // their names in lower case, their values unquoted
	Q      float64
}

// MediaRanges reads an Accept header: each element parsed by mime.ParseMediaType, one it
// cannot parse left out (a duplicated parameter, a value no token and no quoted string), and a
// q that is no weight (not 0 to 1) read as 0, not acceptable.
func MediaRanges(header string) []MediaRange {
	var ranges []MediaRange
	for item := range strings.SplitSeq(header, ",") {
		name, params, err := mime.ParseMediaType(strings.TrimSpace(item))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f <= 1 {
				q = f
			} else {
				q = 0
			}
		}
		ranges = append(ranges, MediaRange{name, params, q})
	}
	return ranges
}

// Quality is the q that ranges give media, from the most specific range that matches it (RFC
// 9110 §12.5.1); 0 when none matches.
func Quality(ranges []MediaRange, media string) float64 {
	typ, _, _ := strings.Cut(media, "/")
	best, q := -1, 0.0
	for _, r := range ranges {
		specificity := -1
		switch r.Name {
		case media:
			specificity = 2
		case typ + "/*":
			specificity = 1
		case "*/*":
			specificity = 0
		}
		if specificity > best {
			best, q = specificity, r.Q
		}
	}
	return q
}
