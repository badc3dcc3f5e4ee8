// Package schema is the GraphQL schema of the posts API (schema.graphql, embedded) and its
// resolvers. The resolvers only translate: every rule is posts.Service's, so GraphQL and REST
// answer alike.
package schema

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/vektah/gqlparser/v2/ast"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
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
// GRAPHQL_VALIDATION_FAILED and the response has no data.
func (s *Schema) Execute(ctx context.Context, op *Operation) *graphql.Response {
	req := op.request
	res := s.exec.Exec(ctx, op.document, req.OperationName, req.Variables)
	if res.Data == nil {
		if invalid(res.Errors) {
			res.Errors = s.locatedInQuery(req, res.Errors)
		}
		tagRequestErrors(res.Errors)
	}
	return res
}

// tagRequestErrors gives the errors of a request that did not run the code that says so.
func tagRequestErrors(errs []*gqlerrors.QueryError) {
	for _, e := range errs {
		if e.Extensions == nil {
			e.Extensions = map[string]any{"code": CodeValidationFailed}
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

// Post resolves Query.post.
func (r *Resolver) Post(ctx context.Context, args struct{ ID graphql.ID }) (*Post, error) {
	p, err := r.svc.Get(ctx, string(args.ID))
	if errors.Is(err, posts.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, r.fail(err)
	}
	return r.post(p), nil
}

type listArgs struct {
	UserID *graphql.ID
	Limit  *int32
	After  *string
}

// Posts resolves Query.posts.
func (r *Resolver) Posts(ctx context.Context, args listArgs) ([]*Post, error) {
	page, err := r.list(ctx, args.UserID, args.Limit, "limit", args.After)
	if err != nil {
		return nil, err
	}
	return r.withAuthors(ctx, page.Posts, graphql.HasSelectedField(ctx, "author"))
}

// PostsConnection resolves Query.postsConnection.
func (r *Resolver) PostsConnection(ctx context.Context, args struct {
	UserID *graphql.ID
	First  *int32
	After  *string
}) (*PostConnection, error) {
	page, err := r.list(ctx, args.UserID, args.First, "first", args.After)
	if err != nil {
		return nil, err
	}
	nodes, err := r.withAuthors(ctx, page.Posts, graphql.HasSelectedField(ctx, "edges.node.author"))
	if err != nil {
		return nil, err
	}
	return &PostConnection{page: page, posts: nodes}, nil
}

// withAuthors makes the resolvers of ps; when the query asks for their authors, it reads them
// all in one query rather than one per post.
func (r *Resolver) withAuthors(ctx context.Context, ps []posts.Post, authorSelected bool) ([]*Post, error) {
	out := r.postsOf(ps)
	if !authorSelected || len(ps) == 0 {
		return out, nil
	}
	authors, err := r.svc.Authors(ctx, auth.FromContext(ctx), ps)
	if err != nil {
		return nil, r.fail(err)
	}
	for _, p := range out {
		p.author = &User{r: r, user: authors[p.post.UserID]}
	}
	return out, nil
}

// list reads a page of posts. limitName is the argument that gave limit (limit, or first for a
// connection), which the error names.
func (r *Resolver) list(ctx context.Context, userID *graphql.ID, limit *int32, limitName string, after *string) (posts.Page, error) {
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
	u, found, err := r.svc.User(ctx, auth.FromContext(ctx), string(args.ID))
	if err != nil {
		return nil, r.fail(err)
	}
	if !found {
		return nil, nil
	}
	return &User{r: r, user: u}, nil
}

// CreatePost resolves Mutation.createPost.
func (r *Resolver) CreatePost(ctx context.Context, args struct {
	Input struct {
		Title string
		Body  *string
	}
}) (*Post, error) {
	p, err := r.svc.Create(ctx, auth.FromContext(ctx), posts.NewPost{Title: args.Input.Title, Body: args.Input.Body})
	if err != nil {
		return nil, r.fail(err)
	}
	return r.post(p), nil
}

// UpdatePost resolves Mutation.updatePost.
func (r *Resolver) UpdatePost(ctx context.Context, args struct {
	ID    graphql.ID
	Input struct {
		Title graphql.NullString
		Body  graphql.NullString
	}
}) (*Post, error) {
	ch := posts.Changes{
		Title: posts.Change{Set: args.Input.Title.Set, Value: args.Input.Title.Value},
		Body:  posts.Change{Set: args.Input.Body.Set, Value: args.Input.Body.Value},
	}
	p, err := r.svc.Update(ctx, auth.FromContext(ctx), string(args.ID), ch)
	if err != nil {
		return nil, r.fail(err)
	}
	return r.post(p), nil
}

// DeletePost resolves Mutation.deletePost.
func (r *Resolver) DeletePost(ctx context.Context, args struct{ ID graphql.ID }) (graphql.ID, error) {
	if err := r.svc.Delete(ctx, auth.FromContext(ctx), string(args.ID)); err != nil {
		return "", r.fail(err)
	}
	return args.ID, nil
}

func (r *Resolver) post(p posts.Post) *Post { return &Post{r: r, post: p} }

func (r *Resolver) postsOf(ps []posts.Post) []*Post {
	out := make([]*Post, len(ps))
	for i, p := range ps {
		out[i] = r.post(p)
	}
	return out
}

// Post resolves a Post.
type Post struct {
	r      *Resolver
	post   posts.Post
	author *User // read ahead with the list the post came in, if any
}

func (p *Post) ID() graphql.ID     { return graphql.ID(p.post.ID) }
func (p *Post) UserID() graphql.ID { return graphql.ID(p.post.UserID) }
func (p *Post) Title() string      { return p.post.Title }
func (p *Post) Body() *string      { return p.post.Body }
func (p *Post) CreatedAt() Time    { return Time{p.post.CreatedAt} }
func (p *Post) UpdatedAt() Time    { return Time{p.post.UpdatedAt} }
func (p *Post) Author(ctx context.Context) (*User, error) {
	if p.author != nil {
		return p.author, nil
	}
	return p.r.User(ctx, struct{ ID graphql.ID }{p.UserID()})
}

// User resolves a User.
type User struct {
	r    *Resolver
	user posts.User
}

func (u *User) ID() graphql.ID { return graphql.ID(u.user.ID) }
func (u *User) Name() *string  { return u.user.Name }
func (u *User) Email() *string { return u.user.Email }

// Posts resolves User.posts. Their author is this user, so it costs no query.
func (u *User) Posts(ctx context.Context, args struct{ Limit *int32 }) ([]*Post, error) {
	limit := args.Limit
	if limit == nil {
		n := int32(min(UserPostsLimit, u.r.svc.MaxLimit()))
		limit = &n
	}
	id := u.ID()
	page, err := u.r.list(ctx, &id, limit, "limit", nil)
	if err != nil {
		return nil, err
	}
	out := u.r.postsOf(page.Posts)
	for _, p := range out {
		p.author = u
	}
	return out, nil
}

// PostConnection resolves a page of posts.
type PostConnection struct {
	page  posts.Page
	posts []*Post
}

func (c *PostConnection) Edges() []*PostEdge {
	edges := make([]*PostEdge, len(c.posts))
	for i, p := range c.posts {
		edges[i] = &PostEdge{node: p}
	}
	return edges
}

func (c *PostConnection) PageInfo() *PageInfo {
	info := &PageInfo{hasNext: c.page.Next != ""}
	if n := len(c.page.Posts); n > 0 {
		cursor := posts.Cursor(c.page.Posts[n-1])
		info.endCursor = &cursor
	}
	return info
}

// PostEdge is a post and its cursor.
type PostEdge struct{ node *Post }

func (e *PostEdge) Cursor() string { return posts.Cursor(e.node.post) }
func (e *PostEdge) Node() *Post    { return e.node }

// PageInfo says where a page ends.
type PageInfo struct {
	hasNext   bool
	endCursor *string
}

func (i *PageInfo) HasNextPage() bool  { return i.hasNext }
func (i *PageInfo) EndCursor() *string { return i.endCursor }

// Time is the Time scalar: RFC 3339 in UTC with milliseconds.
type Time struct{ time.Time }

// ImplementsGraphQLType binds Time to the schema's Time scalar.
func (Time) ImplementsGraphQLType(name string) bool { return name == "Time" }

// UnmarshalGraphQL reads a Time argument.
func (t *Time) UnmarshalGraphQL(input any) error {
	s, ok := input.(string)
	if !ok {
		return fmt.Errorf("a Time is an RFC 3339 string, not %T", input)
	}
	parsed, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("a Time is an RFC 3339 string such as 2026-11-21T04:35:44.036Z")
	}
	t.Time = parsed
	return nil
}

// MarshalJSON writes a Time as the REST API does.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.UTC().Format(posts.TimeFormat) + `"`), nil
}
