// The resolvers of queries and mutations. Each asks posts.Service and translates its answer;
// the object types they return are in objects.go.

package schema

import (
	"context"
	"errors"
	"strings"

	"github.com/graph-gophers/graphql-go"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/posts"
)

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
	return r.post(ctx, budgetOf(ctx), args.ID)
}

// post resolves Query.post in the execution whose budget is b.
func (r *Resolver) post(ctx context.Context, b *budget, id graphql.ID) (*Post, error) {
	if err := b.err(); err != nil {
		return nil, err
	}
	back := feedTurnOf(ctx).leave(ctx)
	p, err := r.svc.Get(ctx, string(id))
	back()
	if errors.Is(err, posts.ErrNotFound) {
		b.objectMember("post", "Post", false)
		return nil, nil
	}
	if err != nil {
		return nil, r.fail(ctx, err)
	}
	if !b.objectMember("post", "Post", true) {
		return nil, errResponseTooLarge
	}
	return r.postIn(p, b), nil
}

// listArgs are the arguments of a list of posts: those of Query.posts, and of
// Query.postsConnection (first as Limit) and User.posts (userPostsArgs) as they are read.
type listArgs struct {
	UserID       *graphql.ID
	Search       *string
	Since, Until *TimeArg
	Order        *string
	Limit        *int32
	After        *string
}

// The values of the PostOrder enum.
const (
	NewestFirst = "NEWEST_FIRST"
	OldestFirst = "OLDEST_FIRST"
)

// userPostsArgs are the arguments of User.posts.
type userPostsArgs struct {
	Search       *string
	Since, Until *TimeArg
	Order        *string
	Limit        *int32
}

// same says whether a and b ask for the same page.
func (a listArgs) same(b listArgs) bool {
	return eq(a.UserID, b.UserID) && eq(a.Search, b.Search) && eq(a.Order, b.Order) && eq(a.Limit, b.Limit) &&
		eq(a.After, b.After) && eq(a.Since, b.Since) && eq(a.Until, b.Until)
}

func eq[T comparable](a, b *T) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// Posts resolves Query.posts.
func (r *Resolver) Posts(ctx context.Context, args listArgs) ([]*Post, error) {
	return r.posts(ctx, budgetOf(ctx), args, graphql.HasSelectedField(ctx, "author"))
}

// posts resolves Query.posts in the execution whose budget is b; authorSelected says the query
// asks for the posts' authors.
func (r *Resolver) posts(ctx context.Context, b *budget, args listArgs, authorSelected bool) ([]*Post, error) {
	page, err := r.list(ctx, b, args, "limit")
	if err != nil {
		return nil, err
	}
	if !b.ahead("posts", page.Posts) || !b.list("posts", "Post", len(page.Posts)) {
		return nil, errResponseTooLarge
	}
	return r.withAuthors(ctx, b, page.Posts, authorSelected)
}

// PostsConnection resolves Query.postsConnection.
func (r *Resolver) PostsConnection(ctx context.Context, args struct {
	UserID       *graphql.ID
	Search       *string
	Since, Until *TimeArg
	Order        *string
	First        *int32
	After        *string
}) (*PostConnection, error) {
	return r.postsConnection(ctx, budgetOf(ctx), listArgs{UserID: args.UserID, Search: args.Search, Since: args.Since, Until: args.Until,
		Order: args.Order, Limit: args.First, After: args.After}, graphql.HasSelectedField(ctx, "edges.node.author"))
}

// postsConnection resolves Query.postsConnection in the execution whose budget is b, its first
// argument as args.Limit; authorSelected says the query asks for the posts' authors.
func (r *Resolver) postsConnection(ctx context.Context, b *budget, args listArgs, authorSelected bool) (*PostConnection, error) {
	page, err := r.list(ctx, b, args, "first")
	if err != nil {
		return nil, err
	}
	if !b.ahead("postsConnection", page.Posts) || !b.objectMember("postsConnection", "PostConnection", true) {
		return nil, errResponseTooLarge
	}
	nodes, err := r.withAuthors(ctx, b, page.Posts, authorSelected)
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
	back := feedTurnOf(ctx).leave(ctx)
	authors, err := r.svc.Authors(ctx, posts.CallerFrom(ctx), ps)
	back()
	if err != nil {
		return nil, r.fail(ctx, err)
	}
	for _, p := range out {
		p.author = &User{r: r, user: authors[p.post.UserID], b: b}
	}
	return out, nil
}

