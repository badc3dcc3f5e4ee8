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
	// GraphQL is the extensions.code of a GraphQL error of this kind.
	GraphQL string
	// Status is the HTTP status of an answer that is this error: a REST answer, and a GraphQL
	// answer over HTTP refused before it ran (400 stands for "400, or 200 in application/json",
	// the status older GraphQL clients read, but for persisted queries, whose status is the same
	// in both).
	Status int
	// Close is the close code of a WebSocket connection that this error ends. An error with no
	// close code answers one operation, and the connection stays open.
	Close int
	// When says when a client gets it.
	When string
}

// The table: every error the service returns. The GraphQL codes of execution errors follow Apollo
// Server, the limits Apollo Router, and the close codes graphql-ws (4400-4500) and RFC 6455.
var (
	// Request shape.
	BadRequest           = Code{"BAD_REQUEST", 400, 4400, "the request or message is malformed: not JSON, a missing or repeated member, a bad query string, a message of no known type"}
	InvalidText          = Code{"BAD_REQUEST", 400, 1007, "text that is not UTF-8, or holds half of a surrogate pair"}
	NoSuchPath           = Code{"", 404, 0, "a path under /posts/ that names no post"}
	MethodNotAllowed     = Code{"BAD_REQUEST", 405, 0, "a method the path does not take (the Allow header lists those it does), or a mutation sent with GET"}
	NotAcceptable        = Code{"BAD_REQUEST", 406, 0, "a GraphQL request that accepts neither of its response media types"}
	PayloadTooLarge      = Code{"BAD_REQUEST", 413, 1009, "a body larger than max_body_size, or a WebSocket message larger than ws_read_limit"}
	UnsupportedMediaType = Code{"BAD_REQUEST", 415, 0, "a body that is not application/json (or application/graphql-response+json)"}

	// GraphQL documents, refused before they run.
	ParseFailed      = Code{"GRAPHQL_PARSE_FAILED", 400, 0, "a GraphQL syntax error"}
	ValidationFailed = Code{"GRAPHQL_VALIDATION_FAILED", 400, 0, "a document that is not valid against the schema, or past max_query_length, max_depth or max_cost"}
	MaxAliases       = Code{"MAX_ALIASES_LIMIT", 400, 0, "more aliased fields than max_aliases"}
	MaxRootFields    = Code{"MAX_ROOT_FIELDS_LIMIT", 400, 0, "more root fields than max_root_fields"}
	MaxFields        = Code{"MAX_FIELDS_LIMIT", 400, 0, "more fields in the document than max_fields"}

	// Persisted queries. Not found is answered with 200, as Apollo Server answers it, and its
	// clients expect: they send the query with the hash then.
	PersistedQueryNotFound     = Code{"PERSISTED_QUERY_NOT_FOUND", 200, 0, "an automatic persisted query's hash without the query, of a document the server does not hold (yet)"}
	PersistedQueryHashMismatch = Code{"PERSISTED_QUERY_HASH_MISMATCH", 400, 0, "a persisted query's sha256Hash that is not the SHA-256 of its query"}
	PersistedQueryNotInList    = Code{"PERSISTED_QUERY_NOT_IN_LIST", 404, 0, "with persisted_queries_only, a hash that is no operation's of the manifest"}
	QueryNotInSafelist         = Code{"QUERY_NOT_IN_SAFELIST", 403, 0, "with persisted_queries_only, a query that is no operation of the manifest"}

	// Credentials and rules.
	BadUserInput           = Code{"BAD_USER_INPUT", 422, 0, "input that breaks a rule of posts; extensions.field names the member"}
	Unauthenticated        = Code{"UNAUTHENTICATED", 401, 4403, "a write (or, with subscriptions_require_auth, a WebSocket) without credentials"}
	InvalidCredentials     = Code{"UNAUTHENTICATED", 401, 4403, "credentials that are present but not accepted: an unknown key, a bad or expired token"}
	MalformedCredentials   = Code{"BAD_REQUEST", 400, 4403, "credentials given in a malformed way, twice, or naming different users"}
	Forbidden              = Code{"FORBIDDEN", 403, 0, "a write to another user's post"}
	NotFound               = Code{"NOT_FOUND", 404, 0, "no post has the id"}
	VersionConflict        = Code{"VERSION_CONFLICT", 412, 0, "a write whose If-Match (or other precondition) or expectedVersion the post does not meet: it changed since; nothing was written"}
	TooManyConnections     = Code{"", 429, 4429, "a client that holds max_connections_per_user WebSockets and HTTP streams"}
	TooManyInitialisations = Code{"", 0, 4429, "a second connection_init"}

	// Limits of one answer and of shared resources.
	ResponseTooLarge     = Code{"RESPONSE_TOO_LARGE", 0, 0, "an operation whose result would grow past max_response_size: it stops, data null"}
	TooManyErrors        = Code{"TOO_MANY_ERRORS", 0, 0, "the error that ends a list of more than 100 errors of an operation that ran"}
	TooManyOperations    = Code{"BAD_REQUEST", 0, 0, "an operation past max_subscriptions on one WebSocket connection"}
	TooManySubscriptions = Code{"TOO_MANY_SUBSCRIPTIONS", 429, 0, "a client past max_distinct_subscriptions_per_client (over HTTP, a stream refused before it starts)"}
	ServerFull           = Code{"UNAVAILABLE", 503, 0, "a server at max_connections or max_distinct_subscriptions, or closing"}
	Unavailable          = Code{"UNAVAILABLE", 503, 1013, "a store that does not answer within timeout, or key sets not fetched yet; Retry-After says when to retry"}
	CursorExpired        = Code{"CURSOR_EXPIRED", 0, 0, "a subscription's resumeFrom whose next events the log no longer keeps (events_ttl, events_max): nothing is replayed; fetch again, then subscribe without it"}
	ResumeTooLong        = Code{"RESUME_TOO_LONG", 0, 0, "a subscription's resumeFrom more than max_resume_events events of the log behind: nothing is replayed; fetch again, then subscribe without it"}
	TooSlow              = Code{"TOO_SLOW", 0, 1013, "a client that reads its WebSocket or HTTP stream too slowly, or a feed that fell behind the events (over SSE, the stream ends with no word, and EventSource resumes)"}
	NotAcknowledged      = Code{"", 0, 4401, "a subscribe before connection_ack"}
	InitTimeout          = Code{"", 0, 4408, "no connection_init within ws_init_timeout"}
	SubscriberExists     = Code{"", 0, 4409, "a subscribe with the id of an operation that runs"}
	GoingAway            = Code{"SHUTTING_DOWN", 0, 1001, "a shutdown, or a client that did not answer the keep-alive ping"}
	Terminated           = Code{"", 0, 1000, "connection_terminate from the client (subscriptions-transport-ws)"}
	ServiceRestart       = Code{"SERVICE_RESTART", 0, 1012, "a reload that removes the site or changes how its clients authenticate: each connection at its own moment within a few seconds"}
	Internal             = Code{"INTERNAL_SERVER_ERROR", 500, 4500, "a fault of the server; the cause is logged, never sent"}
)

