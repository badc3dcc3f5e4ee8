package schema

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/auth"
)

// Why a Listener ended or could not start.
var (
	// ErrFellBehind: the listener's queue filled up; it read events more slowly than they came.
	ErrFellBehind = errors.New("the subscriber reads events more slowly than they come")
	// ErrFeedFellBehind: the feed itself could not resolve events as fast as they came, and the
	// broker dropped it; every listener of it ends.
	ErrFeedFellBehind = errors.New("the server fell behind the events of this subscription")
	// ErrTooManyFeeds: as many distinct subscriptions run as Limits.MaxFeeds allows.
	ErrTooManyFeeds = errors.New("the server runs as many distinct subscriptions as it may; try again later")
)

// RefusedError ends a Listener whose operation could not run; Errors say why.
type RefusedError struct{ Errors []*gqlerrors.QueryError }

func (e *RefusedError) Error() string { return "the subscription was refused" }

// feeds are the running subscription operations, by key.
type feeds struct {
	mu  sync.Mutex
	all map[string]*feed
}

// feed is one execution of a subscription operation, shared by its listeners: each event is
// resolved and encoded once, whatever the number of subscribers.
type feed struct {
	key       string
	cancel    context.CancelFunc
	listeners map[*Listener]struct{}
}

// Listener receives the responses of one feed, encoded, on C.
type Listener struct {
	s    *Schema
	f    *feed
	c    chan json.RawMessage
	err  error // why it ended; set, under feeds.mu, before c is closed
	done bool
}

// C delivers the responses, each a JSON GraphQL response; it is closed when the listener ends.
func (l *Listener) C() <-chan json.RawMessage { return l.c }

// Err says why C was closed: nil when the subscription completed or was closed, ErrFellBehind,
// ErrFeedFellBehind, or a *RefusedError.
func (l *Listener) Err() error {
	l.s.feeds.mu.Lock()
	defer l.s.feeds.mu.Unlock()
	return l.err
}

// Close leaves the feed; the last listener to leave stops it.
func (l *Listener) Close() {
	l.s.feeds.mu.Lock()
	defer l.s.feeds.mu.Unlock()
	l.s.end(l, nil)
}

// Listen joins the feed of op, a subscription, for caller: subscribers of the same document,
// operation name and variables share one, unless op selects the caller's own email, which
// gives each caller a feed of their own. queue bounds the responses waiting for the listener.
func (s *Schema) Listen(op *Operation, caller auth.Identity, queue int) (*Listener, error) {
	vars, _ := json.Marshal(op.request.Variables) // its keys sorted: equal variables, equal bytes
	key := op.request.OperationName + "\x00" + string(vars) + "\x00" + op.document
	var as auth.Identity // the answer is everyone's, so resolve it for no one in particular
	if op.personal {
		key, as = caller.UserID+"\x00"+key, caller
	}
	l := &Listener{s: s, c: make(chan json.RawMessage, max(queue, 1))}
	s.feeds.mu.Lock()
	defer s.feeds.mu.Unlock()
	f := s.feeds.all[key]
	if f == nil && len(s.feeds.all) >= s.limits.MaxFeeds {
		return nil, ErrTooManyFeeds
	}
	if f == nil {
		ctx, cancel := context.WithCancel(auth.NewContext(context.Background(), as))
		f = &feed{key: key, cancel: cancel, listeners: map[*Listener]struct{}{}}
		if s.feeds.all == nil {
			s.feeds.all = map[string]*feed{}
		}
		s.feeds.all[key] = f
		ctx = withOverflow(ctx, func() { s.endFeed(f, ErrFeedFellBehind) })
		go s.run(ctx, f, op)
	}
	l.f = f
	f.listeners[l] = struct{}{}
	return l, nil
}

// run executes the feed's operation and hands each response to every listener.
func (s *Schema) run(ctx context.Context, f *feed, op *Operation) {
	for res := range s.subscribe(ctx, op) {
		if res.Data == nil {
			s.endFeed(f, &RefusedError{res.Errors})
			return
		}
		payload, err := json.Marshal(res)
		if err != nil {
			payload = json.RawMessage(`{"errors":[{"message":"internal server error","extensions":{"code":"` + CodeInternal + `"}}]}`)
		}
		s.feeds.mu.Lock()
		for l := range f.listeners {
			select {
			case l.c <- payload:
			default: // its queue is full: it, not the feed, is dropped
				s.end(l, ErrFellBehind)
			}
		}
		s.feeds.mu.Unlock()
	}
	s.endFeed(f, nil) // the stream completed
}

// endFeed ends every listener of f with why.
func (s *Schema) endFeed(f *feed, why error) {
	s.feeds.mu.Lock()
	defer s.feeds.mu.Unlock()
	for l := range f.listeners {
		s.end(l, why)
	}
	s.stop(f)
}

// end removes l from its feed and closes its channel, once; the feed stops with its last
// listener. feeds.mu is held.
func (s *Schema) end(l *Listener, why error) {
	if l.done {
		return
	}
	l.done, l.err = true, why
	close(l.c)
	delete(l.f.listeners, l)
	if len(l.f.listeners) == 0 {
		s.stop(l.f)
	}
}

// stop cancels f and forgets it, so that the next listener of its key starts a new one.
// feeds.mu is held.
func (s *Schema) stop(f *feed) {
	f.cancel()
	if s.feeds.all[f.key] == f {
		delete(s.feeds.all, f.key)
	}
}
