package store

import (
	"context"
	"sync"
)

// Seen is the position of the event log that a client's reads reflect: a subscription that
// starts after it gets every change the reads did not show, none missed. A caller asks for it
// by reading with a context of WithSeen; GetPost and ListPosts note in it the position their read
// reflects (Note), as each backend can give it:
//   - SQLite: the last position of the snapshot the read is taken from, so the seam is exact:
//     the read reflects every event up to it and none after it;
//   - MongoDB: the last position given before the read began: the read reflects every event up
//     to it, and may reflect some after it, whose events come again, each at a version the read
//     gave or below.
//
// Of several reads, Seen keeps the earliest position, so that a change none of them showed is
// never before it; a change that some of them showed after it may come again.
type Seen struct {
	mu       sync.Mutex
	position int64
	noted    bool
	lost     bool
}

type seenKey struct{}

// WithSeen returns a context whose reads note their position in the Seen it returns.
func WithSeen(ctx context.Context) (context.Context, *Seen) {
	s := new(Seen)
	return context.WithValue(ctx, seenKey{}, s), s
}

// SeenIn returns the Seen of ctx, nil when its caller asked for none: a backend reads the
// position only for a caller that asked.
func SeenIn(ctx context.Context) *Seen {
	s, _ := ctx.Value(seenKey{}).(*Seen)
	return s
}

// Note records that a read reflects the log up to position.
func (s *Seen) Note(position int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.noted || position < s.position {
		s.position, s.noted = position, true
	}
}

// Lose records that a read could not tell its position (the log could not be read): the others'
// may be after what it reflects, so Position then gives none.
func (s *Seen) Lose() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost = true
}

// Position returns the earliest position noted, and false when no read noted one, or one could
// not (Lose).
func (s *Seen) Position() (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.position, s.noted && !s.lost
}
