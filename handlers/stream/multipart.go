// GraphQL subscriptions over Apollo's multipart HTTP protocol (multipart/mixed with
// subscriptionSpec=1.0; Apollo Router's "HTTP callback-free" subscriptions), which Apollo
// Client's HttpLink speaks with no other link: each part a JSON object, the result in its
// payload, an empty object as a heartbeat, and a transport error as a null payload with errors.

package stream

import (
	"encoding/json"
	"time"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/metrics"
)

// Multipart frames a stream as multipart/mixed with the boundary "graphql". A part goes out with
// the boundary after it, since a client reads a part once it sees the next boundary.
type Multipart struct{}

// multipartHeartbeat is how often an idle stream sends {}: the protocol's 5 s.
const multipartHeartbeat = 5 * time.Second

const partStart = "\r\ncontent-type: application/json; charset=utf-8\r\n\r\n"

func (Multipart) name() string { return metrics.Multipart }
func (Multipart) contentType() string {
	return `multipart/mixed;boundary="graphql";subscriptionSpec=1.0`
}
func (Multipart) keepAliveEvery(live.Subscriptions) time.Duration { return multipartHeartbeat }

func (m Multipart) open(b []byte) []byte { return m.keepAlive(append(b, "\r\n--graphql"...)) }

func (Multipart) keepAlive(b []byte) []byte { return append(b, partStart+"{}\r\n--graphql"...) }

func (Multipart) result(b []byte, payload json.RawMessage, _ bool) []byte {
	b = append(b, partStart+`{"payload":`...)
	return append(append(b, payload...), "}\r\n--graphql"...)
}

func (Multipart) complete(b []byte) []byte { return append(b, "--\r\n"...) }

// failed ends the stream with errs: those of the transport as a part with a null payload, the
// operation's as its payload's errors.
func (m Multipart) failed(b []byte, errs []*gqlerrors.QueryError, reconnect bool) []byte {
	part := map[string]any{"payload": map[string]any{"errors": errs}}
	if reconnect {
		part = map[string]any{"payload": nil, "errors": errs}
	}
	b = append(append(b, partStart...), answer.MustJSON(part)...)
	return m.complete(append(b, "\r\n--graphql"...))
}
