// Package schema is the GraphQL schema of the posts API (schema.graphql, embedded) and its
// resolvers. The resolvers only translate: every rule is posts.Service's, so GraphQL and REST
// answer alike.
package schema

import (
	"context"
	_ "embed"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/vektah/gqlparser/v2/ast"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/posts"
)

//go:embed schema.graphql
var sdl string

// SDL is the schema in the GraphQL schema language.
func SDL() string { return sdl }

// subscribeResolverTimeout bounds the resolution of one event of a subscription, beyond any
// storage deadline.
const subscribeResolverTimeout = time.Minute

// UserPostsLimit is the number of a user's posts returned when the query names no limit (or
// max_limit, if smaller).
const UserPostsLimit = 10

// Schema is the executable schema with its limits.
type Schema struct {
	exec         *graphql.Schema
	limits       Limits
	types        map[string]*ast.Definition // the types of the SDL, for the limits and variables
	feeds        feeds                      // the running subscriptions, shared by their subscribers
	maxLimit     int
	defaultSizes map[string]int
}

// New parses the schema over svc. Zero limits take their defaults.
func New(svc *posts.Service, logger *zap.Logger, limits Limits) (*Schema, error) {
	if limits.MaxQueryLength <= 0 {
		limits.MaxQueryLength = DefaultMaxQueryLength
	}
	if limits.MaxDepth <= 0 {
		limits.MaxDepth = DefaultMaxDepth
	}
	if limits.MaxCost <= 0 {
		limits.MaxCost = DefaultMaxCost
	}
	if limits.MaxFeeds <= 0 {
		limits.MaxFeeds = DefaultMaxFeeds
	}
	if limits.MaxFeedsPerClient <= 0 {
		limits.MaxFeedsPerClient = max(1, limits.MaxFeeds/10) // no client takes more than a tenth
	}
	if limits.MaxAliases <= 0 {
		limits.MaxAliases = DefaultMaxAliases
	}
	if limits.MaxRootFields <= 0 {
		limits.MaxRootFields = DefaultMaxRootFields
	}
	if limits.MaxFields <= 0 {
		limits.MaxFields = DefaultMaxFields
	}
	if limits.MaxResponseSize <= 0 {
		limits.MaxResponseSize = DefaultMaxResponseSize
	}
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
	return &Schema{exec: exec, limits: limits, types: types, maxLimit: svc.MaxLimit(), defaultSizes: defaultSizes(svc.MaxLimit())}, nil
}

// Execute runs op. Errors of a request that did not run (validation) carry
// GRAPHQL_VALIDATION_FAILED and the response has no data. An operation whose result grows past
// max_response_size stops there and answers one RESPONSE_TOO_LARGE error and data: null (see
// budget). A response has at most MaxErrors errors and one more that says how many were cut.
func (s *Schema) Execute(ctx context.Context, op *Operation) *graphql.Response {
	req := op.request
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	b := newBudget(s.limits.MaxResponseSize, op.shape, stop)
	b.charge(b.object(operationRoots[ast.Operation(op.Type)]))
	res := s.exec.Exec(withBudget(ctx, b), op.document, req.OperationName, req.Variables)
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
	return capResponseErrors(res)
}

// capResponseErrors cuts the errors of res after MaxErrors (capErrors) and gives them their
// codes: the errors of a request that did not run (no data) are request errors, the one that
// ends the errors of an executed operation has errcode.TooManyErrors.GraphQL.
func capResponseErrors(res *graphql.Response) *graphql.Response {
	res.Errors = capErrors(res.Errors)
	if res.Data == nil {
		tagRequestErrors(res.Errors)
	} else if len(res.Errors) > MaxErrors {
		res.Errors[MaxErrors].Extensions = map[string]any{"code": errcode.TooManyErrors.GraphQL}
	}
	return res
}

// tagRequestErrors gives the errors of a request that did not run the code that says so.
func tagRequestErrors(errs []*gqlerrors.QueryError) {
	for _, e := range errs {
		if e.Extensions == nil {
			e.Extensions = map[string]any{"code": errcode.ValidationFailed.GraphQL}
		}
	}
}

