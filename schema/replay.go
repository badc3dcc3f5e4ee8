package schema

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"
	"unicode/utf8"

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
//     largest position), and holds back those of the connection's other subscriptions (its
//     replay may still match any event: its pending's open).
//  2. The cursor is read (posts.Service.ResumeAfter): one the log did not make is refused, one
//     whose event the log no longer keeps is CURSOR_EXPIRED. Once the feed's subscription to
//     the events is made, the replay reads up to the last position handed to the broker
//     (posts.Service.Handed); a cursor more than max_resume_events behind it is
//     RESUME_TOO_LONG.
//  3. The replay runs the operation again, for this listener alone, over the events of the log
//     after the cursor, read a page at a time, at the client's pace (Sequence.pace), and checks
//     after each page that the log still keeps where it read from (else CURSOR_EXPIRED: the
//     expiry cut in). The feed's responses go on being dropped meanwhile: they are in the log,
//     and the replay reads them in turn, however long it takes, with nothing held.
//  4. Whenever it has read as far as it meant to, it looks again, under the feeds' lock, at the
//     last position handed: far ahead, it reads on to there; within a page, that position is the
//     seam: the listener takes the feed's responses after it from then on (held, in order, until
//     the replay has answered the rest), and the replay reads up to it and ends.
//
// A listener that its Sequence held back past its limit, or whose feed fell behind the events
// (Schema.fellBehind), is replayed the same way, from the position after the last response it
// got, with no cursor to read (Sequence.reread, Sequence.rejoin). A reread
// that cannot go on (the log no longer keeps where it reads from) ends its listener as a feed
// that fell behind (ErrFeedFellBehind, which the transports end as TOO_SLOW), never as a
// refused resume: the listener may never have sent a cursor, and one that did resumes again
// from the last event it got. caddy_posts_resumes_total counts the client's resumes alone.
//
// Nothing of a resume refused at the start is delivered: the client refetches, and subscribes
// without it. An expiry that cuts into a replay under way ends it with CURSOR_EXPIRED after the
// events it had read.

// replayPage is how many events a replay reads at a time, at most; how many it reads is
// what replayPageBytes holds of events the size of its last page's (pageFor).
const replayPage = 100

// replayPageBytes is about how many bytes of posts a replay's page holds, which it keeps until
// the client has taken the page's last response: a hundred stalled resumes of one client hold
// a few tens of megabytes, not the hundreds that pages of a hundred of the largest posts would.
const replayPageBytes = 256 << 10

// eventBytes is what an event of post p holds in memory, about.
func eventBytes(p posts.Post) int {
	n := 256 + len(p.ID) + len(p.UserID) + len(p.Title)
	if p.Body != nil {
		n += len(*p.Body)
	}
	return n
}

// largestEvent is eventBytes of the largest post there may be: a replay's first page is sized
// for it, as nothing tells it the size of the posts it is about to read.
var largestEvent = 256 + 2*24 + utf8.UTFMax*(posts.MaxTitleLength+posts.MaxBodyLength)

// pageFor is how many events a replay reads next, after a page of n events that held bytes.
func pageFor(n, bytes int) int {
	if n == 0 {
		return max(1, replayPageBytes/largestEvent)
	}
	return min(replayPage, max(1, replayPageBytes*n/max(bytes, 1)))
}

// replayFrom starts a replay of l from the event after position from, or, when resumes, from
// its operation's cursor (step 2 on), in place of the one it had; q.mu is held. It resolves in
// the context of l's feed (anonymous, or its caller's), and stops when l leaves or reread starts
// another.
func (q *Sequence) replayFrom(l *Listener, from int64, resumes bool) {
	if l.stopReplay != nil {
		l.stopReplay()
	}
	ctx, stop := context.WithCancel(l.resolveIn)
	r := &pending{open: from + 1}
	l.after, l.replay, l.stopReplay = math.MaxInt64, r, stop
	if !resumes {
		l.delivered = from
	}
	go l.s.replay(ctx, l, l.f.ready, r, from, resumes)
}

