// Running a plan (plan.go): the resolvers called in the order of the fields, the JSON
// appended into one buffer, errors and nulls as graphql-go makes them.

package schema

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/postsedge/caddy-posts/posts"
)

// executePlan runs op by its plan with the budget b and says whether it did; an operation with
// no plan goes through graphql-go's Exec.
func (s *Schema) executePlan(ctx context.Context, op *Operation, b *budget) (*graphql.Response, bool) {
	p := s.planOf(op)
	if p == nil {
		return nil, false
	}
	vars := op.request.Variables
	for _, f := range p.bound {
		if !bindable(f, arguments{vars: vars, op: op.def}) {
			return nil, false
		}
	}
	x := runs.Get().(*run)
	defer x.release()
	x.ctx, x.b, x.r, x.vars, x.op = ctx, b, s.root, vars, op.def // the resolvers are given b
	x.object(p.root, nil)
	if err := ctx.Err(); err != nil { // as Exec ends a request whose context ended
		return &graphql.Response{Errors: []*gqlerrors.QueryError{gqlerrors.Errorf("%s", err)}}, true
	}
	res := &graphql.Response{Data: append([]byte(nil), x.out...), Errors: x.errs}
	return res, true
}

// run is the state of one execution of a plan; runs keeps them for the next.
type run struct {
	ctx  context.Context
	b    *budget
	r    *Resolver
	vars map[string]any
	op   *ast.OperationDefinition
	out  []byte
	errs []*gqlerrors.QueryError
	path []pathKey // of the value being written
}

// pathKey is one step of a path: a response key, or an index in a list when key is "".
type pathKey struct {
	key   string
	index int
}

var runs = sync.Pool{New: func() any { return &run{out: make([]byte, 0, 1024)} }}

func (x *run) release() {
	if cap(x.out) > 64<<10 {
		return // a large response's buffer is not kept
	}
	*x = run{out: x.out[:0], path: x.path[:0]}
	runs.Put(x)
}

// fail adds err, a resolver's, as graphql-go adds it: at the path of the value being written.
func (x *run) fail(err error) {
	e := gqlerrors.Errorf("%s", err)
	e.Path, e.ResolverError = x.pathNow(), err
	if ex, ok := err.(interface{ Extensions() map[string]any }); ok {
		e.Extensions = ex.Extensions()
	}
	x.errs = append(x.errs, e)
}

// pathNow is the path of the value being written, as graphql-go writes a path.
func (x *run) pathNow() []any {
	path := make([]any, len(x.path))
	for i, k := range x.path {
		if k.key == "" {
			path[i] = k.index
		} else {
			path[i] = k.key
		}
	}
	return path
}

// nilNonNull adds the error graphql-go adds for a field of the non-null type typ that resolved
// to nil.
func (x *run) nilNonNull(typ string) {
	e := gqlerrors.Errorf("graphql: got nil for non-null %q", typ)
	e.Path = x.pathNow()
	x.errs = append(x.errs, e)
}

// object writes the fields of sel of the object on, one of the schema's resolvers (nil for the
// query's root), and says whether it is null: a non-null field of it was.
func (x *run) object(sel *selection, on any) (null bool) {
	start := len(x.out)
	x.out = append(x.out, '{')
	for i, f := range sel.fields {
		if i > 0 {
			x.out = append(x.out, ',')
		}
		x.out = append(x.out, '"')
		x.out = append(x.out, f.key...)
		x.out = append(x.out, '"', ':')
		x.path = append(x.path, pathKey{key: f.key})
		// Every field runs, as graphql-go runs them all before it writes the object.
		if x.field(f, on) && f.nonNull {
			null = true
		}
		x.path = x.path[:len(x.path)-1]
	}
	if null {
		x.out = append(x.out[:start], "null"...)
		return true
	}
	x.out = append(x.out, '}')
	return false
}

// field writes the value of f on the object on and says whether it is null.
func (x *run) field(f *field, on any) (null bool) {
	defer x.recoverField(len(x.out), &null)
	a := arguments{list: f.args, vars: x.vars, op: x.op}
	switch f.kind {
	case typename:
		x.out = AppendJSONString(x.out, f.typ, true)
		return false
	case queryPost:
		id, _ := a.id("id")
		p, err := x.r.post(x.ctx, x.b, id)
		return x.post(f, p, err)
	case queryUser:
		id, _ := a.id("id")
		if f.byPosts == nil {
			u, err := x.r.user(x.ctx, x.b, "user", string(id))
			return x.user(f, u, err)
		}
		args, _ := arguments{list: f.byPosts.args, vars: x.vars, op: x.op}.userPostsArgs()
		u, err := x.r.userByPosts(x.ctx, x.b, string(id), args)
		return x.user(f, u, err)
	case queryPosts:
		args, _ := a.listArgs("limit")
		ps, err := x.r.posts(x.ctx, x.b, args, f.authors)
		return x.posts(f, ps, err)
	case queryPostsConnection:
		args, _ := a.listArgs("first")
		c, err := x.r.postsConnection(x.ctx, x.b, args, f.authors)
		switch {
		case err != nil:
			x.fail(err)
			return x.null()
		case c == nil:
			x.nilNonNull("PostConnection")
			return x.null()
		}
		return x.object(f.sel, c)
	}
	switch on := on.(type) {
	case *Post:
		return x.postField(f, on)
	case *User:
		return x.userField(f, on, a)
	case *PostConnection:
		switch f.kind {
		case connectionEdges:
			return x.edges(f, on.Edges())
		case connectionPageInfo:
			if info := on.PageInfo(); info != nil {
				return x.object(f.sel, info)
			}
			x.nilNonNull("PageInfo")
			return x.null()
		}
	case *PostEdge:
		switch f.kind {
		case edgeCursor:
			x.out = AppendJSONString(x.out, on.Cursor(), true)
		case edgeNode:
			if node := on.Node(); node != nil {
				return x.object(f.sel, node)
			}
			x.nilNonNull("Post")
			return x.null()
		}
	case *PageInfo:
		switch f.kind {
		case pageHasNextPage:
			x.out = strconv.AppendBool(x.out, on.HasNextPage())
		case pageEndCursor:
			x.optString(on.EndCursor())
		}
	}
	return false
}

