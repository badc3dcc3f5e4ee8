// Package rest serves the REST API: /posts and /posts/{id} (Handler), their JSON (json.go),
// conditional requests (conditional.go) and the creates an Idempotency-Key makes safe to retry
// (idempotency.go). It reads and writes HTTP and leaves every rule to posts.Service.
package rest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/request"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// Handler serves /posts and /posts/{id}.
type Handler struct {
	// Posts applies the rules, and decides who may do what (Allow).
	Posts *posts.Service
	// Auth finds the caller of each request.
	Auth *auth.Authenticator
	// MaxBodySize is the largest request body read, in bytes.
	MaxBodySize int64
	// MaxResponseSize is the largest page written, in bytes: a page of posts ends early rather
	// than grow past it.
	MaxResponseSize int64
	// Identified, if set, is told the caller of every authenticated request before it is served.
	Identified func(*http.Request, auth.Identity)
	// Answer writes failures.
	Answer *answer.Failer
	// Vary is the Vary of the answers.
	Vary answer.Varies
	// CORS lets the allowed origins' pages read the answers.
	CORS *answer.CORS
	// ServeChanges, if set, serves GET /posts to a client that asks for text/event-stream: the
	// changes of the list it would read, as they are stored (handlers/stream's ServeChanges).
	ServeChanges func(w http.ResponseWriter, r *http.Request, caller auth.Identity, c schema.ChangeFilter)
}

// Collection serves /posts, observed in the metrics.
func (h *Handler) Collection() http.Handler {
	return answer.Observed(metrics.REST, "", h.endpoint("/posts", methods{http.MethodGet: h.list, http.MethodPost: h.create}))
}

// Item serves /posts/{id}, observed in the metrics.
func (h *Handler) Item() http.Handler {
	return answer.Observed(metrics.REST, "", h.endpoint("/posts/{id}", methods{http.MethodGet: h.get, http.MethodPatch: h.update, http.MethodDelete: h.delete}))
}

// NoRoute serves the paths under /posts/ that name no resource, observed in the metrics.
func (h *Handler) NoRoute() http.Handler {
	return answer.Observed(metrics.REST, "other", h.serveNoRoute)
}

// listParams are the query parameters of GET /posts; a change stream takes lastEventID too.
var listParams = []string{"userId", "q", "since", "until", "sort", "limit", "after"}

// lastEventID is the query parameter of the cursor a change stream resumes after, for a client
// that cannot send Last-Event-ID (a browser's EventSource, before it has received an event).
const lastEventID = "lastEventID"

// The values of sort: newest first (the default) or oldest first.
const (
	newestFirst = "-createdAt"
	oldestFirst = "createdAt"
)

// list serves GET /posts: a page of posts, newest first unless sort says otherwise, with a Link
// to the next page.
func (h *Handler) list(w http.ResponseWriter, r *http.Request) error {
	changes := h.ServeChanges != nil && WantsChanges(r)
	values, q, err := h.listQuery(r.URL.RawQuery, changes)
	if err != nil {
		return err
	}
	if changes {
		if _, _, err := posts.TimeRange(q.Since, q.Until); err != nil { // which List checks for a list
			return answer.BadRequest("%v", err)
		}
		if len(r.Header.Values("Last-Event-ID")) > 1 { // as a parameter given twice is
			return answer.BadRequest("Last-Event-ID is given more than once")
		}
		h.ServeChanges(w, r, auth.FromContext(r.Context()), schema.ChangeFilter{UserID: q.UserID, Search: values.Get("q"),
			Since: values.Get("since"), Until: values.Get("until"), ResumeFrom: cmp.Or(r.Header.Get("Last-Event-ID"), values.Get(lastEventID))})
		return nil
	}
	ctx, seen := h.Posts.WithSeen(r.Context())
	page, err := h.Posts.List(ctx, q)
	if errors.Is(err, posts.ErrInvalid) {
		return answer.BadRequest("%v", err) // a bad query parameter, not a bad entity
	}
	if err != nil {
		return err
	}
	h.setCursor(ctx, w, seen)
	// A page ends early rather than grow past MaxResponseSize; its Link then resumes after the
	// last post sent, so that a client following Links still gets every post once.
	n, next := pageFits(page.Posts, h.MaxResponseSize), page.Next
	if n < len(page.Posts) {
		next = page.Cursor(page.Posts[n-1])
	}
	if next != "" {
		w.Header().Set("Link", nextLink(values, next))
	}
	writePage(w, http.StatusOK, page.Posts[:n])
	return nil
}

// setCursor sets the Posts-Cursor header of w to the cursor of the position of the event log
// that the reads of seen reflect, from which a subscription resumes with every change after
// them (docs/subscriptions.md).
func (h *Handler) setCursor(ctx context.Context, w http.ResponseWriter, seen *posts.Seen) {
	if c := h.Posts.ReadCursor(ctx, seen); c != "" {
		w.Header().Set(answer.CursorHeader, c)
	}
}

// nextLink is the Link header to the page that starts after the cursor after, of the list that
// values, the query parameters of a page, name.
func nextLink(values url.Values, after string) string {
	next := url.Values{"after": {after}}
	for name, vs := range values {
		if name != "after" {
			next[name] = vs
		}
	}
	return fmt.Sprintf(`</posts?%s>; rel="next"`, next.Encode())
}

// WantsChanges says whether r, a request of /posts, asks for the change stream: a GET (or HEAD)
// whose Accept takes text/event-stream more gladly than application/json (EventSource's own).
func WantsChanges(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	ranges := request.MediaRanges(r.Header.Get("Accept"))
	events := request.Quality(ranges, "text/event-stream")
	return events > 0 && events > request.Quality(ranges, answer.ApplicationJSON)
}

