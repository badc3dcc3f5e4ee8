package posts

import (
	"context"
	"errors"
	"fmt"

	"github.com/postsedge/caddy-posts/store"
)

// Resuming a subscription from a cursor: the position of the last event a client received, in
// the store's event log, which every instance on the store shares and a restart keeps.

// ErrCursorExpired: the log no longer keeps the events after the cursor (events_ttl, or the cap
// on its size), so a client resuming from it would miss some without knowing.
var ErrCursorExpired = errors.New("the events after this cursor are no longer kept: fetch what you show again, then subscribe without resumeFrom")

// Cursor is the cursor of the event at position, which a client resumes after. "" while the
// log has not been read (no event is handed before it is).
func (s *Service) Cursor(position int64) string {
	if s.follower == nil || position < 1 {
		return ""
	}
	return s.follower.Cursors().Make(position)
}

// Seen is the position of the event log that a caller's reads reflect (store.Seen).
type Seen = store.Seen

// WithSeen returns a context whose reads (Get, List) note the position of the log they reflect
// in the Seen it returns, for ReadCursor; where the service publishes no events, ctx itself and
// nil, so that no read pays for a position.
func (s *Service) WithSeen(ctx context.Context) (context.Context, *Seen) {
	if s.follower == nil {
		return ctx, nil
	}
	return store.WithSeen(ctx)
}

// ReadCursor is the cursor of the position seen, which the reads of a context of WithSeen noted:
// a subscription that resumes from it gets every change that they did not show. "" when they
// noted none, or one could not (Seen.Lose). Until the log is read (its key known: a service
// that has just started), it waits for it as a store call would, then gives "".
func (s *Service) ReadCursor(ctx context.Context, seen *Seen) string {
	if seen == nil {
		return ""
	}
	position, noted := seen.Position()
	if !noted {
		return ""
	}
	if s.logRead(ctx) != nil {
		return ""
	}
	// Reads between two writes share their position: its cursor is signed once.
	if last := s.readCursor.Load(); last != nil && last.position == position {
		return last.cursor
	}
	c := &positionCursor{position, s.follower.Cursors().Make(position)}
	s.readCursor.Store(c)
	return c.cursor
}

// HandedCursor is the cursor of the last position handed to this instance's subscribers
// (Handed), once the log is read, which it waits for as a store call would: subscriptions that
// all resume from it start at one position, none missing what another got between their
// starts.
func (s *Service) HandedCursor(ctx context.Context) (string, error) {
	if s.follower == nil {
		return "", fmt.Errorf("%w: this service publishes no events", ErrUnavailable)
	}
	if err := s.logRead(ctx); err != nil {
		return "", err
	}
	handed, _ := s.follower.Handed()
	return s.follower.Cursors().Make(handed), nil
}

// logRead waits until the follower has read where the log ends (its key known: Cursors), as a
// store call waits: an error of ErrUnavailable once the service's timeout or ctx ends first.
func (s *Service) logRead(ctx context.Context) error {
	select {
	case <-s.follower.Started():
		return nil // the log is read: no timer
	default:
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	select {
	case <-s.follower.Started():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: the event log is not read yet", ErrUnavailable)
	}
}

// positionCursor is a position of the log and its cursor.
type positionCursor struct {
	position int64
	cursor   string
}

// ResumeAfter returns the position that cursor names, once the log is read: a cursor this log
// did not make (malformed, altered, another store's) is an *InvalidError of field resumeFrom,
// with no store read; one whose event the log no longer keeps is ErrCursorExpired.
func (s *Service) ResumeAfter(ctx context.Context, cursor string) (int64, error) {
	if s.follower == nil {
		return 0, fmt.Errorf("%w: this service publishes no events", ErrUnavailable)
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	if err := s.logRead(ctx); err != nil {
		return 0, err
	}
	position, err := s.follower.Cursors().Read(cursor)
	if err != nil {
		return 0, invalid("resumeFrom", "resumeFrom is not a cursor of this server's event log: send the extensions.cursor of the last event received, as it came")
	}
	if err := s.StillKept(ctx, position); err != nil {
		return 0, err
	}
	return position, nil
}

// StillKept checks that the log still keeps every event after position, which a replay has read
// from, or a read reflects (ReadCursor), in one read of the log (store.EventLog.KeepsAfter): once
// it does not, the expiry may have taken what followed it (ErrCursorExpired). A read's position
// may be that of an event expired since (a quiet store), with nothing after it lost.
func (s *Service) StillKept(ctx context.Context, position int64) error {
	if s.follower == nil {
		return fmt.Errorf("%w: this service publishes no events", ErrUnavailable)
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	switch kept, err := s.follower.Log().KeepsAfter(ctx, position); {
	case err != nil:
		return fromStore(err)
	case !kept:
		return ErrCursorExpired
	}
	return nil
}

// Handed is the position of the last event handed to this instance's subscribers (or passed
// over): a subscription open now gets every later one it matches. False before the log is read.
func (s *Service) Handed() (int64, bool) {
	if s.follower == nil {
		return 0, false
	}
	return s.follower.Handed()
}

// ReadEvents returns at most limit events of the log after position after, in order, and the
// position it read up to (store.EventLog.ReadEvents), for a subscription that replays them.
func (s *Service) ReadEvents(ctx context.Context, after int64, limit int) ([]Event, int64, error) {
	if s.follower == nil {
		return nil, after, fmt.Errorf("%w: this service publishes no events", ErrUnavailable)
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	logged, upto, err := s.follower.Log().ReadEvents(ctx, after, limit)
	if err != nil {
		return nil, after, fromStore(err)
	}
	out := make([]Event, len(logged))
	for i, e := range logged {
		out[i] = EventOf(e)
	}
	return out, upto, nil
}

// LogStats is what the event log held at the start or its last expiry, and whether it was read.
func (s *Service) LogStats() (store.LogStats, bool) {
	if s.follower == nil {
		return store.LogStats{}, false
	}
	return s.follower.Stats()
}