// recoverField answers a resolver's panic as graphql-go does: logged, and the field, which
// began at start, null with a server fault at its path.
func (x *run) recoverField(start int, null *bool) {
	if v := recover(); v != nil {
		x.r.LogPanic(x.ctx, v)
		e := x.r.MakePanicError(x.ctx, v)
		e.Path = x.pathNow()
		x.errs = append(x.errs, e)
		x.out = x.out[:start]
		*null = x.null()
	}
}

// null writes null and says so.
func (x *run) null() bool {
	x.out = append(x.out, "null"...)
	return true
}

func (x *run) optString(s *string) bool {
	if s == nil {
		return x.null()
	}
	x.out = AppendJSONString(x.out, *s, true)
	return false
}

// post writes the post p (nil: null) that a field resolved, or its error.
func (x *run) post(f *field, p *Post, err error) bool {
	if err != nil {
		x.fail(err)
		return x.null()
	}
	if p == nil {
		return x.null()
	}
	return x.object(f.sel, p)
}

// user writes the user u (nil: null) that a field resolved, or its error.
func (x *run) user(f *field, u *User, err error) bool {
	if err != nil {
		x.fail(err)
		return x.null()
	}
	if u == nil {
		return x.null()
	}
	return x.object(f.sel, u)
}

// posts writes a list of posts, [Post!]!, or its error.
func (x *run) posts(f *field, ps []*Post, err error) bool {
	if err != nil {
		x.fail(err)
		return x.null()
	}
	if ps == nil {
		x.nilNonNull("[Post!]")
		return x.null()
	}
	return writeList(x, f.sel, ps)
}

// edges writes the edges of a connection, [PostEdge!]!.
func (x *run) edges(f *field, edges []*PostEdge) bool {
	if edges == nil {
		x.nilNonNull("[PostEdge!]")
		return x.null()
	}
	return writeList(x, f.sel, edges)
}

// writeList writes items, a list of non-null objects each with the fields of sel, and says whether
// it is null: a null among them makes it null, once all are written, as graphql-go does.
func writeList[T any](x *run, sel *selection, items []T) (null bool) {
	start := len(x.out)
	x.out = append(x.out, '[')
	for i, item := range items {
		if i > 0 {
			x.out = append(x.out, ',')
		}
		x.path = append(x.path, pathKey{index: i})
		if x.object(sel, item) {
			null = true
		}
		x.path = x.path[:len(x.path)-1]
	}
	if null {
		x.out = append(x.out[:start], "null"...)
		return true
	}
	x.out = append(x.out, ']')
	return false
}

// postField writes the field f of the post p.
func (x *run) postField(f *field, p *Post) bool {
	switch f.kind {
	case postID:
		x.out = AppendJSONString(x.out, string(p.ID()), true)
	case postUserID:
		x.out = AppendJSONString(x.out, string(p.UserID()), true)
	case postTitle:
		x.out = AppendJSONString(x.out, p.Title(), true)
	case postBody:
		return x.optString(p.Body())
	case postCreatedAt:
		x.out = appendTime(x.out, p.CreatedAt())
	case postUpdatedAt:
		x.out = appendTime(x.out, p.UpdatedAt())
	case postVersion:
		x.out = strconv.AppendInt(x.out, int64(p.Version()), 10)
	case postAuthor:
		u, err := p.Author(x.ctx)
		return x.user(f, u, err)
	default:
		panic(fmt.Sprintf("a plan has field kind %d on a Post", f.kind))
	}
	return false
}

// userField writes the field f of the user u.
func (x *run) userField(f *field, u *User, a arguments) bool {
	switch f.kind {
	case userID:
		x.out = AppendJSONString(x.out, string(u.ID()), true)
	case userName:
		return x.optString(u.Name())
	case userEmail:
		return x.optString(u.Email())
	case userPosts:
		args, _ := a.userPostsArgs()
		ps, err := u.Posts(x.ctx, args)
		return x.posts(f, ps, err)
	default:
		panic(fmt.Sprintf("a plan has field kind %d on a User", f.kind))
	}
	return false
}

// appendTime appends t as Time's MarshalJSON writes it.
func appendTime(out []byte, t Time) []byte {
	out = append(out, '"')
	out = t.UTC().AppendFormat(out, posts.TimeFormat)
	return append(out, '"')
}
