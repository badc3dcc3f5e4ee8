package live

import (
	"context"
	"sync"
)

// roomBytes is how many bytes a connection's send queue may hold before a replay waits for the
// client to read (Room.Wait): a replay has its events at hand, and a client that stops reading
// on many resumed streams would otherwise have each fill its queue, half of
// Subscriptions.SendQueue, with responses of its own encoding.
const roomBytes = 256 << 10

// Room is the one rule of a send queue's room for a replay, which has its events at hand and
// would otherwise fill the queue at once (the roomForEvents that a connection hands
// schema.NewSequence): a queue has room while it is less than half full and holds less than
// roomBytes. The zero Room is ready; the mutex of its queue guards it.
type Room struct {
	free chan struct{} // closed when the queue may have room again, for the replays waiting
}

// hasRoom is the rule: a queue of n messages and bytes, of at most limit messages.
func hasRoom(n, bytes, limit int) bool { return n < limit/2 && bytes < roomBytes }

// Wait waits until the queue has room, as state tells with mu, the queue's mutex, held: its
// messages, their bytes and its limit, or an error once the queue has ended, which Wait
// returns. It fails once ctx is done, or ended is closed (with ctx's error, or Canceled).
func (r *Room) Wait(ctx context.Context, ended <-chan struct{}, mu *sync.Mutex, state func() (n, bytes, limit int, err error)) error {
	for {
		mu.Lock()
		n, bytes, limit, err := state()
		if err != nil || hasRoom(n, bytes, limit) {
			mu.Unlock()
			return err
		}
		if r.free == nil {
			r.free = make(chan struct{})
		}
		free := r.free
		mu.Unlock()
		select {
		case <-free:
		case <-ctx.Done():
			return ctx.Err()
		case <-ended:
			return context.Canceled
		}
	}
}

// Taken tells the replays waiting that the queue, now of n messages and bytes, of at most
// limit() messages, gave some up: they go on if it has room. The queue's mutex is held.
func (r *Room) Taken(n, bytes int, limit func() int) {
	if r.free != nil && hasRoom(n, bytes, limit()) {
		r.Wake()
	}
}

// Wake has the replays waiting look at the queue again: it has ended, say. The queue's mutex is
// held.
func (r *Room) Wake() {
	if r.free != nil {
		close(r.free)
		r.free = nil
	}
}