// listQuery reads the query string of GET /posts, or of its change stream, refusing unknown,
// repeated or malformed parameters rather than ignoring them, each with a message naming it. A
// change stream takes a list's paging and order (limit, after, sort) too, so that a client
// streams from the URL it read, and ignores them.
func (h *Handler) listQuery(raw string, changes bool) (values url.Values, q posts.ListQuery, err error) {
	values, err = url.ParseQuery(raw)
	if err != nil {
		return nil, q, answer.BadRequest("the query string is malformed")
	}
	params := listParams
	if changes {
		params = append(slices.Clip(params), lastEventID)
	}
	for name, vs := range values {
		switch {
		case name == lastEventID && !changes:
			return nil, q, answer.BadRequest("query parameter %q resumes a change stream: send it with Accept: text/event-stream", name)
		case !slices.Contains(params, name):
			return nil, q, answer.BadRequest("unknown query parameter %q; allowed: %s", name, strings.Join(params, ", "))
		case len(vs) > 1:
			return nil, q, answer.BadRequest("query parameter %q is given more than once", name)
		case vs[0] == "":
			return nil, q, answer.BadRequest("query parameter %q is empty", name)
		}
	}
	q.UserID, q.After = values.Get("userId"), values.Get("after")
	if s := values.Get("limit"); s != "" {
		if q.Limit, err = strconv.Atoi(s); err != nil || q.Limit == 0 {
			return nil, q, answer.BadRequest("limit must be a whole number of posts, at least 1")
		}
	}
	if s := values.Get("q"); s != "" {
		if q.Search, err = h.Posts.ParseSearch("q", s); err != nil {
			return nil, q, answer.BadRequest("%v", err)
		}
	}
	for _, t := range []struct {
		name string
		into *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := values.Get(t.name); s != "" {
			if *t.into, err = posts.ParseTime(t.name, s); err != nil {
				return nil, q, answer.BadRequest("%v", err)
			}
		}
	}
	switch values.Get("sort") {
	case "", newestFirst:
	case oldestFirst:
		q.Oldest = true
	default:
		return nil, q, answer.BadRequest("sort must be %s (newest first, the default) or %s (oldest first)", newestFirst, oldestFirst)
	}
	return values, q, nil
}

// get serves GET /posts/{id}: the post with its validators, or 304 Not Modified when the
// client's copy is current (If-None-Match, If-Modified-Since).
func (h *Handler) get(w http.ResponseWriter, r *http.Request) error {
	pre, err := readPreconditions(r)
	if err != nil {
		return err
	}
	ctx, seen := h.Posts.WithSeen(r.Context())
	post, err := h.Posts.Get(ctx, postID(r))
	if err != nil {
		return err
	}
	h.setCursor(ctx, w, seen)
	status := pre.read(post)
	if status == http.StatusPreconditionFailed {
		return preconditionFailed(post)
	}
	setValidators(w.Header(), post)
	if status == http.StatusNotModified {
		w.WriteHeader(status)
		return nil
	}
	writePost(w, http.StatusOK, post)
	return nil
}

// create serves POST /posts: the post is the caller's, whatever the body says.
func (h *Handler) create(w http.ResponseWriter, r *http.Request) error {
	caller := auth.FromContext(r.Context())
	key, keyed, err := request.IdempotencyKey(r)
	if err != nil {
		return err
	}
	members, err := request.Object(w, r, h.MaxBodySize, "application/json")
	if err != nil {
		return err
	}
	in, err := newPost(members)
	if err != nil {
		return err
	}
	if keyed {
		return h.createOnce(w, r, caller, in, key)
	}
	post, err := h.Posts.Create(r.Context(), caller, in)
	if err != nil {
		return err
	}
	writeCreated(w, post)
	return nil
}

// writeCreated writes the answer to a post created: createOnce keeps it as it is written.
func writeCreated(w http.ResponseWriter, post posts.Post) {
	w.Header().Set("Location", "/posts/"+post.ID)
	setValidators(w.Header(), post)
	writePost(w, http.StatusCreated, post)
}

// update serves PATCH /posts/{id} with a JSON merge patch of title and body, if the post meets
// the request's preconditions (If-Match).
func (h *Handler) update(w http.ResponseWriter, r *http.Request) error {
	caller := auth.FromContext(r.Context())
	pre, err := readPreconditions(r)
	if err != nil {
		return err
	}
	members, err := request.Object(w, r, h.MaxBodySize, "application/json", "application/merge-patch+json")
	if err != nil {
		return err
	}
	ch, err := changes(members)
	if err != nil {
		return err
	}
	post, err := h.Posts.Update(r.Context(), caller, postID(r), ch, pre.expect())
	if err != nil {
		return err
	}
	setValidators(w.Header(), post)
	writePost(w, http.StatusOK, post)
	return nil
}

// delete serves DELETE /posts/{id}, if the post meets the request's preconditions (If-Match).
func (h *Handler) delete(w http.ResponseWriter, r *http.Request) error {
	pre, err := readPreconditions(r)
	if err != nil {
		return err
	}
	if err := h.Posts.Delete(r.Context(), auth.FromContext(r.Context()), postID(r), pre.expect()); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// serveNoRoute serves the paths under /posts/ that name no resource (/posts/, /posts/{id}/,
// /posts/a/b): they are the API's to answer, with a 404 in its shape, whatever the method.
func (h *Handler) serveNoRoute(w http.ResponseWriter, r *http.Request) {
	answer.SetVaryOrigin(w)
	h.CORS.Allow(w, r)
	h.Answer.Fail(w, r, errcode.New(errcode.NoSuchPath, "no such path: posts are at /posts and /posts/{id}"))
}