// Idempotency keys: the Idempotency-Key header of POST /posts and of a GraphQL createPost.
var (
	BadIdempotencyKey    = Code{"BAD_REQUEST", 400, 0, "an Idempotency-Key that is not 1 to 255 printable ASCII characters (bare or as a quoted string), given twice, or sent with a write other than a create"}
	IdempotencyKeyInUse  = Code{"IDEMPOTENCY_KEY_IN_USE", 409, 0, "a create whose Idempotency-Key an earlier request holds, still under way; Retry-After says when its hold ends at the latest"}
	IdempotencyKeyReused = Code{"IDEMPOTENCY_KEY_REUSED", 422, 0, "a create whose Idempotency-Key the caller sent before with another request"}
)

// InternalMessage is all a client learns of a fault of the server.
const InternalMessage = "internal server error"

// Table lists every row, for the test that walks it and for the README's table.
var Table = []Code{
	BadRequest, InvalidText, NoSuchPath, MethodNotAllowed, NotAcceptable, PayloadTooLarge, UnsupportedMediaType,
	ParseFailed, ValidationFailed, MaxAliases, MaxRootFields, MaxFields,
	PersistedQueryNotFound, PersistedQueryHashMismatch, PersistedQueryNotInList, QueryNotInSafelist,
	BadUserInput, Unauthenticated, InvalidCredentials, MalformedCredentials, Forbidden, NotFound, VersionConflict, TooManyConnections, TooManyInitialisations,
	ResponseTooLarge, TooManyErrors, TooManyOperations, TooManySubscriptions, ServerFull, Unavailable, CursorExpired, ResumeTooLong, TooSlow,
	NotAcknowledged, InitTimeout, SubscriberExists, GoingAway, Terminated, Internal, ServiceRestart,
	BadIdempotencyKey, IdempotencyKeyInUse, IdempotencyKeyReused,
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
	case errors.Is(err, posts.ErrCursorExpired):
		return &Error{Code: CursorExpired, Message: err.Error()}
	case errors.Is(err, posts.ErrKeyReused):
		return &Error{Code: IdempotencyKeyReused, Message: err.Error()}
	}
	if inUse, ok := errors.AsType[*posts.KeyInUseError](err); ok {
		return &Error{Code: IdempotencyKeyInUse, Message: inUse.Error()}
	}
	return &Error{Code: Internal, Message: InternalMessage, Cause: err}
}