// replay is r, the replay of l from the event after from, or from its operation's cursor when
// resumes: steps 2 to 4 above. Each of its acts on l's Sequence checks that r is still l's
// replay. Of a traced subscription (Traced), it is one span, graphql.subscription.replay, with
// the count of events it replayed.
func (s *Schema) replay(ctx context.Context, l *Listener, subscribed <-chan struct{}, r *pending, from int64, resumes bool) {
	if resumes {
		var err error
		if from, err = s.svc.ResumeAfter(ctx, l.op.resumeFrom); err != nil {
			s.refuseResume(ctx, l, err)
			return
		}
	}
	select {
	case <-subscribed: // l's feed's, read under its Sequence's mu when the replay began
	case <-ctx.Done():
		return
	}
	handed, _ := s.svc.Handed() // read: ResumeAfter waited for it
	if resumes && !l.op.checked {
		if err := s.withinResume(handed, from); err != nil {
			s.refuseResume(ctx, l, err)
			return
		}
	}
	l.seq.start(l, r, from)
	span := l.op.traced.replaySpan(from)
	defer span.End()
	replayed := 0
	defer func() { span.Int("posts.replay.events", int64(replayed)) }()

	src := &replaySource{svc: s.svc, q: r, from: from, upto: max(handed, from),
		pace: func(ctx context.Context) error { return l.seq.pace(ctx, l) },
		hold: l.seq.hold,
		read: l.seq.recheck,
		seam: func(read int64) (upto int64, last bool) {
			// Under feeds.mu, which Schema.run holds while it hands a response: the feed
			// hands none between Handed and the seam.
			s.feeds.mu.Lock()
			defer s.feeds.mu.Unlock()
			handed, _ := s.svc.Handed()
			upto = max(handed, read) // a cursor of another instance may be ahead of this one
			if upto-read > replayPage {
				return upto, false
			}
			l.seq.seam(l, r, upto)
			return upto, true
		}}
	for res := range s.subscribe(withReplay(ctx, src), l.op) {
		if l.seq.arriveReplayed(l, r, s.encode(res, r.oldest())) {
			metrics.EventReplayed()
			replayed++
		}
	}
	if ctx.Err() != nil {
		return
	}
	switch {
	case src.err != nil && resumes:
		span.Fail(src.err, "")
		s.refuseResume(ctx, l, src.err)
	case src.err != nil:
		// A reread (Sequence.reread) that cannot go on: its listener never sent the cursor
		// that a refused resume tells the client to drop, and a client that did has its resume
		// answered when it resumes again, from the last event it got.
		s.endListener(l, ErrFeedFellBehind)
	default:
		l.seq.replayed(l, r)
	}
}

// start notes that r, l's replay, reads the log after position from, which l has every event up
// to (its cursor's, or where a reread starts), and hands what may go; not if r is no longer l's
// replay.
func (q *Sequence) start(l *Listener, r *pending, from int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if l.replay != r {
		return
	}
	r.readTo(from)
	l.delivered = from
	q.release()
}

// seam makes l take its feed's responses after position upto from now on, if r is still its
// replay.
func (q *Sequence) seam(l *Listener, r *pending, upto int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if l.replay == r {
		l.after = upto
	}
}

// replayed ends r, l's replay, which has answered every event up to its seam, and hands what
// waited for it; not if r is no longer l's replay. A resume is counted ok here, whether its
// own replay or a reread's reached the seam.
func (q *Sequence) replayed(l *Listener, r *pending) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if l.replay != r {
		return
	}
	if l.resuming {
		l.resuming = false
		if !l.op.checked {
			metrics.Resumed(metrics.ResumeOK)
		}
	}
	l.stopReplay()
	l.replay, l.stopReplay = nil, nil
	q.release()
}

// refuseResume ends l, whose resume failed with err, unless it has left.
func (s *Schema) refuseResume(ctx context.Context, l *Listener, err error) {
	if ctx.Err() != nil {
		return
	}
	e := errcode.Of(err)
	if !l.op.checked {
		countRefused(e)
	}
	s.endListener(l, &RefusedError{Errors: []*gqlerrors.QueryError{{Message: e.Message, Extensions: e.Extensions()}}})
}

// countRefused counts e, the refusal of a resume, in the metrics.
func countRefused(e *errcode.Error) {
	switch e.Code {
	case errcode.CursorExpired:
		metrics.Resumed(metrics.ResumeExpired)
	case errcode.BadUserInput, errcode.ResumeTooLong:
		metrics.Resumed(metrics.ResumeRefused)
	}
}

