package schema

import (
	"context"
	"errors"
	"sync"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store/words"
)

// subscribe runs op, a subscription, as a stream of responses, one per event, until ctx ends or
// the stream does (its channel is then closed). Transports share it through Listen.
//
// Each event is one response, bounded as an operation is: its resolution has a budget of
// max_response_size of its own (see budget), and draws on its write's (see writes) past its
// first writeFreeBytes; an event that grows past either stops there and is answered as Execute
// answers such an operation, one RESPONSE_TOO_LARGE error and data: null. The stream goes on:
// the next event may be small, and the error is a response of an executed operation (a next
// message of graphql-transport-ws), not the end of the subscription. An event has at most
// MaxErrors errors and one more that says how many were cut.
func (s *Schema) subscribe(ctx context.Context, op *Operation) <-chan *graphql.Response {
	req := op.request
	limit := s.limits.MaxResponseSize
	// graphql-go resolves the events one after the other, in the order the stream sends them,
	// and answers each with one response: the budgets wait in that order for their responses.
	// Each holds its part of writes.building until its response comes (budget.release), or
	// the stream ends (closed): what is left then will not come.
	var (
		mu      sync.Mutex
		budgets []*budget
		closed  bool
	)
	ctx = withEventBudgets(ctx, func(name, typ string, position int64) *budget {
		b := newBudget(limit, op.shape, nil) // an event stops no execution but its own
		b.free.Store(writeFreeBytes)
		mu.Lock()
		if b.write = s.writes.of(position); b.write != nil && !closed {
			b.w = s.writes
		}
		budgets = append(budgets, b)
		mu.Unlock()
		b.charge(b.object(operationRoots[ast.Subscription]))
		b.objectMember(name, typ, true)
		return b
	})
	budgetOfNext := func() *budget {
		mu.Lock()
		defer mu.Unlock()
		if len(budgets) == 0 { // postDeleted: an id, sent as it is
			return nil
		}
		b := budgets[0]
		budgets = budgets[1:]
		return b
	}
	turn := newFeedTurn()
	ctx = withFeedTurn(ctx, turn)
	out := make(chan *graphql.Response, 1)
	var in <-chan any
	var err error
	if !inTurn(ctx, func() { in, err = s.exec.Subscribe(ctx, op.document, req.OperationName, req.Variables) }) {
		close(out)
		return out
	}
	if err != nil { // the schema has no subscriptions: a fault of ours
		out <- &graphql.Response{Errors: []*gqlerrors.QueryError{{Message: errcode.InternalMessage, Extensions: map[string]any{"code": errcode.Internal.GraphQL}}}}
		close(out)
		return out
	}
	go func() {
		defer close(out)
		defer func() {
			turn.done(true)
			mu.Lock()
			defer mu.Unlock()
			closed = true
			for _, b := range budgets {
				b.release()
			}
		}()
		for v := range in {
			turn.done(false)
			b := budgetOfNext()
			b.release()
			res, _ := v.(*graphql.Response)
			if res == nil { // not from graphql-go; still one response per event (order.go)
				res = &graphql.Response{Errors: []*gqlerrors.QueryError{{Message: errcode.InternalMessage, Extensions: map[string]any{"code": errcode.Internal.GraphQL}}}}
			}
			// The length is a second lock, as in Execute: postDeleted's id is not charged.
			switch {
			case b.exceeded() && b.overWrite.Load():
				res = tooLargeForWrite(limit)
			case b.exceeded() || int64(len(res.Data)) > limit:
				res = tooLarge(limit)
			default:
				for _, e := range res.Errors {
					// graphql-go leaves out the extensions of a subscription resolver's error
					if x, ok := e.ResolverError.(interface{ Extensions() map[string]any }); ok && e.Extensions == nil {
						e.Extensions = x.Extensions()
					}
				}
				res = capResponseErrors(res)
			}
			select {
			case out <- res:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

type pendingKey struct{}

// withPending returns a context whose subscriptions note in q the position of each event they
// match, as they match it (see order.go).
func withPending(ctx context.Context, q *pending) context.Context {
	return context.WithValue(ctx, pendingKey{}, q)
}

type subscribedKey struct{}

// withSubscribed returns a context whose subscription calls subscribed once it has subscribed
// to the events: every event handed to the events.Broker from then on reaches it.
func withSubscribed(ctx context.Context, subscribed func()) context.Context {
	return context.WithValue(ctx, subscribedKey{}, subscribed)
}

type overflowKey struct{}

// withOverflow returns a context whose subscriptions call fellBehind when they read events more
// slowly than they come and are dropped (events.ErrTooSlow), so that the feed can say so rather
// than end as if it were complete.
func withOverflow(ctx context.Context, fellBehind func()) context.Context {
	return context.WithValue(ctx, overflowKey{}, fellBehind)
}

// PostCreated resolves Subscription.postCreated.
func (r *Resolver) PostCreated(ctx context.Context, args struct {
	UserID       *graphql.ID
	Search       *string
	Since, Until *TimeArg
}) (<-chan *Post, error) {
	q, err := r.search(ctx, args.Search)
	if err != nil {
		return nil, err
	}
	within, err := r.within(ctx, args.Since, args.Until)
	if err != nil {
		return nil, err
	}
	return stream(ctx, r, func(e posts.Event) bool {
		return e.Kind == posts.Created && ofUser(e, args.UserID) && within(e.Post) && e.Found(q)
	}, r.eventPost(ctx, "postCreated"))
}

// PostUpdated resolves Subscription.postUpdated.
func (r *Resolver) PostUpdated(ctx context.Context, args struct {
	ID, UserID   *graphql.ID
	Search       *string
	Since, Until *TimeArg
}) (<-chan *Post, error) {
	q, err := r.search(ctx, args.Search)
	if err != nil {
		return nil, err
	}
	within, err := r.within(ctx, args.Since, args.Until)
	if err != nil {
		return nil, err
	}
	return stream(ctx, r, func(e posts.Event) bool {
		return e.Kind == posts.Updated && ofUser(e, args.UserID) && (args.ID == nil || string(*args.ID) == e.Post.ID) && within(e.Post) && e.Found(q)
	}, r.eventPost(ctx, "postUpdated"))
}

// search reads the search argument of a subscription, search: none when it is not given.
func (r *Resolver) search(ctx context.Context, search *string) (words.Query, error) {
	if search == nil {
		return words.Query{}, nil
	}
	q, err := r.svc.ParseSearch("search", *search)
	if err != nil {
		return words.Query{}, r.fail(ctx, err)
	}
	return q, nil
}

// within reads the since and until arguments of a subscription: whether a post was created in
// the range they bound (posts.CreatedWithin).
func (r *Resolver) within(ctx context.Context, since, until *TimeArg) (func(posts.Post) bool, error) {
	from, to, err := timeArgs(since, until)
	if err != nil {
		return nil, r.fail(ctx, err)
	}
	within, err := posts.CreatedWithin(from, to)
	if err != nil {
		return nil, r.fail(ctx, err)
	}
	return within, nil
}

// PostDeleted resolves Subscription.postDeleted. The id is an ID, not a graphql.ID, whose
// encoding is not JSON (see ID).
func (r *Resolver) PostDeleted(ctx context.Context, args struct{ UserID *graphql.ID }) (<-chan ID, error) {
	return stream(ctx, r, func(e posts.Event) bool { return e.Kind == posts.Deleted && ofUser(e, args.UserID) },
		func(e posts.Event) ID { return ID(e.Post.ID) })
}

// eventPost makes the resolver of the post of each event of the subscription of ctx, whose root
// field is name, with a budget of its own: each event is one response. A post whose titles and
// bodies cannot fit, in max_response_size or in what is left of its write's budget, spends the
// budget before any field resolves (budget.ahead), so that each writes nothing and the event
// answers RESPONSE_TOO_LARGE; one that fits waits for room among the responses being resolved
// (budget.hold).
func (r *Resolver) eventPost(ctx context.Context, name string) func(posts.Event) *Post {
	return func(e posts.Event) *Post {
		b := eventBudget(ctx, name, "Post", e.Position)
		b.ahead(name, []posts.Post{e.Post})
		b.hold(ctx)
		return r.postIn(e.Post, b)
	}
}

// overflowed tells the transport, when sub ended because its reader fell behind.
func overflowed(ctx context.Context, sub *events.Subscription[*posts.Event]) {
	if fellBehind, _ := ctx.Value(overflowKey{}).(func()); fellBehind != nil && errors.Is(sub.Err(), events.ErrTooSlow) {
		fellBehind()
	}
}

func ofUser(e posts.Event, userID *graphql.ID) bool {
	return userID == nil || string(*userID) == e.Post.UserID
}

// stream subscribes to the events that match and sends each, as item makes it, once it has its
// feed's turn (feedTurn), until ctx ends or the subscription does.
func stream[T any](ctx context.Context, r *Resolver, match func(posts.Event) bool, item func(posts.Event) T) (<-chan T, error) {
	if src, _ := ctx.Value(replayKey{}).(*replaySource); src != nil {
		return replayStream(ctx, src, match, item), nil
	}
	if q, _ := ctx.Value(pendingKey{}).(*pending); q != nil {
		// The broker matches in the order of the log, and queues what matches: the feed
		// knows the events it will answer, in order, before it answers any.
		matches := match
		match = func(e posts.Event) bool {
			if !matches(e) {
				return false
			}
			q.reserve(e.Position)
			return true
		}
	}
	sub, err := r.svc.Subscribe(match)
	if err != nil {
		return nil, r.fail(ctx, err)
	}
	if subscribed, _ := ctx.Value(subscribedKey{}).(func()); subscribed != nil {
		subscribed()
	}
	out := make(chan T)
	turn := feedTurnOf(ctx)
	go func() {
		defer close(out)
		defer sub.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-sub.C():
				if !ok {
					overflowed(ctx, sub)
					return
				}
				v := item(*e) // which may wait for room to build a large response (budget.hold): before its turn
				if _, ok := turn.take(ctx, sub.Done()); !ok {
					overflowed(ctx, sub)
					return
				}
				select {
				case out <- v:
				case <-ctx.Done():
					return
				case <-sub.Done(): // dropped while this event waited for its reader
					overflowed(ctx, sub)
					return
				}
			}
		}
	}()
	return out, nil
}
