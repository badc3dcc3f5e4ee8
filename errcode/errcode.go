// Package errcode is the one table of what the service's errors look like to a client: for each
// kind of error, the HTTP status that answers it, the extensions.code of a GraphQL error, and the
// close code of a WebSocket connection it ends. Handlers and resolvers turn an error into its row
// with Of; no other package decides a status or a code.
package errcode

import (
	"errors"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/posts"
)

// Code is one row of the table. A zero field means the interface never shows that kind of error.
type Code struct {
	// GraphQL is the extensions.code of a GraphQL error of this kind. Every row with a Status
	// has one but NoSuchPath, which REST's router alone answers: a GraphQL request refused with
	// the row gets it (handlers/answer/errors_test.go holds each row to it).
	GraphQL string
	// Status is the HTTP status of an answer that is this error: a REST answer, and a GraphQL
	// answer over HTTP refused before it ran (400 stands for "400, or 200 in application/json",
	// the status older GraphQL clients read, but for persisted queries, whose status is the same
	// in both).
	Status int
	// Close is the close code of a WebSocket connection that this error ends. An error with no
	// close code answers one operation, and the connection stays open.
	Close int
	// When says when a client gets it, in Markdown. It is the one place that says so:
	// docs/errors.md's tables are generated from it (errcode/docs_test.go).
	When string
}