// invalid says whether errs are all errors of validation, which say nothing ran.
func invalid(errs []*gqlerrors.QueryError) bool {
	return len(errs) > 0 && !slices.ContainsFunc(errs, func(e *gqlerrors.QueryError) bool { return e.Rule == "" })
}

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

// Resolver is the root of queries and mutations.
type Resolver struct {
	svc    *posts.Service
	logger *zap.Logger
}

// Each resolver object carries the budget of the response it belongs to (an execution's, or a
// subscription event's; nil outside both): its fields take no context, so graphql-go resolves
// them in line, and charge it as they return. A field that does not fit returns
// errResponseTooLarge, and so does every resolver once the budget has run out.

// Post resolves Query.post.
func (r *Resolver) Post(ctx context.Context, args struct{ ID graphql.ID }) (*Post, error) {
	b := budgetOf(ctx)
	if err := b.err(); err != nil {
		return nil, err
	}
	p, err := r.svc.Get(ctx, string(args.ID))
	if errors.Is(err, posts.ErrNotFound) {
		b.objectMember("post", "Post", false)
		return nil, nil
	}
	if err != nil {
		return nil, r.fail(err)
	}
	if !b.objectMember("post", "Post", true) {
		return nil, errResponseTooLarge
	}
	return r.postIn(p, b), nil
}

type listArgs struct {
	UserID *graphql.ID
	Limit  *int32
	After  *string
}

// Posts resolves Query.posts.
func (r *Resolver) Posts(ctx context.Context, args listArgs) ([]*Post, error) {
	b := budgetOf(ctx)
	page, err := r.list(ctx, b, args.UserID, args.Limit, "limit", args.After)
	if err != nil {
		return nil, err
	}
	if !b.ahead("posts", page.Posts) || !b.list("posts", "Post", len(page.Posts)) {
		return nil, errResponseTooLarge
	}
	return r.withAuthors(ctx, b, page.Posts, graphql.HasSelectedField(ctx, "author"))
}

// PostsConnection resolves Query.postsConnection.
func (r *Resolver) PostsConnection(ctx context.Context, args struct {
	UserID *graphql.ID
	First  *int32
	After  *string
}) (*PostConnection, error) {
	b := budgetOf(ctx)
	page, err := r.list(ctx, b, args.UserID, args.First, "first", args.After)
	if err != nil {
		return nil, err
	}
	if !b.ahead("postsConnection", page.Posts) || !b.objectMember("postsConnection", "PostConnection", true) {
		return nil, errResponseTooLarge
	}
	nodes, err := r.withAuthors(ctx, b, page.Posts, graphql.HasSelectedField(ctx, "edges.node.author"))
	if err != nil {
		return nil, err
	}
	return &PostConnection{page: page, posts: nodes, b: b}, nil
}

// withAuthors makes the resolvers of ps; when the query asks for their authors, it reads them
// all in one query rather than one per post.
func (r *Resolver) withAuthors(ctx context.Context, b *budget, ps []posts.Post, authorSelected bool) ([]*Post, error) {
	out := r.postsOf(ps, b)
	if !authorSelected || len(ps) == 0 {
		return out, nil
	}
	if err := b.err(); err != nil {
		return nil, err
	}
	authors, err := r.svc.Authors(ctx, auth.FromContext(ctx), ps)
	if err != nil {
		return nil, r.fail(err)
	}
	for _, p := range out {
		p.author = &User{r: r, user: authors[p.post.UserID], b: b}
	}
	return out, nil
}