// withinResume refuses a resume from position from while handed is the last position handed to
// the live subscribers: one more than max_resume_events behind is RESUME_TOO_LONG.
func (s *Schema) withinResume(handed, from int64) error {
	if behind := handed - from; behind > s.limits.MaxResume {
		metrics.LimitRefused("max_resume_events")
		return &errcode.Error{Code: errcode.ResumeTooLong, Message: fmt.Sprintf("the cursor is %d events of the log behind, more than max_resume_events (%d) allows replaying: "+
			"fetch what you show again, then subscribe without resumeFrom", behind, s.limits.MaxResume)}
	}
	return nil
}

// Resumable checks, before a stream starts, what its resume from cursor would be refused for
// (step 2 above): a cursor the log did not make, one whose next events it no longer keeps, one
// too far behind; its transport answers the refusal with a status. The replay checks again. The
// resume is counted in the metrics here, once for the stream, refused or not: the stream's
// operations are not counted (ChangesOf).
func (s *Schema) Resumable(ctx context.Context, cursor string) error {
	from, err := s.svc.ResumeAfter(ctx, cursor)
	if err == nil {
		handed, _ := s.svc.Handed()
		err = s.withinResume(handed, from)
	}
	switch {
	case err == nil:
		metrics.Resumed(metrics.ResumeOK)
	case !errors.Is(err, posts.ErrUnavailable):
		countRefused(errcode.Of(err))
	}
	return err
}

// replaySource is where a replay's subscription reads its events: the log, after from, rather
// than the events.Broker.
type replaySource struct {
	svc        *posts.Service
	q          *pending                    // the replay's, whose open it moves on as it reads
	from, upto int64                       // the cursor's position, and how far to read before the seam is looked at
	pace       func(context.Context) error // waits until the client can take a response
	hold       func(n int)                 // told of the bytes of each page read, and of each dropped (Sequence.hold)
	read       func()                      // called after each page
	// seam is called once the log is read up to read: it says how far to read next, and
	// whether that is the last read (the listener then takes the feed's responses after it).
	seam func(read int64) (upto int64, last bool)
	err  error // why it stopped early; read once the stream closed
}

type replayKey struct{}

// withReplay returns a context whose subscription reads its events from src.
func withReplay(ctx context.Context, src *replaySource) context.Context {
	return context.WithValue(ctx, replayKey{}, src)
}

// errNoProgress: the log is not decided past a position for longer than a replay waits.
var errNoProgress = errors.New("the event log did not read past a position in time")