// The table: every error the service returns. The GraphQL codes of execution errors follow Apollo
// Server, the limits Apollo Router, and the close codes graphql-ws (4400-4500) and RFC 6455.
var (
	// Request shape.

	BadRequest           = Code{"BAD_REQUEST", 400, 4400, "a malformed request or message: a body that is not JSON, not one object, or has a member twice or of the wrong type; a bad query parameter; an `If-Match` or `If-None-Match` that is neither `*` nor a list of entity tags; a GraphQL request without `query`, or whose `variables` is not an object; a WebSocket message that is not JSON, is binary or of no known type, or a `subscribe` without an id or a request"}
	InvalidText          = Code{"BAD_REQUEST", 400, 1007, "text that is not UTF-8, or holds half of a surrogate pair"}
	NoSuchPath           = Code{"", 404, 0, "a path under `/posts/` that names no post"}
	MethodNotAllowed     = Code{"BAD_REQUEST", 405, 0, "a method the path does not take, with an `Allow` header of those it does; a mutation sent with `GET` (`Allow: POST`)"}
	NotAcceptable        = Code{"BAD_REQUEST", 406, 0, "a GraphQL request whose `Accept` takes neither of its response media types"}
	PayloadTooLarge      = Code{"BAD_REQUEST", 413, 1009, "a body larger than `max_body_size`, or a WebSocket message larger than `ws_read_limit`"}
	UnsupportedMediaType = Code{"BAD_REQUEST", 415, 0, "a body that is not `application/json` (or `application/graphql-response+json`): a form or `text/plain` body too, so that no cross-site form or simple `fetch` runs a GraphQL operation"}

	// GraphQL documents, refused before they run.

	ParseFailed      = Code{"GRAPHQL_PARSE_FAILED", 400, 0, "a GraphQL syntax error"}
	ValidationFailed = Code{"GRAPHQL_VALIDATION_FAILED", 400, 0, "a document that is not valid against the schema (an unknown field, a literal of the wrong kind), past `max_query_length`, `max_depth` or `max_cost`, or asking for `__schema` or `__type` with `introspection off`"}
	MaxAliases       = Code{"MAX_ALIASES_LIMIT", 400, 0, "more aliased fields than `max_aliases`"}
	MaxRootFields    = Code{"MAX_ROOT_FIELDS_LIMIT", 400, 0, "more root fields than `max_root_fields`"}
	MaxFields        = Code{"MAX_FIELDS_LIMIT", 400, 0, "more fields in the document than `max_fields`"}

	// Persisted queries.

	// PersistedQueryNotFound is answered with 200, as Apollo Server answers it and its clients
	// expect: they send the query with the hash then.
	PersistedQueryNotFound     = Code{"PERSISTED_QUERY_NOT_FOUND", 200, 0, "an automatic persisted query's hash without the query, of a document the server does not hold (yet): answered with 200, as Apollo Server does, and the client sends the query with the hash next"}
	PersistedQueryHashMismatch = Code{"PERSISTED_QUERY_HASH_MISMATCH", 400, 0, "a persisted query's `sha256Hash` that is not the SHA-256 of its `query` (`provided sha does not match query`)"}
	PersistedQueryNotInList    = Code{"PERSISTED_QUERY_NOT_IN_LIST", 404, 0, "with `persisted_queries_only`, a hash that is no operation's of the manifest"}
	QueryNotInSafelist         = Code{"QUERY_NOT_IN_SAFELIST", 403, 0, "with `persisted_queries_only`, a query that is no operation of the manifest"}

	// Credentials and rules.

	BadUserInput           = Code{"BAD_USER_INPUT", 422, 0, "input that breaks a rule of posts, `extensions.field` naming the member: a missing, blank or too long title, a too long body, `title: null`, an empty PATCH, an unknown or server-owned member, an argument out of range"}
	Unauthenticated        = Code{"UNAUTHENTICATED", 401, 4403, "a write (or, with `subscriptions_require_auth`, a WebSocket) without credentials: `WWW-Authenticate: Bearer realm=\"posts\"`"}
	InvalidCredentials     = Code{"UNAUTHENTICATED", 401, 4403, "credentials that are present but not accepted (`error=\"invalid_token\"`): an unknown API key; a token that is malformed, badly signed, signed with an algorithm not accepted (never `none` nor HMAC), expired, not yet valid, issued in the future, for another issuer or audience, without `exp` or the user claim, or whose `kid` is in no key set; a WebSocket's token that expires while it is open"}
	MalformedCredentials   = Code{"BAD_REQUEST", 400, 4403, "credentials given in a malformed way (`error=\"invalid_request\"`): `Authorization: Bearer` without a token or with characters no token has, two bearer tokens, the key header twice or empty, credentials that name different users, an API key in `X-API-Key` alone where `api_key_header` names no header (send it as `Authorization: ApiKey <key>`); in `connection_init`, one that is not a string or is named twice in any case (`authorization` and `Authorization`)"}
	Forbidden              = Code{"FORBIDDEN", 403, 0, "a write to another user's post"}
	NotFound               = Code{"NOT_FOUND", 404, 0, "no post has the id (a query's `post(id)` is `null` instead)"}
	VersionConflict        = Code{"VERSION_CONFLICT", 412, 0, "a write whose `If-Match` (or `If-Unmodified-Since`, `If-None-Match`) or `expectedVersion` the post does not meet: it changed since; nothing was written; the message, and `extensions.currentVersion`, give its version"}
	TooManyConnections     = Code{"TOO_MANY_CONNECTIONS", 429, 4429, "a client that holds `max_connections_per_user` WebSockets and HTTP streams: 429 with `Retry-After` before the upgrade, 4429 when `connection_init` names a user at the cap"}
	TooManyInitialisations = Code{"", 0, 4429, "a second `connection_init`"}

	// Limits of one answer and of shared resources.

	ResponseTooLarge     = Code{"RESPONSE_TOO_LARGE", 0, 0, "an operation whose result would grow past `max_response_size`: it stops, `data: null`; a subscription's event likewise, and the subscription goes on"}
	TooManyErrors        = Code{"TOO_MANY_ERRORS", 0, 0, "the error that ends a list of more than 100 errors of an operation that ran: the rest were cut"}
	TooManyOperations    = Code{"BAD_REQUEST", 0, 0, "an operation past `max_subscriptions` on one WebSocket connection"}
	TooManySubscriptions = Code{"TOO_MANY_SUBSCRIPTIONS", 429, 0, "a client past `max_distinct_subscriptions_per_client` (over HTTP, a stream refused before it starts)"}
	ServerFull           = Code{"UNAVAILABLE", 503, 0, "a server at `max_connections` or `max_distinct_subscriptions`, or closing; `Retry-After` says when to retry"}
	Unavailable          = Code{"UNAVAILABLE", 503, 1013, "a store that does not answer within `timeout` (at once while it is known down), or a token before the key sets are first fetched (over a WebSocket, in `connection_init`); nothing is reported as done; `Retry-After` says when to retry"}
	SearchIndexing       = Code{"SEARCH_INDEX_BUILDING", 503, 0, "a search (`q`, `search`) of a MongoDB store still building the search index of the posts stored before it had one, at its first use by this release: nothing is read, as the answer would miss some posts; lists without a search are served; `Retry-After` says when to retry"}
	// CursorExpired and ResumeTooLong are 410 Gone over HTTP, as Kubernetes answers a watch
	// from a resourceVersion it no longer keeps: what the client would resume from is gone for
	// good, and no retry brings it back (REST's change stream is refused with them before it
	// starts; a GraphQL stream's refusal comes as an event of the stream).
	CursorExpired    = Code{"CURSOR_EXPIRED", 410, 0, "a subscription's `resumeFrom` (or a change stream's `Last-Event-ID` or `lastEventID`) whose next events the log no longer keeps (`events_ttl`, `events_max`), or past the log's last position (a store restored from an older backup): nothing is replayed; fetch again, then subscribe without it, or from the read's cursor"}
	ResumeTooLong    = Code{"RESUME_TOO_LONG", 410, 0, "a subscription's `resumeFrom` (or a change stream's `Last-Event-ID` or `lastEventID`) more than `max_resume_events` events of the log behind: nothing is replayed; fetch again, then subscribe without it, or from the read's cursor"}
	TooSlow          = Code{"TOO_SLOW", 0, 1013, "a client that reads its WebSocket or HTTP stream too slowly (other clients are not held back): cut off at once, its connection or HTTP/2 stream closed with no last word, which it would not read (the server logs the code); or a subscription that fell behind the events further back than the event log keeps (one that falls behind a burst of writes reads what it missed from the log, and goes on): the stream ends, over SSE with no word so that `EventSource` resumes with `Last-Event-ID`, over multipart with a part whose `payload` is null, over a WebSocket with the close code"}
	NotAcknowledged  = Code{"", 0, 4401, "a `subscribe` before `connection_ack`"}
	InitTimeout      = Code{"", 0, 4408, "no `connection_init` within `ws_init_timeout`"}
	SubscriberExists = Code{"", 0, 4409, "a `subscribe` with the id of an operation that runs"}
	GoingAway        = Code{"SHUTTING_DOWN", 0, 1001, "Caddy stopping, or a client that did not answer the keep-alive ping: reconnect"}
	Terminated       = Code{"", 0, 1000, "`connection_terminate` from the client (subscriptions-transport-ws)"}
	ServiceRestart   = Code{"SERVICE_RESTART", 0, 1012, "a reload that removes the site or changes how its clients authenticate (each connection at its own moment within a few seconds), or an SSE stream that lasted `sse_max_duration`: reconnect"}
	Internal         = Code{"INTERNAL_SERVER_ERROR", 500, 4500, "a fault of the server; the cause is logged, never sent"}
)