// list reads a page of posts, unless b has run out. limitName is the argument that gave limit
// (limit, or first for a connection), which the error names.
func (r *Resolver) list(ctx context.Context, b *budget, userID *graphql.ID, limit *int32, limitName string, after *string) (posts.Page, error) {
	var q posts.ListQuery
	if userID != nil {
		q.UserID = string(*userID)
	}
	if limit != nil {
		q.Limit = int(*limit)
		if q.Limit == 0 {
			q.Limit = -1 // to posts.Service 0 means the default; from a client it is out of range
		}
	}
	if after != nil {
		q.After = *after
		if q.After == "" {
			return posts.Page{}, r.fail(&posts.InvalidError{Field: "after", Message: "after cannot be empty"})
		}
	}
	if err := b.err(); err != nil {
		return posts.Page{}, err
	}
	page, err := r.svc.List(ctx, q)
	if invalid, ok := errors.AsType[*posts.InvalidError](err); ok && invalid.Field == "limit" {
		err = &posts.InvalidError{Field: limitName, Message: limitName + strings.TrimPrefix(invalid.Message, "limit")}
	}
	if err != nil {
		return posts.Page{}, r.fail(err)
	}
	return page, nil
}

// User resolves Query.user.
func (r *Resolver) User(ctx context.Context, args struct{ ID graphql.ID }) (*User, error) {
	return r.user(ctx, budgetOf(ctx), "user", string(args.ID))
}

// user reads the user with the id, the value of the member name, unless b has run out.
func (r *Resolver) user(ctx context.Context, b *budget, name, id string) (*User, error) {
	if err := b.err(); err != nil {
		return nil, err
	}
	u, found, err := r.svc.User(ctx, auth.FromContext(ctx), id)
	if err != nil {
		return nil, r.fail(err)
	}
	if !b.objectMember(name, "User", found) {
		return nil, errResponseTooLarge
	}
	if !found {
		return nil, nil
	}
	return &User{r: r, user: u, b: b}, nil
}

// CreatePost resolves Mutation.createPost.
func (r *Resolver) CreatePost(ctx context.Context, args struct {
	Input struct {
		Title string
		Body  *string
	}
}) (*Post, error) {
	b := budgetOf(ctx)
	if err := b.err(); err != nil {
		return nil, err
	}
	p, err := r.svc.Create(ctx, auth.FromContext(ctx), posts.NewPost{Title: args.Input.Title, Body: args.Input.Body})
	if err != nil {
		return nil, r.fail(err)
	}
	b.objectMember("createPost", "Post", true) // done: the post is written, whatever its answer
	return r.postIn(p, b), nil
}

// UpdatePost resolves Mutation.updatePost.
func (r *Resolver) UpdatePost(ctx context.Context, args struct {
	ID    graphql.ID
	Input struct {
		Title graphql.NullString
		Body  graphql.NullString
	}
}) (*Post, error) {
	b := budgetOf(ctx)
	if err := b.err(); err != nil {
		return nil, err
	}
	ch := posts.Changes{
		Title: posts.Change{Set: args.Input.Title.Set, Value: args.Input.Title.Value},
		Body:  posts.Change{Set: args.Input.Body.Set, Value: args.Input.Body.Value},
	}
	p, err := r.svc.Update(ctx, auth.FromContext(ctx), string(args.ID), ch)
	if err != nil {
		return nil, r.fail(err)
	}
	b.objectMember("updatePost", "Post", true)
	return r.postIn(p, b), nil
}

// DeletePost resolves Mutation.deletePost.
func (r *Resolver) DeletePost(ctx context.Context, args struct{ ID graphql.ID }) (ID, error) {
	b := budgetOf(ctx)
	if err := b.err(); err != nil {
		return "", err
	}
	if err := r.svc.Delete(ctx, auth.FromContext(ctx), string(args.ID)); err != nil {
		return "", r.fail(err)
	}
	return b.id("deletePost", string(args.ID)), nil
}

// postIn is the resolver of p in the execution whose budget is b.
func (r *Resolver) postIn(p posts.Post, b *budget) *Post { return &Post{r: r, post: p, b: b} }

func (r *Resolver) postsOf(ps []posts.Post, b *budget) []*Post {
	out := make([]*Post, len(ps))
	for i, p := range ps {
		out[i] = r.postIn(p, b)
	}
	return out
}
