package schema

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/posts"
)

// Resuming. A subscription started with extensions.resumeFrom, the cursor of the last event its
// client received, first gets from the event log every event after that cursor it matches, then
// its feed's, with none missed and none twice at the seam:
//
//  1. The listener joins its feed at once, but takes none of its responses (after is the
//     largest position) and holds back those of the connection's other subscriptions (its
//     replay may still match any event).
//  2. The cursor is read (posts.Service.ResumeAfter): one the log did not make is refused, one
//     whose event the log no longer keeps is CURSOR_EXPIRED.
//  3. Once the feed's subscription to the events is made, the seam is fixed under the feeds'
//     lock: upto is the last position handed to the broker, so every later event reaches the
//     feed, and the listener takes the feed's responses after upto from then on. It would
//     replay more than max_resume_events positions: RESUME_TOO_LONG.
//  4. The replay runs the operation again, for this listener alone, over the events of the log
//     from the cursor to upto, read a page at a time, at the client's pace (Sequence.pace). Its
//     responses, and the feed's held meanwhile, are released in the order of positions.
//
// Nothing of a refused resume is delivered: the client refetches, and subscribes without it.

// replayPage is how many events a replay reads at a time: a page of the largest posts stays a
// few megabytes.
const replayPage = 100

// startReplay starts the replay of l, which has just joined its feed with op, and whose
// responses resolve in ctx (the feed's: anonymous, or the caller's); feeds.mu is held.
func (s *Schema) startReplay(ctx context.Context, l *Listener, op *Operation) {
	ctx, l.stopReplay = context.WithCancel(ctx)
	l.after, l.replay = math.MaxInt64, &pending{open: 1}
	go s.replay(ctx, l, op)
}

// replay is the replay of l: steps 2 to 4 above.
func (s *Schema) replay(ctx context.Context, l *Listener, op *Operation) {
	from, err := s.svc.ResumeAfter(ctx, op.resumeFrom)
	if err != nil {
		s.refuseResume(ctx, l, err)
		return
	}
	select {
	case <-l.f.ready:
	case <-ctx.Done():
		return
	}
	s.feeds.mu.Lock()
	handed, _ := s.svc.Handed() // read: ResumeAfter waited for it
	upto := max(handed, from)   // a cursor of another instance may be ahead of this one
	if upto-from > s.limits.MaxResume {
		s.feeds.mu.Unlock()
		s.refuseResume(ctx, l, &errcode.Error{Code: errcode.ResumeTooLong, Message: resumeTooLong(upto-from, s.limits.MaxResume)})
		return
	}
	l.after = upto
	l.replay.readTo(from)
	l.seq.recheck()
	s.feeds.mu.Unlock()

	src := &replaySource{svc: s.svc, q: l.replay, from: from, upto: upto,
		pace: func(ctx context.Context) error { return l.seq.pace(ctx, l) },
		read: func() {
			s.feeds.mu.Lock()
			l.seq.recheck()
			s.feeds.mu.Unlock()
		}}
	for res := range s.subscribe(withReplay(ctx, src), op) {
		payload := s.encode(res, l.replay.oldest())
		s.feeds.mu.Lock()
		if position := l.replay.resolved(); !l.done {
			l.seq.arrive(l, position, payload)
			metrics.EventReplayed()
		}
		s.feeds.mu.Unlock()
	}
	if ctx.Err() != nil {
		return
	}
	if src.err != nil {
		s.refuseResume(ctx, l, src.err)
		return
	}
	metrics.Resumed(metrics.ResumeOK)
	s.feeds.mu.Lock()
	l.replay = nil
	if !l.done {
		l.seq.recheck()
	}
	s.feeds.mu.Unlock()
}

// refuseResume ends l, whose resume failed with err, unless it has left.
func (s *Schema) refuseResume(ctx context.Context, l *Listener, err error) {
	if ctx.Err() != nil {
		return
	}
	e := errcode.Of(err)
	switch e.Code {
	case errcode.CursorExpired:
		metrics.Resumed(metrics.ResumeExpired)
	case errcode.BadUserInput, errcode.ResumeTooLong:
		metrics.Resumed(metrics.ResumeRefused)
	}
	s.endListener(l, &RefusedError{Errors: []*gqlerrors.QueryError{{Message: e.Message, Extensions: e.Extensions()}}})
}

func resumeTooLong(behind, limit int64) string {
	metrics.LimitRefused("max_resume_events")
	return fmt.Sprintf("the cursor is %d events of the log behind, more than max_resume_events (%d) allows replaying: "+
		"fetch what you show again, then subscribe without resumeFrom", behind, limit)
}

// replaySource is where a replay's subscription reads its events: the log, after from up to
// upto, rather than the broker.
type replaySource struct {
	svc        *posts.Service
	q          *pending // the replay's, whose open it moves on as it reads
	from, upto int64
	pace       func(context.Context) error // waits until the client can take a response
	read       func()                      // called after each page
	err        error                       // why it stopped early; read once the stream closed
}

type replayKey struct{}

// withReplay returns a context whose subscription reads its events from src.
func withReplay(ctx context.Context, src *replaySource) context.Context {
	return context.WithValue(ctx, replayKey{}, src)
}

// errNoProgress: the log is not decided past a position for longer than a replay waits.
var errNoProgress = errors.New("the event log did not read past a position in time")

// replayStream sends, as item makes it, each event of src that matches, in the order of the
// log, then closes. A position the log has not decided yet (a hole on MongoDB, decided within
// seconds) is waited for.
func replayStream[T any](ctx context.Context, src *replaySource, match func(posts.Event) bool, item func(posts.Post) T) <-chan T {
	out := make(chan T)
	go func() {
		defer close(out)
		after, stuck := src.from, time.Time{}
		for after < src.upto {
			page, read, err := src.svc.ReadEvents(ctx, after, replayPage)
			if err != nil {
				src.err = err
				return
			}
			for _, e := range page {
				if e.Position > src.upto {
					break
				}
				src.q.readTo(e.Position - 1)
				if match(e) {
					src.q.reserve(e.Position)
					if src.pace(ctx) != nil {
						return
					}
					select {
					case out <- item(e.Post):
					case <-ctx.Done():
						return
					}
				}
			}
			switch {
			case read > after:
				after, stuck = min(read, src.upto), time.Time{}
				src.q.readTo(after)
				src.read()
			case stuck.IsZero():
				stuck = time.Now()
			case time.Since(stuck) > replayStuck:
				src.err = errNoProgress
				return
			default:
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}()
	return out
}

// replayStuck is how long a replay waits for the log to decide a position: longer than a hole
// takes on MongoDB.
const replayStuck = 10 * time.Second