// Idempotency keys: the Idempotency-Key header of POST /posts and of a GraphQL createPost.
var (
	BadIdempotencyKey    = Code{"BAD_REQUEST", 400, 0, "an `Idempotency-Key` that is not 1 to 255 printable ASCII characters (bare or as a quoted string), given twice, or sent with a write other than a create"}
	IdempotencyKeyInUse  = Code{"IDEMPOTENCY_KEY_IN_USE", 409, 0, "a create whose `Idempotency-Key` an earlier request holds, still under way; `Retry-After` says when its hold ends at the latest"}
	IdempotencyKeyReused = Code{"IDEMPOTENCY_KEY_REUSED", 422, 0, "a create whose `Idempotency-Key` the caller sent before with another request"}
	// IdempotencyKeyPostDeleted is a 410: what the key made is gone for good, and no retry brings
	// it back; a 409 would invite the retry that IdempotencyKeyInUse's Retry-After invites.
	IdempotencyKeyPostDeleted = Code{"IDEMPOTENCY_KEY_POST_DELETED", 410, 0, "a retry of a create whose `Idempotency-Key` made its post, which was deleted since, while its first answer was not kept (the first request ended before it could keep it): the post is not created again and nothing is written; the message names its id. Send a new key to create a new post"}
)

// InternalMessage is all a client learns of a fault of the server.
const InternalMessage = "internal server error"

