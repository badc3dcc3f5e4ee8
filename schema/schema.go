// Package schema is the GraphQL API of posts: the schema (schema.graphql, embedded), the checks
// an operation passes before anything runs, the resolvers that run it, and the feeds that run
// subscriptions for their subscribers. The resolvers only translate: every rule is
// posts.Service's, so GraphQL and REST answer alike.
//
// Where things are:
//   - schema.go: Schema, its Limits, New, and Execute.
//   - Admission, what Prepare checks before anything runs: prepare.go (the entry point and the
//     order of its checks), admission.go (the counts of max_aliases, max_root_fields and
//     max_fields, and fragment cycles), literals.go (values written in the query), variables.go
//     (values given for variables), cost.go (max_cost and the limits of introspection), and
//     types.go (the types those checks read).
//   - documents.go: the cache of prepared documents, by the hash of their text; persisted.go:
//     persisted queries, automatic (Apollo's APQ) and from a manifest.
//   - Plans: plan.go (a query's document, validated once by graphql-go, compiled to call the
//     resolvers directly) and plan_run.go (running one, writing its JSON).
//   - Resolvers: resolvers.go (queries and mutations), objects.go (the object types),
//     scalars.go (ID and Time), budget.go (max_response_size, charged as fields resolve), and
//     errors.go (what a client sees of an error).
//   - Feeds: subscriptions.go (the stream of one subscription and its resolvers), feeds.go
//     (one run of an operation shared by its subscribers, and the limits on them), order.go
//     (Sequence: one order per connection) and replay.go (resuming from a cursor).
//   - idempotency.go: what an idempotency key needs of an operation (CreatesOnePost,
//     Fingerprint).
//   - text.go: the sizes and checks of text that the REST handlers share.
package schema

import (
	"context"
	_ "embed"
	"slices"
	"strings"
	"time"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/vektah/gqlparser/v2/ast"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/spans"
)

// sdl is schema.graphql, the schema in the GraphQL schema language.
//
//go:embed schema.graphql
var sdl string

// SDL is the schema in the GraphQL schema language.
func SDL() string { return sdl }

// Limits bound what one operation may ask for. Prepare checks them before any resolver runs, so a
// refused operation costs no database call.
type Limits struct {
	// MaxQueryLength is the longest query document accepted, in bytes.
	MaxQueryLength int
	// MaxDepth is the deepest nesting of fields accepted, and of lists and input objects in a
	// value written in the query.
	MaxDepth int
	// MaxCost is the most values an operation may return: every object (post, user, edge, page
	// info) and every field of one counts, with every list as long as its limit or first
	// argument, or its default, lets it be.
	MaxCost int
	// SearchCost is how many values a search (the search argument of Query.posts,
	// Query.postsConnection or User.posts) counts for in MaxCost, over those it returns: the
	// work of reading its words' lists of the index, which can be many pages' worth.
	SearchCost int
	// DisableIntrospection refuses operations that select __schema or __type.
	DisableIntrospection bool
	// MaxFeeds is how many distinct subscription operations may run at once; subscribers of
	// the same one share it.
	MaxFeeds int
	// MaxFeedsPerClient is how many of MaxFeeds one client (a user, or an anonymous client
	// address) may take part in at once.
	MaxFeedsPerClient int
	// MaxAliases is the most aliased fields (an alias other than the field's name) the
	// operation that runs may have, fragments expanded.
	MaxAliases int
	// MaxRootFields is the most fields the operation that runs may select at its root,
	// fragments expanded, __typename aside: for a mutation, the most writes one request makes.
	MaxRootFields int
	// MaxFields is the most fields a document may select in all, fragments expanded (a fragment
	// counts each time it is spread): those of every operation, and of fragments no operation
	// spreads, since graphql-go validates all of them though one runs. The uses of variables and
	// the fragment spreads and inline fragments of the document, counted the same way, may not
	// exceed it either: graphql-go's validation repeats them for each operation too.
	MaxFields int
	// MaxResume is the most positions of the event log one resumed subscription may replay,
	// whatever it matches of them (max_resume_events).
	MaxResume int64
	// MaxResponseSize is the largest result an operation may produce, in bytes of JSON; past it
	// the operation stops and answers RESPONSE_TOO_LARGE.
	MaxResponseSize int64
	// DocumentCacheEntries and DocumentCacheSize bound the cache of prepared documents (see
	// documents.go): the most documents it keeps, and the most bytes of memory they may be
	// counted as taking. With either at 0, no document is kept.
	DocumentCacheEntries int
	DocumentCacheSize    int64
	// PersistedOnly refuses every operation that is not one of the persisted queries New is
	// given: no other document is parsed, and none is kept.
	PersistedOnly bool
}