// list reads a page of posts, unless b has run out. limitName is the argument that gave
// args.Limit (limit, or first for a connection), which the error names.
func (r *Resolver) list(ctx context.Context, b *budget, args listArgs, limitName string) (posts.Page, error) {
	var q posts.ListQuery
	if args.UserID != nil {
		q.UserID = string(*args.UserID)
	}
	if args.Limit != nil {
		q.Limit = int(*args.Limit)
		if q.Limit == 0 {
			q.Limit = -1 // to posts.Service 0 means the default; from a client it is out of range
		}
	}
	if args.After != nil {
		q.After = *args.After
		if q.After == "" {
			return posts.Page{}, r.fail(ctx, &posts.InvalidError{Field: "after", Message: "after cannot be empty"})
		}
	}
	if args.Search != nil {
		var err error
		if q.Search, err = r.svc.ParseSearch("search", *args.Search); err != nil {
			return posts.Page{}, r.fail(ctx, err)
		}
	}
	var err error
	if q.Since, q.Until, err = timeArgs(args.Since, args.Until); err != nil {
		return posts.Page{}, r.fail(ctx, err)
	}
	q.Oldest = args.Order != nil && *args.Order == OldestFirst
	if err := b.err(); err != nil {
		return posts.Page{}, err
	}
	back := feedTurnOf(ctx).leave(ctx)
	page, err := r.svc.List(ctx, q)
	back()
	if invalid, ok := errors.AsType[*posts.InvalidError](err); ok && invalid.Field == "limit" {
		err = &posts.InvalidError{Field: limitName, Message: limitName + strings.TrimPrefix(invalid.Message, "limit")}
	}
	if err != nil {
		return posts.Page{}, r.fail(ctx, err)
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
	back := feedTurnOf(ctx).leave(ctx)
	u, found, err := r.svc.User(ctx, posts.CallerFrom(ctx), id)
	back()
	if err != nil {
		return nil, r.fail(ctx, err)
	}
	if !b.objectMember(name, "User", found) {
		return nil, errResponseTooLarge
	}
	if !found {
		return nil, nil
	}
	return &User{r: r, user: u, b: b}, nil
}

// userByPosts resolves Query.user for an operation that selects of the user only its id and
// its posts, those args ask for first: a user with posts is a user, so the saved profile, which
// none of the fields selected shows, is read only for one without, as user reads it. The
// charges are user's, and the page is kept for the User's posts.
func (r *Resolver) userByPosts(ctx context.Context, b *budget, id string, args userPostsArgs) (*User, error) {
	if err := b.err(); err != nil {
		return nil, err
	}
	u := &User{r: r, user: posts.User{ID: id}, b: b}
	u.aheadArgs = u.listArgs(args)
	page, err := u.page(ctx, u.aheadArgs)
	if err != nil || len(page.Posts) == 0 {
		return r.user(ctx, b, "user", id) // its posts, or their error, come again through it
	}
	if !b.objectMember("user", "User", true) {
		return nil, errResponseTooLarge
	}
	u.ahead = &page
	return u, nil
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
	p, err := r.svc.Create(ctx, posts.CallerFrom(ctx), posts.NewPost{Title: args.Input.Title, Body: args.Input.Body})
	if err != nil {
		return nil, r.fail(ctx, err)
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
	ExpectedVersion *int32
}) (*Post, error) {
	b := budgetOf(ctx)
	if err := b.err(); err != nil {
		return nil, err
	}
	expect, err := expected(args.ExpectedVersion)
	if err != nil {
		return nil, r.fail(ctx, err)
	}
	ch := posts.Changes{
		Title: posts.Change{Set: args.Input.Title.Set, Value: args.Input.Title.Value},
		Body:  posts.Change{Set: args.Input.Body.Set, Value: args.Input.Body.Value},
	}
	p, err := r.svc.Update(ctx, posts.CallerFrom(ctx), string(args.ID), ch, expect)
	if err != nil {
		return nil, r.fail(ctx, err)
	}
	b.objectMember("updatePost", "Post", true)
	return r.postIn(p, b), nil
}

// DeletePost resolves Mutation.deletePost.
func (r *Resolver) DeletePost(ctx context.Context, args struct {
	ID              graphql.ID
	ExpectedVersion *int32
}) (ID, error) {
	b := budgetOf(ctx)
	if err := b.err(); err != nil {
		return "", err
	}
	expect, err := expected(args.ExpectedVersion)
	if err == nil {
		err = r.svc.Delete(ctx, posts.CallerFrom(ctx), string(args.ID), expect)
	}
	if err != nil {
		return "", r.fail(ctx, err)
	}
	return b.id("deletePost", string(args.ID)), nil
}

// expected is what a mutation's expectedVersion expects of the post: nothing when it is not
// given; a version, at least 1, when it is.
func expected(version *int32) (posts.Expect, error) {
	switch {
	case version == nil:
		return posts.Expect{}, nil
	case *version < 1:
		return posts.Expect{}, &posts.InvalidError{Field: "expectedVersion",
			Message: "expectedVersion must be a version of the post, from 1: the version field of the post as you read it"}
	}
	return posts.AtVersion(int64(*version)), nil
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
