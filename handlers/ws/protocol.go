// The subprotocols a client may speak and how each names its messages; message.go reads and
// writes the messages themselves.

package ws

import (
	"net/http"
	"strings"
)

// The subprotocols: graphql-ws's protocol, and the older one of subscriptions-transport-ws.
const (
	transportWS = "graphql-transport-ws"
	legacyWS    = "graphql-ws"
)

// protocol names the messages of one subprotocol, by what they do.
type protocol struct {
	subscribe, stop, next, complete, connectionError string
	pings                                            bool // ping and pong messages (graphql-transport-ws)
	keepAlive                                        string
}

var protocols = map[string]protocol{
	transportWS: {subscribe: "subscribe", stop: "complete", next: "next", complete: "complete", pings: true},
	legacyWS:    {subscribe: "start", stop: "stop", next: "data", complete: "complete", connectionError: "connection_error", keepAlive: "ka"},
}

// websocketProtocols are the subprotocols r offers.
func websocketProtocols(r *http.Request) []string {
	var out []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(h, ",") {
			out = append(out, strings.TrimSpace(p))
		}
	}
	return out
}
