// The media types of GraphQL over HTTP: what the Accept header asks for (JSON in the spec's own
// type or application/json, a stream, or GraphiQL's HTML), read once per request.

package graphqlhttp

import (
	"strings"

	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/request"
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
	for _, r := range request.MediaRanges(accept) {
		var this stream.Framing
		switch {
		case r.Name == "text/event-stream":
			this = stream.SSE{}
		case r.Name == "multipart/mixed" && r.Params["subscriptionspec"] == "1.0":
			this = stream.Multipart{}
		default:
			continue
		}
		if r.Q > best {
			f, best = this, r.Q
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

func accepting(header string) acceptance {
	ranges := request.MediaRanges(header)
	return acceptance{
		given:  strings.TrimSpace(header) != "",
		own:    request.Quality(ranges, answer.GraphQLResponseJSON),
		legacy: request.Quality(ranges, answer.ApplicationJSON),
		html:   request.Quality(ranges, "text/html"),
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