// Table lists every row, for the tests that walk it and for the tables of docs/errors.md,
// which are generated from it.
var Table = []Code{
	BadRequest, InvalidText, NoSuchPath, MethodNotAllowed, NotAcceptable, PayloadTooLarge, UnsupportedMediaType,
	ParseFailed, ValidationFailed, MaxAliases, MaxRootFields, MaxFields,
	PersistedQueryNotFound, PersistedQueryHashMismatch, PersistedQueryNotInList, QueryNotInSafelist,
	BadUserInput, Unauthenticated, InvalidCredentials, MalformedCredentials, Forbidden, NotFound, VersionConflict, TooManyConnections, TooManyInitialisations,
	ResponseTooLarge, TooManyErrors, TooManyOperations, TooManySubscriptions, ServerFull, Unavailable, SearchIndexing, CursorExpired, ResumeTooLong, TooSlow,
	NotAcknowledged, InitTimeout, SubscriberExists, GoingAway, Terminated, Internal, ServiceRestart,
	BadIdempotencyKey, IdempotencyKeyInUse, IdempotencyKeyReused, IdempotencyKeyPostDeleted,
}

// Error is an error of a kind in the table, with the message a client may read.
type Error struct {
	Code    Code
	Message string
	// Field names the input member at fault, for BadUserInput.
	Field string
	// Version is the post's version, for VersionConflict (0 for none): its owner, the only one
	// who gets it, may read it anyway.
	Version int64
	// Cause is what went wrong inside, for the log; never sent.
	Cause error
}

// New returns an error of kind code.
func New(code Code, message string) *Error { return &Error{Code: code, Message: message} }

func (e *Error) Error() string { return e.Message }

func (e *Error) Unwrap() error { return e.Cause }

// Extensions is what graphql-go writes as the error's extensions.
func (e *Error) Extensions() map[string]any {
	ext := map[string]any{"code": e.Code.GraphQL}
	if e.Field != "" {
		ext["field"] = e.Field
	}
	if e.Version != 0 {
		ext["currentVersion"] = e.Version
	}
	return ext
}

// Fault says whether the error is the server's (5xx), so that its cause is logged.
func (e *Error) Fault() bool { return e.Code.Status >= 500 }

// Of returns err as a row of the table with its client message: err itself if it is an *Error,
// else the row of posts' and auth's errors, else Internal, whose cause is kept for the log.
func Of(err error) *Error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	if invalid, ok := errors.AsType[*posts.InvalidError](err); ok {
		return &Error{Code: BadUserInput, Message: invalid.Message, Field: invalid.Field}
	}
	if conflict, ok := errors.AsType[*posts.ConflictError](err); ok {
		return &Error{Code: VersionConflict, Message: conflict.Error(), Version: conflict.Version}
	}
	if authErr, ok := errors.AsType[*auth.Error](err); ok {
		if authErr.Code == auth.CodeInvalidRequest {
			return &Error{Code: MalformedCredentials, Message: authErr.Description}
		}
		return &Error{Code: InvalidCredentials, Message: authErr.Description}
	}
	switch {
	case errors.Is(err, posts.ErrUnauthenticated):
		return &Error{Code: Unauthenticated, Message: err.Error()}
	case errors.Is(err, posts.ErrForbidden):
		return &Error{Code: Forbidden, Message: err.Error()}
	case errors.Is(err, posts.ErrNotFound):
		return &Error{Code: NotFound, Message: err.Error()}
	case errors.Is(err, posts.ErrNotTried):
		return &Error{Code: Unavailable, Message: posts.ErrNotTried.Error(), Cause: err}
	case errors.Is(err, posts.ErrUnavailable):
		return &Error{Code: Unavailable, Message: posts.ErrUnavailable.Error(), Cause: err}
	case errors.Is(err, auth.ErrKeysUnavailable):
		return &Error{Code: Unavailable, Message: auth.ErrKeysUnavailable.Error(), Cause: err}
	case errors.Is(err, posts.ErrIndexing):
		return &Error{Code: SearchIndexing, Message: posts.ErrIndexing.Error(), Cause: err}
	case errors.Is(err, posts.ErrCursorExpired):
		return &Error{Code: CursorExpired, Message: err.Error()}
	case errors.Is(err, posts.ErrKeyReused):
		return &Error{Code: IdempotencyKeyReused, Message: err.Error()}
	}
	if inUse, ok := errors.AsType[*posts.KeyInUseError](err); ok {
		return &Error{Code: IdempotencyKeyInUse, Message: inUse.Error()}
	}
	if gone, ok := errors.AsType[*posts.KeyPostDeletedError](err); ok {
		return &Error{Code: IdempotencyKeyPostDeleted, Message: gone.Error()}
	}
	return &Error{Code: Internal, Message: InternalMessage, Cause: err}
}
