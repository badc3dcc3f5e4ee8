// The media types of GraphQL over HTTP: what the Accept header asks for (JSON in the spec's own
// type or application/json, a stream, or GraphiQL's HTML), read once per request.

package graphqlhttp

import (
	"mime"
	"strconv"
	"strings"

	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/stream"
)

// StreamRequested is the framing an Accept header asks for, or nil for none: of the media
// ranges text/event-stream and multipart/mixed;subscriptionSpec=1.0 (Apollo's protocol, the one
// version of it served), the one with the higher weight, the first listed of two alike. A
// multipart/mixed of another subscriptionSpec, or of none, asks for no stream: alone, it is
// answered 406 (Handler.ServeHTTP).
func StreamRequested(accept string) stream.Framing {
	var f stream.Framing
	best := 0.0
	for _, r := range mediaRanges(accept) {
		var this stream.Framing
		switch {
		case r.name == "text/event-stream":
			this = stream.SSE{}
		case r.name == "multipart/mixed" && r.params["subscriptionspec"] == "1.0":
			this = stream.Multipart{}
		default:
			continue
		}
		if r.q > best {
			f, best = this, r.q
		}
	}
	return f
}

// acceptance is what an Accept header says of the media types /graphql answers with, read once
// per request.
type acceptance struct {
	given             bool    // the request has an Accept header
	own, legacy, html float64 // the q of graphQLResponseJSON, applicationJSON and text/html
}

// mediaRange is one media range of an Accept header, with its parameters and its q.
type mediaRange struct {
	name   string            // lower case, as mime.ParseMediaType gives it
	params map[string]string // their names in lower case, their values unquoted
	q      float64
}

// mediaRanges reads an Accept header: each element parsed by mime.ParseMediaType, one it
// cannot parse left out (a duplicated parameter, a value no token and no quoted string), and a
// q that is no weight (not 0 to 1) read as 0, not acceptable.
func mediaRanges(header string) []mediaRange {
	var ranges []mediaRange
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
		ranges = append(ranges, mediaRange{name, params, q})
	}
	return ranges
}

func accepting(header string) acceptance {
	ranges := mediaRanges(header)
	return acceptance{
		given:  strings.TrimSpace(header) != "",
		own:    quality(ranges, answer.GraphQLResponseJSON),
		legacy: quality(ranges, answer.ApplicationJSON),
		html:   quality(ranges, "text/html"),
	}
}

// responseType is the media type of the response the Accept header asks for: the spec's own
// when the client takes it at least as gladly as application/json (or says nothing), else
// application/json, else "" (406).
func (a acceptance) responseType() string {
	switch {
	case !a.given || a.own > 0 && a.own >= a.legacy:
		return answer.GraphQLResponseJSON
	case a.legacy > 0:
		return answer.ApplicationJSON
	}
	return ""
}

// prefersHTML says whether the client (a browser) takes text/html more gladly than JSON.
func (a acceptance) prefersHTML() bool {
	return a.html > 0 && a.html > max(a.own, a.legacy)
}

// quality is the q that ranges give media, from the most specific range that matches it (RFC
// 9110 §12.5.1); 0 when none matches.
func quality(ranges []mediaRange, media string) float64 {
	typ, _, _ := strings.Cut(media, "/")
	best, q := -1, 0.0
	for _, r := range ranges {
		specificity := -1
		switch r.name {
		case media:
			specificity = 2
		case typ + "/*":
			specificity = 1
		case "*/*":
			specificity = 0
		}
		if specificity > best {
			best, q = specificity, r.q
		}
	}
	return q
}