// UserPostsLimit is the number of a user's posts returned when the query names no limit (or
// max_limit, if smaller).
const UserPostsLimit = 10

// subscribeResolverTimeout bounds the resolution of one event of a subscription, beyond any
// storage deadline.
const subscribeResolverTimeout = time.Minute

// overlapValidationLimit bounds the pairs of selections graphql-go's validation compares to
// check that the fields of one response name can merge, a number that grows with the square of
// the fields: past it, validation stops with an error. 10,000 pairs cost it about 10 ms and 3 MB;
// the 499 fields of one name that max_fields admits would make 124,251 pairs (55 ms, 25 MB) and
// 500 fragments spread side by side 374,250. graphql-js's standard introspection query makes 1,
// ten copies of __schema { types { name fields { name args { name type { name } } } } } 405.
const overlapValidationLimit = 10_000

// Schema is the executable schema with its limits.
type Schema struct {
	exec         *graphql.Schema
	root         *Resolver // of queries and mutations, which plans call
	svc          *posts.Service
	limits       Limits
	types        map[string]*ast.Definition // the types of the SDL, for the limits and variables
	feeds        feeds                      // the running subscriptions, shared by their subscribers
	writes       *writes                    // the budgets of the latest writes' responses (budget.go)
	documents    *documents                 // the documents prepared before, by the hash of their text
	changes      *document                  // the change stream's operations (changes.go)
	maxLimit     int
	defaultSizes map[string]int
	// unplanned runs every operation through graphql-go's Exec, never a plan (plan.go): the
	// other side of the differential test, which holds the two to the same bytes.
	unplanned bool
}

// New parses the schema over svc with limits as given: the caller fills every limit
// (caddymodule's table of defaults) and checks them (caddymodule's Validate). New neither fills
// nor checks them, and no value of one makes it fail or panic. The documents of persisted (a
// manifest's operations, see ParseManifest) are prepared and held for good; one that the limits
// refuse is an error.
func New(svc *posts.Service, logger *zap.Logger, limits Limits, persisted ...PersistedQuery) (*Schema, error) {
	r := &Resolver{svc: svc, logger: logger}
	opts := []graphql.SchemaOpt{
		graphql.UseStringDescriptions(),
		graphql.MaxDepth(limits.MaxDepth),
		// Prepare has bounded the document; these bound graphql-go's own validation of it
		// (and of a client's text that Execute validates again for its error locations).
		graphql.OverlapValidationLimit(overlapValidationLimit),
		graphql.MaxQueryLength(limits.MaxQueryLength * printedGrowth),
		graphql.PanicHandler(r),
		graphql.Logger(r),
		// graphql-go's default of 1s would end a whole feed when the store is slow to resolve
		// one event; the store's own deadline answers such a field with UNAVAILABLE instead.
		graphql.SubscribeResolverTimeout(subscribeResolverTimeout),
	}
	if limits.DisableIntrospection {
		opts = append(opts, graphql.DisableIntrospection()) // Prepare refuses it; this is a second lock
	}
	exec, err := graphql.ParseSchema(sdl, r, opts...)
	if err != nil {
		return nil, err
	}
	types, err := definitions()
	if err != nil {
		return nil, err
	}
	s := &Schema{exec: exec, root: r, svc: svc, limits: limits, types: types, maxLimit: svc.MaxLimit(), defaultSizes: defaultSizes(svc.MaxLimit()),
		documents: newDocuments(limits.DocumentCacheEntries, limits.DocumentCacheSize), writes: newWrites(limits.MaxResponseSize)}
	if err := s.persist(persisted); err != nil {
		return nil, err
	}
	if err := s.prepareChanges(); err != nil {
		return nil, err
	}
	return s, nil
}

