package schema

import (
	"context"
	"errors"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/posts"
)

// subscribe runs op, a subscription, as a stream of responses, one per event, until ctx ends or
// the stream does (its channel is then closed). Transports share it through Listen.
func (s *Schema) subscribe(ctx context.Context, op *Operation) <-chan *graphql.Response {
	req := op.request
	in, err := s.exec.Subscribe(ctx, op.document, req.OperationName, req.Variables)
	out := make(chan *graphql.Response, 1)
	if err != nil { // the schema has no subscriptions: a fault of ours
		out <- &graphql.Response{Errors: []*gqlerrors.QueryError{{Message: "internal server error", Extensions: map[string]any{"code": CodeInternal}}}}
		close(out)
		return out
	}
	go func() {
		defer close(out)
		for v := range in {
			res, _ := v.(*graphql.Response)
			if res == nil {
				continue
			}
			for _, e := range res.Errors {
				// graphql-go leaves out the extensions of a subscription resolver's error
				if x, ok := e.ResolverError.(interface{ Extensions() map[string]any }); ok && e.Extensions == nil {
					e.Extensions = x.Extensions()
				}
			}
			if res.Data == nil {
				tagRequestErrors(res.Errors)
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

type overflowKey struct{}

// withOverflow returns a context whose subscriptions call fellBehind when they read events more
// slowly than they come and are dropped (events.ErrTooSlow), so that the feed can say so rather
// than end as if it were complete.
func withOverflow(ctx context.Context, fellBehind func()) context.Context {
	return context.WithValue(ctx, overflowKey{}, fellBehind)
}

// PostCreated resolves Subscription.postCreated.
func (r *Resolver) PostCreated(ctx context.Context, args struct{ UserID *graphql.ID }) (<-chan *Post, error) {
	return stream(ctx, r, func(e posts.Event) bool { return e.Kind == posts.Created && ofUser(e, args.UserID) }, r.post)
}

// PostUpdated resolves Subscription.postUpdated.
func (r *Resolver) PostUpdated(ctx context.Context, args struct{ ID, UserID *graphql.ID }) (<-chan *Post, error) {
	return stream(ctx, r, func(e posts.Event) bool {
		return e.Kind == posts.Updated && ofUser(e, args.UserID) && (args.ID == nil || string(*args.ID) == e.Post.ID)
	}, r.post)
}

// PostDeleted resolves Subscription.postDeleted.
func (r *Resolver) PostDeleted(ctx context.Context, args struct{ UserID *graphql.ID }) (<-chan graphql.ID, error) {
	return stream(ctx, r, func(e posts.Event) bool { return e.Kind == posts.Deleted && ofUser(e, args.UserID) },
		func(p posts.Post) graphql.ID { return graphql.ID(p.ID) })
}

// overflowed tells the transport, when sub ended because its reader fell behind.
func overflowed(ctx context.Context, sub *events.Subscription[posts.Event]) {
	if fellBehind, _ := ctx.Value(overflowKey{}).(func()); fellBehind != nil && errors.Is(sub.Err(), events.ErrTooSlow) {
		fellBehind()
	}
}

func ofUser(e posts.Event, userID *graphql.ID) bool {
	return userID == nil || string(*userID) == e.Post.UserID
}

// stream subscribes to the events that match and sends each, as item makes it, until ctx ends
// or the subscription does.
func stream[T any](ctx context.Context, r *Resolver, match func(posts.Event) bool, item func(posts.Post) T) (<-chan T, error) {
	sub, err := r.svc.Subscribe(match)
	if err != nil {
		return nil, r.fail(err)
	}
	out := make(chan T)
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
				select {
				case out <- item(e.Post):
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
