// The change stream of the posts: REST's GET /posts asked for as text/event-stream, the list's
// changes as they are stored, for clients without GraphQL (a browser's EventSource, curl). It
// runs the three subscriptions of schema.ChangesOf on one stream, so that it is let in, counted,
// fed, resumed and ended as a GraphQL stream is, and frames their responses as REST's events.

package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// Changes frames a change stream as text/event-stream: each event as `event: created`,
// `updated` or `deleted`, its cursor as its id (from which EventSource resumes, with
// Last-Event-ID), and its post as data, the JSON of GET /posts/{id} (of a delete, {"id": …}).
// What the stream cannot send is a refused event, {"error": …}: not an `error` event, which a
// browser's EventSource hands to its onerror, the handler of a lost connection.
type Changes struct{}

func (Changes) name() string                                        { return metrics.SSE }
func (Changes) contentType() string                                 { return SSE{}.contentType() }
func (Changes) keepAliveEvery(cfg live.Subscriptions) time.Duration { return SSE{}.keepAliveEvery(cfg) }
func (Changes) open(b []byte) []byte                                { return SSE{}.open(b) }
func (Changes) keepAlive(b []byte) []byte                           { return SSE{}.keepAlive(b) }

// result is one change. An event whose post the stream cannot send (larger than
// max_response_size) is a refused event with its id, so that a client resumes past it.
func (Changes) result(b []byte, payload json.RawMessage, _ bool) []byte {
	if cursor := schema.CursorOf(payload); cursor != "" {
		b = append(append(append(b, "id: "...), cursor...), '\n')
	}
	kind, post, ok := schema.ChangeOf(payload)
	if !ok {
		var res struct{ Errors []*gqlerrors.QueryError }
		if json.Unmarshal(payload, &res) != nil || len(res.Errors) == 0 {
			res.Errors = []*gqlerrors.QueryError{{Message: errcode.InternalMessage}}
		}
		return changeRefused(b, res.Errors[0].Message)
	}
	b = append(append(append(b, "event: "...), kind...), "\ndata: "...)
	return append(append(b, post...), "\n\n"...)
}

// complete ends the response: a change stream has no end of its own to tell.
func (Changes) complete(b []byte) []byte { return b }

// failed tells why the stream ends in a refused event, unless the client is to reconnect and
// resume by itself (too slow, a restart): then it ends without a word, as SSE does. A client
// that reconnects after a refused event is answered its refusal with a status, on which
// EventSource stops.
func (Changes) failed(b []byte, errs []*gqlerrors.QueryError, reconnect bool) []byte {
	if reconnect || len(errs) == 0 {
		return b
	}
	return changeRefused(b, errs[0].Message)
}

// changeRefused appends a refused event whose data is REST's error JSON, {"error": message}.
func changeRefused(b []byte, message string) []byte {
	b = append(b, "event: refused\ndata: "...)
	return append(append(b, answer.MustJSON(map[string]string{"error": message})...), "\n\n"...)
}

// ServeChanges serves c, the changes of a list of posts, as a stream to caller, whose request a
// REST handler has let in (credentials, parameters). It is refused as a GraphQL subscription
// would be (origin, subscriptions_require_auth, shares), and a resume that the replay would
// refuse is refused here, before the stream starts (refuseChanges). Its three subscriptions
// start together: from the client's cursor, or from the last position handed.
func (h *Handler) ServeChanges(w http.ResponseWriter, r *http.Request, caller auth.Identity, c schema.ChangeFilter) {
	fail := func(err error) { h.refuseChanges(w, r, err) }
	if !answer.OriginAllowed(r, h.Config.Subscriptions.OriginPatterns) {
		fail(errcode.New(errcode.Forbidden, "the Origin of this request is not allowed to subscribe (allowed_origins)"))
		return
	}
	if err := h.Config.Posts.Allow(caller, posts.Subscribe); err != nil {
		fail(err)
		return
	}
	var err error
	if c.ResumeFrom != "" {
		err = h.Config.GraphQL.Resumable(r.Context(), c.ResumeFrom)
	} else {
		c.ResumeFrom, err = h.Config.Posts.HandedCursor(r.Context())
	}
	if err != nil {
		fail(restRefusal(err))
		return
	}
	h.serve(w, r, Changes{}, fail, caller, h.Config.GraphQL.ChangesOf(c))
}

// refuseChanges answers err, which refuses a change stream before it starts, as REST's error
// with its status, on which EventSource stops; but one that a retry may lift (503: the store did
// not answer, the server is full; 429: the client holds its share) as a stream of one refused
// event after a `retry:` of its Retry-After, which EventSource waits before it reconnects (it
// takes any other status for the end).
func (h *Handler) refuseChanges(w http.ResponseWriter, r *http.Request, err error) {
	e := h.Answer.Problem(w, r, err)
	if status := e.Code.Status; status != http.StatusServiceUnavailable && status != http.StatusTooManyRequests {
		answer.WriteJSON(w, status, map[string]string{"error": e.Message})
		return
	}
	if x := answer.ExchangeOf(w); x != nil {
		x.Interface, x.Code = metrics.SSE, e.Code.GraphQL
	}
	seconds, err := strconv.Atoi(w.Header().Get("Retry-After"))
	if err != nil {
		seconds, _ = strconv.Atoi(answer.RetryAfter)
	}
	startStream(w, Changes{})
	_, _ = w.Write(changeRefused(fmt.Appendf(Changes{}.open(nil), "retry: %d\n\n", seconds*1000), e.Message))
}

// restRefusal is the refusal of a change stream's resume that err refused, in REST's words.
func restRefusal(err error) error {
	const again = "read the list again (GET /posts), then stream from its Posts-Cursor"
	if _, ok := errors.AsType[*posts.InvalidError](err); ok {
		return answer.BadRequest("Last-Event-ID (or lastEventID) is not a cursor of this server's event log: send the Posts-Cursor of a read, or the id of the last event received, as it came")
	}
	switch errcode.Of(err).Code {
	case errcode.CursorExpired:
		return errcode.New(errcode.CursorExpired, "the events after this cursor are no longer kept: "+again)
	case errcode.ResumeTooLong:
		return errcode.New(errcode.ResumeTooLong, "the cursor is more events of the log behind than max_resume_events allows replaying: "+again)
	}
	return err
}