// Execute runs op. Errors of a request that did not run (validation) carry
// GRAPHQL_VALIDATION_FAILED and the response has no data. An operation whose result grows past
// max_response_size stops there and answers one RESPONSE_TOO_LARGE error and data: null (see
// budget). A response has at most MaxErrors errors and one more that says how many were cut.
// It runs in the span graphql.execute, when ctx's request is traced, under the operation's
// (PrepareIn), its errors recorded on both (recordErrors).
func (s *Schema) Execute(ctx context.Context, op *Operation) *graphql.Response {
	var span spans.Span
	if op.span.On() { // a traced request's (PrepareIn): the untraced look nothing up
		ctx, span = spans.Start(ctx, "graphql.execute")
	}
	defer span.End()
	res := s.execute(ctx, op, span)
	recordErrors(op, span, res.Errors)
	return res
}

// execute is Execute but for its span, span, which ctx carries.
func (s *Schema) execute(ctx context.Context, op *Operation, span spans.Span) *graphql.Response {
	req := op.request
	var seen *posts.Seen
	if op.Type == string(ast.Query) {
		ctx, seen = s.svc.WithSeen(ctx)
	}
	b := newBudget(s.limits.MaxResponseSize, op.shape, nil)
	b.charge(b.object(operationRoots[ast.Operation(op.Type)]))
	res, planned := s.executePlan(ctx, op, b)
	if !planned {
		var stop context.CancelCauseFunc
		ctx, stop = context.WithCancelCause(ctx)
		defer stop(nil)
		b.stop = stop // graphql-go runs fields at once: the first over the budget ends the others
		res = s.exec.Exec(withBudget(ctx, b), op.document, req.OperationName, req.Variables)
	}
	span.String("graphql.execution", executionOf(planned))
	// The length check is a second lock: introspection's resolvers are graphql-go's, which
	// charge nothing (the schema and max_root_fields bound them).
	if b.exceeded() || int64(len(res.Data)) > s.limits.MaxResponseSize {
		return tooLarge(s.limits.MaxResponseSize)
	}
	// The client's text is validated again only for where its errors are; a block string can
	// hide from Prepare what graphql-go's reader of it would find there, so not with one.
	if res.Data == nil && invalid(res.Errors) && !strings.Contains(req.Query, `"""`) {
		res.Errors = s.locatedInQuery(req, res.Errors)
	}
	if res.Data == nil && slices.ContainsFunc(res.Errors, func(e *gqlerrors.QueryError) bool { return e.Rule == "MaxDepthExceeded" }) {
		metrics.LimitRefused("max_depth") // graphql-go's own check
	}
	if seen != nil && res.Data != nil {
		if cursor := s.svc.ReadCursor(ctx, seen); cursor != "" {
			res.Extensions = map[string]any{CursorExtension: cursor}
		}
	}
	return capResponseErrors(res)
}

// CursorExtension is the member of a response's extensions that holds a cursor of the event
// log: of an event, the event's position; of a query, the position its reads of posts reflect
// (posts.Service.ReadCursor), from which a subscription's resumeFrom gets every change after
// them.
const CursorExtension = "cursor"

// locatedInQuery gives the validation errors of the printed document where the client wrote
// them: graphql-go validates the client's own text. That text is only parsed and validated,
// never run; if graphql-go's parser cannot read it (it panics on some malformed descriptions)
// or finds no error in it, errs stand as they are.
func (s *Schema) locatedInQuery(req Request, errs []*gqlerrors.QueryError) (located []*gqlerrors.QueryError) {
	defer func() {
		if recover() != nil || !invalid(located) {
			located = errs
		}
	}()
	return s.exec.ValidateWithVariables(req.Query, req.Variables)
}