// replayStream sends, as item makes it, each event of src that matches, in the order of the
// log, up to the seam, then closes. A position the log has not decided yet (a hole on MongoDB,
// decided within seconds) is waited for.
//
// A replay has its events at hand, and would take the machine's every core from the live
// subscribers while it resolves them: after each replayBurst events it rests as long as they
// took to resolve and send (busy; restDebt), so that it takes half of a core at most, in bursts short
// enough that a live event waits for none of them long. busy leaves out the waits for the log
// and for its turn (pace): a replay that waited while the others' events went first would
// otherwise rest as long again, and hold them back in turn, each rest longer than the last.
// Every replay of the process also takes one of turnsToReplay for each event it resolves: half
// the cores, between them all; and, as a live feed does, one of turnsToResolve (feedTurn), whose
// wait busy leaves out too.
func replayStream[T any](ctx context.Context, src *replaySource, match func(posts.Event) bool, item func(posts.Event) T) <-chan T {
	out := make(chan T)
	turn := feedTurnOf(ctx)
	go func() {
		defer close(out)
		after, stuck, last, sent, busy := src.from, time.Time{}, false, 0, time.Duration(0)
		var turnRest, burstRest restDebt // the rests owed with the turn to replay, and after a burst
		// The events and bytes of the last page that had any, and the bytes of the page held,
		// which src.hold was told of.
		size, sized, held := 0, 0, 0
		defer func() { src.hold(-held) }()
		for {
			if after >= src.upto {
				if last {
					return
				}
				src.upto, last = src.seam(after)
				continue
			}
			page, read, err := src.svc.ReadEvents(ctx, after, pageFor(size, sized))
			bytes := 0
			for _, e := range page {
				bytes += eventBytes(e.Post)
			}
			src.hold(bytes - held)
			if held = bytes; len(page) > 0 {
				size, sized = len(page), bytes
			}
			if err == nil {
				err = src.svc.StillKept(ctx, after) // what the page began after: nothing expired since
			}
			if err != nil {
				src.err = err
				return
			}
			for _, e := range page {
				if e.Position > src.upto {
					break
				}
				src.q.readTo(e.Position - 1)
				if !match(e) {
					continue
				}
				src.q.reserve(e.Position)
				if src.pace(ctx) != nil {
					return
				}
				made := time.Now()
				v := item(e) // which may wait for room to build a large response (budget.hold): before any turn
				making := time.Since(made)
				if !takeTurn(ctx) {
					return
				}
				// Once the event before is resolved, a turn to resolve this one: the wait for the
				// one before is the replay's, the wait for the turn the live feeds'.
				began := time.Now()
				waited, ok := turn.take(ctx, nil)
				if !ok {
					<-turnsToReplay
					return
				}
				var work time.Duration
				select {
				case out <- v:
					// The turn is kept as long again: all the replays together take half of
					// turnsToReplay's cores.
					work = making + time.Since(began) - waited
					if !turnRest.pay(ctx, work) {
						<-turnsToReplay
						return
					}
					<-turnsToReplay
				case <-ctx.Done():
					<-turnsToReplay
					return
				}
				busy += work
				if sent++; sent%replayBurst == 0 {
					if !burstRest.pay(ctx, busy) {
						return
					}
					busy = 0
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
				if !rest(ctx, 100*time.Millisecond) {
					return
				}
			}
		}
	}()
	return out
}

// turnsToReplay are the turns every replay of the process takes to hand an event to its
// execution: half the machine's cores, each kept as long again as its hand-over took, so that
// the replays together take a quarter of them. Each replay rests as long as it worked (replayStream), but
// a hundred clients resuming at once would take every core from the live subscribers and every
// other request without this bound on them all. The hand-over of an event waits for the
// execution to have resolved the one before (graphql-go takes the next event once it has sent
// the last one's response), so a turn held for it covers that resolution; the replay's goroutine
// takes and gives back each turn itself (takeTurn), so none is kept by a replay that ends.
var turnsToReplay = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// takeTurn waits for a turn of turnsToReplay, or until ctx ends: false then.
func takeTurn(ctx context.Context) bool {
	select {
	case turnsToReplay <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// rest waits d, or until ctx ends: false then.
func rest(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// restDebt is a rest owed, taken once it comes to minRest: a timer sleeps a millisecond at
// least (1.09 ms for one of 20 µs, on 2 cores), and a rest of the 20 to 50 µs each event took
// held a replay to under 1,400 events a second (10,000 in 7.5 to 9.3 s) rather than to its part
// of the cores.
type restDebt time.Duration

// minRest is the shortest rest a restDebt takes.
const minRest = 2 * time.Millisecond

// maxOwed is the most a restDebt owes for one piece of work: a wait for the store counted in it
// (the event before resolved) is no core's, and a replay that rested a slow database's seconds
// with its turn to replay would hold every other replay back as long.
const maxOwed = 10 * minRest

// pay adds d, up to maxOwed, to what o owes and, once that comes to minRest, rests as long;
// what the timer slept past it counts as paid ahead, up to minRest. False when ctx ends first.
func (o *restDebt) pay(ctx context.Context, d time.Duration) bool {
	if *o += restDebt(min(d, maxOwed)); *o < restDebt(minRest) {
		return true
	}
	began := time.Now()
	ok := rest(ctx, time.Duration(*o))
	*o = max(*o-restDebt(time.Since(began)), -restDebt(minRest))
	return ok
}

// replayBurst is how many events a replay sends between two rests: some 10 µs each to read,
// resolve and encode on the embedded store.
const replayBurst = 16

// replayStuck is how long a replay waits for the log to decide a position: longer than a hole
// takes on MongoDB.
const replayStuck = 10 * time.Second
