// The object types of the schema and their field resolvers, each charging the response's budget
// with what it writes.

package schema

import (
	"context"
	"strconv"

	"github.com/graph-gophers/graphql-go"

	"github.com/postsedge/caddy-posts/posts"
)

// Post resolves a Post.
type Post struct {
	r      *Resolver
	post   posts.Post
	author *User // read ahead with the list the post came in, if any
	b      *budget
}

// The fields of a Post. Each charges the execution's budget with what it writes (see budget).

// ID resolves Post.id.
func (p *Post) ID() ID { return p.b.id("id", p.post.ID) }

// UserID resolves Post.userId.
func (p *Post) UserID() ID { return p.b.id("userId", p.post.UserID) }

// Title resolves Post.title.
func (p *Post) Title() string { return p.b.str("title", p.post.Title) }

// Body resolves Post.body.
func (p *Post) Body() *string { return p.b.optStr("body", p.post.Body) }

// CreatedAt resolves Post.createdAt.
func (p *Post) CreatedAt() Time { return p.b.time("createdAt", p.post.CreatedAt) }

// UpdatedAt resolves Post.updatedAt.
func (p *Post) UpdatedAt() Time { return p.b.time("updatedAt", p.post.UpdatedAt) }

// Version resolves Post.version. GraphQL's Int has 32 bits; no post is updated 2³¹ times.
func (p *Post) Version() int32 { return p.b.int("version", p.post.Version) }

// Author resolves Post.author: read ahead with the post's list, or now.
func (p *Post) Author(ctx context.Context) (*User, error) {
	if p.author != nil {
		if !p.b.objectMember("author", "User", true) {
			return nil, errResponseTooLarge
		}
		return p.author, nil
	}
	return p.r.user(ctx, p.b, "author", p.post.UserID)
}

// User resolves a User.
type User struct {
	r    *Resolver
	user posts.User
	b    *budget
	// ahead is a page of the user's posts read before the user was known to exist (see
	// Resolver.userByPosts), and aheadArgs the arguments it was read with.
	ahead     *posts.Page
	aheadArgs listArgs
}

// ID resolves User.id.
func (u *User) ID() ID { return u.b.id("id", u.user.ID) }

// Name resolves User.name.
func (u *User) Name() *string { return u.b.optStr("name", u.user.Name) }

// Email resolves User.email, which posts.Service shows only to the user.
func (u *User) Email() *string { return u.b.optStr("email", u.user.Email) }

// Posts resolves User.posts. Their author is this user, so it costs no query.
func (u *User) Posts(ctx context.Context, args userPostsArgs) ([]*Post, error) {
	page, err := u.page(ctx, u.listArgs(args))
	if err != nil {
		return nil, err
	}
	if !u.b.ahead("posts", page.Posts) || !u.b.list("posts", "Post", len(page.Posts)) {
		return nil, errResponseTooLarge
	}
	out := u.r.postsOf(page.Posts, u.b)
	for _, p := range out {
		p.author = u
	}
	return out, nil
}

// listArgs are the arguments of the list of the user's posts that args ask for, its limit
// UserPostsLimit (or max_limit, if smaller) when not given.
func (u *User) listArgs(args userPostsArgs) listArgs {
	id := graphql.ID(u.user.ID)
	limit := int32(min(UserPostsLimit, u.r.svc.MaxLimit()))
	if args.Limit != nil {
		limit = *args.Limit
	}
	return listArgs{UserID: &id, Search: args.Search, Since: args.Since, Until: args.Until, Order: args.Order, Limit: &limit}
}

// page is the page of the user's posts that args ask for: the one read ahead, if it was read
// with them.
func (u *User) page(ctx context.Context, args listArgs) (posts.Page, error) {
	if u.ahead != nil && u.aheadArgs.same(args) {
		return *u.ahead, nil
	}
	return u.r.list(ctx, u.b, args, "limit")
}

// PostConnection resolves a page of posts.
type PostConnection struct {
	page  posts.Page
	posts []*Post
	b     *budget
}

// Edges resolves PostConnection.edges.
func (c *PostConnection) Edges() []*PostEdge {
	if !c.b.list("edges", "PostEdge", len(c.posts)) {
		return nil
	}
	edges := make([]*PostEdge, len(c.posts))
	for i, p := range c.posts {
		edges[i] = &PostEdge{node: p, page: &c.page}
	}
	return edges
}

// PageInfo resolves PostConnection.pageInfo.
func (c *PostConnection) PageInfo() *PageInfo {
	if !c.b.objectMember("pageInfo", "PageInfo", true) {
		return nil
	}
	info := &PageInfo{hasNext: c.page.Next != "", b: c.b}
	if n := len(c.page.Posts); n > 0 {
		cursor := c.page.Cursor(c.page.Posts[n-1])
		info.endCursor = &cursor
	}
	return info
}

// PostEdge is a post and its cursor.
type PostEdge struct {
	node *Post
	page *posts.Page // the page of the list the post is in
}

// Cursor resolves PostEdge.cursor.
func (e *PostEdge) Cursor() string { return e.node.b.str("cursor", e.page.Cursor(e.node.post)) }

// Node resolves PostEdge.node.
func (e *PostEdge) Node() *Post {
	if !e.node.b.objectMember("node", "Post", true) {
		return nil
	}
	return e.node
}

// PageInfo says where a page ends.
type PageInfo struct {
	hasNext   bool
	endCursor *string
	b         *budget
}

// HasNextPage resolves PageInfo.hasNextPage.
func (i *PageInfo) HasNextPage() bool {
	i.b.scalar("hasNextPage", len(strconv.FormatBool(i.hasNext)))
	return i.hasNext
}

// EndCursor resolves PageInfo.endCursor.
func (i *PageInfo) EndCursor() *string { return i.b.optStr("endCursor", i.endCursor) }
