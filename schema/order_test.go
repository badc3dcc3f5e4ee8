package schema_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/internal/race"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store"
)

// A connection subscribed to postCreated, postUpdated and postDeleted, each resolved by a feed of
// its own, gets each post's events in the post's order: created, then its updates, then deleted.
// Without a sequence, the feeds' goroutines would hand them in whatever order they finish: the
// slower postCreated after the update that follows it.
func TestASequenceKeepsEachPostsOrderAcrossSubscriptions(t *testing.T) {
	s, svc, broker := subscribedOver(t, slowLists{newStore(t)}, 1000, 10, schema.DefaultLimits)
	var (
		mu  sync.Mutex
		got []string // "<kind> <id> <version>", in the order delivered
	)
	seq := schema.NewSequence(10_000, nil, nil)
	for _, query := range []string{
		// The slowest to resolve: a list of the store per event.
		`subscription { postCreated { id version author { posts { id } } } }`,
		`subscription { postUpdated { id version } }`,
		`subscription { postDeleted }`,
	} {
		l, err := s.ListenIn(seq, "user alice", prepare(t, s, query, nil), alice, func(p json.RawMessage) {
			var r struct {
				Data struct {
					PostCreated, PostUpdated *struct {
						ID      string
						Version int64
					}
					PostDeleted *string
				}
			}
			if err := json.Unmarshal(p, &r); err != nil {
				t.Errorf("%s: %v", p, err)
			}
			mu.Lock()
			defer mu.Unlock()
			switch d := r.Data; {
			case d.PostCreated != nil:
				got = append(got, fmt.Sprintf("created %s %d", d.PostCreated.ID, d.PostCreated.Version))
			case d.PostUpdated != nil:
				got = append(got, fmt.Sprintf("updated %s %d", d.PostUpdated.ID, d.PostUpdated.Version))
			case d.PostDeleted != nil:
				got = append(got, "deleted "+*d.PostDeleted)
			}
		}, func(err error) { t.Errorf("a feed ended: %v", err) })
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
	}
	started(t, broker, 3)

	const writers, each = 4, 25
	title := "changed"
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				p, err := svc.Create(t.Context(), alice, posts.NewPost{Title: "new"})
				if err != nil {
					t.Error(err)
					return
				}
				for range 2 {
					if _, err := svc.Update(t.Context(), alice, p.ID, posts.Changes{Title: posts.Change{Set: true, Value: &title}}, posts.Expect{}); err != nil {
						t.Error(err)
					}
				}
				if err := svc.Delete(t.Context(), alice, p.ID, posts.Expect{}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	const want = writers * each * 4
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != want {
		t.Errorf("delivered %d events; want %d", len(got), want)
	}
	// Each post's events, as delivered, must be exactly its own, in order.
	seen := map[string][]string{}
	for _, e := range got {
		var kind, id string
		fmt.Sscan(e, &kind, &id)
		seen[id] = append(seen[id], e)
	}
	for id, events := range seen {
		want := fmt.Sprint([]string{"created " + id + " 1", "updated " + id + " 2", "updated " + id + " 3", "deleted " + id})
		if fmt.Sprint(events) != want {
			t.Errorf("post %s: delivered %v; want %v", id, events, want)
		}
	}
}

// slowLists is a store whose lists take a millisecond.
type slowLists struct{ store.Store }

func (s slowLists) Unwrap() store.Store { return s.Store }

func (s slowLists) ListPosts(ctx context.Context, f store.Filter) ([]store.Post, error) {
	time.Sleep(time.Millisecond)
	return s.Store.ListPosts(ctx, f)
}

// conn is a connection as handlers/ makes one for its subscriptions: a Sequence of limit whose
// responses go to a send queue of limit, which its client reads one response every period (0:
// as fast as it can). A response that finds the queue full ends it as too slow, and so does the
// Sequence's overflow; a replay waits until the queue is less than half full (room), as
// handlers' roomForEvents does.
type conn struct {
	seq   *schema.Sequence
	queue chan json.RawMessage
	hold  chan struct{} // if not nil, room waits until it is closed

	mu    sync.Mutex
	read  []json.RawMessage // what the client read, in order
	ended string            // why the connection ended; "" while it runs
}

func newConn(t *testing.T, limit int, period time.Duration) *conn {
	c := &conn{queue: make(chan json.RawMessage, limit)}
	c.seq = schema.NewSequence(limit, c.room, nil)
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(max(period, time.Microsecond))
		defer tick.Stop()
		for {
			select {
			case p := <-c.queue:
				c.mu.Lock()
				c.read = append(c.read, p)
				c.mu.Unlock()
			case <-stop:
				return
			}
			if period > 0 {
				select {
				case <-tick.C:
				case <-stop:
					return
				}
			}
		}
	}()
	return c
}

// room waits until c.hold is closed, if not nil, and the queue is less than half full.
func (c *conn) room(ctx context.Context) error {
	if c.hold != nil {
		select {
		case <-c.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for len(c.queue) >= cap(c.queue)/2 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

func (c *conn) end(why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended == "" {
		c.ended = fmt.Sprintf("%s after the client read %d responses", why, len(c.read))
	}
}

// deliver queues p for the client, or ends c when its queue is full.
func (c *conn) deliver(p json.RawMessage) {
	select {
	case c.queue <- p:
	default:
		c.end("the send queue filled (TOO_SLOW)")
	}
}

// listen subscribes c to query with s, from cursor unless it is "".
func (c *conn) listen(t *testing.T, s *schema.Schema, query, cursor string) {
	t.Helper()
	req := schema.Request{Query: query}
	if cursor != "" {
		req.ResumeFrom = json.RawMessage(fmt.Sprintf("%q", cursor))
	}
	op, refusal := s.Prepare(req)
	if refusal != nil {
		t.Fatal(refusal)
	}
	l, err := s.ListenIn(c.seq, "user bob", op, bob, c.deliver, func(err error) { c.end(fmt.Sprintf("%s ended: %v", query, err)) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
}

// inWriteOrder checks that the responses read, as readAll returns them, answer the n writes
// made, each once, in the order written.
func inWriteOrder(t *testing.T, read []string, n int) {
	t.Helper()
	for i, r := range read {
		if _, title, _ := strings.Cut(r, " "); title != fmt.Sprint(i+1) {
			t.Fatalf("the client's response %d is %s, want write %d (%d written)", i+1, r, i+1, n)
		}
	}
}

// readAll waits until the client has read n responses, and returns each as "<alias> <title>",
// in the order read; it fails when the connection ended or n did not come within d.
func (c *conn) readAll(t *testing.T, n int, d time.Duration) []string {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		c.mu.Lock()
		got, ended := len(c.read), c.ended
		c.mu.Unlock()
		if ended != "" {
			t.Fatalf("the connection ended: %s", ended)
		}
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client read %d of %d responses in %s", got, n, d)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, p := range c.read {
		var r struct {
			Data map[string]struct{ Title string } `json:"data"`
		}
		if err := json.Unmarshal(p, &r); err != nil || len(r.Data) != 1 {
			t.Fatalf("a response that is not one post's: %s (%v)", p, err)
		}
		for alias, post := range r.Data {
			out = append(out, alias+" "+post.Title)
		}
	}
	return out
}

// cursorOfFirst is the cursor of a post created now, the first write that a test's
// subscriptions resume after.
func cursorOfFirst(t *testing.T, s *schema.Schema, svc *posts.Service, broker *events.Broker[*posts.Event]) string {
	t.Helper()
	watch := listen(t, s, createdQuery, nil, bob)
	started(t, broker, 1)
	createAll(t, svc, alice, "0")
	cursor := readCreated(t, next(t, watch)).Extensions.Cursor
	watch.Close()
	return cursor
}

// writes makes writes numbered from 1, each post's title its number (an update sets it), so
// that the order a client reads them in is the order written.
type writes struct {
	t    *testing.T
	svc  *posts.Service
	n    int
	post string // the post that update changes
}

func (w *writes) create() {
	w.n++
	p, err := w.svc.Create(w.t.Context(), alice, posts.NewPost{Title: fmt.Sprint(w.n)})
	if err != nil {
		w.t.Fatal(err)
	}
	w.post = p.ID
}

func (w *writes) update() {
	w.n++
	title := fmt.Sprint(w.n)
	if _, err := w.svc.Update(w.t.Context(), alice, w.post, posts.Changes{Title: posts.Change{Set: true, Value: &title}}, posts.Expect{}); err != nil {
		w.t.Error(err)
	}
}

// paced calls write n times, every period.
func paced(n int, period time.Duration, write func()) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for range n {
		write()
		<-tick.C
	}
}

// A connection subscribed to postUpdated, live at some 300 events a second, resumes postCreated
// 2,000 events back; its client reads 1,000 responses a second. The replay goes at the client's
// pace, and holds back postUpdated's responses meanwhile: the connection must not end for it,
// and the client reads every event once, in the order written.
func TestAResumeDoesNotEndAConnectionWhoseClientReadsSteadily(t *testing.T) {
	t.Parallel() // beside the other long tests of the package, after the ones that measure memory
	s, svc, broker := subscribed(t, 4096)
	cursor := cursorOfFirst(t, s, svc, broker)
	w := &writes{t: t, svc: svc}
	behind, live := 2000, 900
	if race.Enabled { // some ten times slower: still past the send queue's 256 held for the replay
		behind, live = 1000, 600
	}
	for range behind {
		w.create()
	}
	c := newConn(t, 256, time.Millisecond)
	c.listen(t, s, `subscription { postUpdated { title } }`, "")
	c.listen(t, s, `subscription { postCreated { title } }`, cursor)
	started(t, broker, 2)
	paced(live, time.Second/300, w.update)
	read := c.readAll(t, w.n, 60*time.Second)
	inWriteOrder(t, read, w.n)
}

// An app with five live views reconnects and resumes all five on one connection, each far
// behind, while writes go on: none is ended, and each catches up with every event once, in the
// order written across the five.
func TestFiveResumesOfOneConnectionAllCatchUp(t *testing.T) {
	t.Parallel() // beside the other long tests of the package, after the ones that measure memory
	s, svc, broker := subscribed(t, 4096)
	cursor := cursorOfFirst(t, s, svc, broker)
	w := &writes{t: t, svc: svc}
	views, behind, live := 5, 5000, 500
	if race.Enabled { // some ten times slower: still far past the 256 held that ended it
		behind, live = 600, 100
	}
	for range behind {
		w.create()
	}
	c := newConn(t, 256, 0)
	// The replays begin once all five have joined, as those of a client that resubscribes all
	// at once: begun at each listen, a view's replay could hand writes before the next view
	// joined, whose replay then comes after them (a run beside other load).
	c.hold = make(chan struct{})
	for v := range views {
		c.listen(t, s, fmt.Sprintf(`subscription { v%d: postCreated { title } }`, v), cursor)
	}
	started(t, broker, views)
	close(c.hold)
	paced(live, time.Second/500, w.create)
	eachViewInWriteOrder(t, c.readAll(t, views*w.n, 120*time.Second), nil)
}

// eachViewInWriteOrder checks that the responses read, as readAll returns them, come in the
// order written across the views (the aliases), and that each view got every write after the
// one its cursor names in from (none: from the first), once.
func eachViewInWriteOrder(t *testing.T, read []string, from map[string]int) {
	t.Helper()
	last, got := 0, map[string]int{}
	for _, r := range read {
		alias, title, _ := strings.Cut(r, " ")
		n, _ := strconv.Atoi(title)
		if n < last {
			t.Fatalf("write %s after write %d: out of the order written", r, last)
		}
		if got[alias]++; from[alias]+got[alias] != n {
			t.Fatalf("%s's response %d is write %d, want write %d", alias, got[alias], n, from[alias]+got[alias])
		}
		last = n
	}
}

// An app comes back with four views open for different times: one connection resumes them from
// cursors far apart, while writes go on. Each replay waits its turn while another's events come
// first; none may then lose its turn for long: each view catches up with every write after its
// cursor, once, in the order written across the four.
func TestResumesFromCursorsFarApartAllCatchUp(t *testing.T) {
	t.Parallel() // beside the other long tests of the package, after the ones that measure memory
	s, svc, broker := subscribed(t, 4096)
	first := cursorOfFirst(t, s, svc, broker)
	at, err := svc.ResumeAfter(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	w := &writes{t: t, svc: svc}
	behind, live := 4000, 400
	if race.Enabled {
		behind, live = 800, 100
	}
	for range behind {
		w.create()
	}
	c := newConn(t, 256, 0)
	c.hold = make(chan struct{}) // the replays begin once all have joined, as in the test above
	from := map[string]int{}     // each view's cursor: after the write of that number
	for v, after := range []int{0, behind / 3, behind * 2 / 3, behind - 20} {
		alias := fmt.Sprintf("v%d", v)
		from[alias] = after
		c.listen(t, s, fmt.Sprintf(`subscription { %s: postCreated { title } }`, alias), svc.Cursor(at+int64(after)))
	}
	started(t, broker, len(from))
	close(c.hold)
	paced(live, time.Second/500, w.create)
	want := 0
	for _, after := range from {
		want += w.n - after
	}
	eachViewInWriteOrder(t, c.readAll(t, want, 120*time.Second), from)
}

// A connection outlives a reload: its Sequence holds listeners of the old config's schema, live,
// and of the new one's, resuming, while writes go on. Under the race detector, the replays' ends
// and seams must not race with the live responses of the other schema; and the client reads
// every event once, in the order written.
func TestASequenceOfTwoSchemasKeepsOneOrder(t *testing.T) {
	old, svc, broker := subscribed(t, 4096)
	cursor := cursorOfFirst(t, old, svc, broker)
	reloaded, err := schema.New(svc, zap.NewNop(), schema.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	w := &writes{t: t, svc: svc}
	const behind, resumes = 200, 10
	for range behind {
		w.create()
	}
	c := newConn(t, 100_000, 0)
	c.listen(t, old, `subscription { postUpdated { title } }`, "")
	started(t, broker, 1)
	// The replays begin once all have joined, as those of a client that resubscribes all at once.
	c.hold = make(chan struct{})
	for v := range resumes {
		c.listen(t, reloaded, fmt.Sprintf(`subscription { v%d: postCreated { title } }`, v), cursor)
	}
	// The updates begin once the resumes have joined, so that each comes after every replayed
	// create in the connection's order. (Begun before, one delivered before the resumes joined
	// was read before the first replayed create, out of the order only in the test's eyes: a
	// run beside other load.)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 2000 { // at most
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				w.update()
			}
		}
	})
	close(c.hold)
	c.readAll(t, resumes*behind, 30*time.Second)
	close(stop)
	wg.Wait()
	read := c.readAll(t, resumes*behind+w.n-behind, 30*time.Second)
	last, seen := 0, map[string]int{}
	for _, r := range read {
		alias, title, _ := strings.Cut(r, " ")
		n, _ := strconv.Atoi(title)
		if n < last {
			t.Fatalf("write %s after write %d: out of the order written", r, last)
		}
		want := seen[alias] + 1
		if alias == "postUpdated" {
			want += behind
		}
		if seen[alias]++; n != want {
			t.Fatalf("%s's response %d is write %d, want %d", alias, seen[alias], n, want)
		}
		last = n
	}
}

// A connection subscribed to postUpdated, with no cursor, resumes postCreated; while the replay
// is held back (room: the client's queue is half full a moment), postUpdated's responses pile
// up past the Sequence's limit, and it is reread from the log (Sequence.reread). The log then
// expires what the reread reads from. postUpdated never resumed: it must not be refused as a
// resume is (CURSOR_EXPIRED), which tells its client to refetch and subscribe without the
// cursor it never sent, but end as a feed that fell behind (the transports' TOO_SLOW), after
// which its client subscribes again.
func TestARereadWhoseStartExpiredDoesNotRefuseASubscriptionThatNeverResumed(t *testing.T) {
	st := newStore(t)
	s, svc, broker := subscribedOver(t, st, 4096, 10, schema.DefaultLimits)
	cursor := cursorOfFirst(t, s, svc, broker)
	w := &writes{t: t, svc: svc}
	for range 5 {
		w.create()
	}
	c := newConn(t, 8, 0)
	c.hold = make(chan struct{})
	var (
		mu    sync.Mutex
		ended error
	)
	l, err := s.ListenIn(c.seq, "user bob", prepare(t, s, `subscription { postUpdated { title } }`, nil), bob, c.deliver,
		func(err error) {
			mu.Lock()
			defer mu.Unlock()
			ended = err
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	c.listen(t, s, `subscription { postCreated { title } }`, cursor)
	started(t, broker, 2)
	for range 150 { // past the limit of 8 held: postUpdated is reread, and past a page of it
		w.update()
	}
	time.Sleep(200 * time.Millisecond) // the reread's replay reads its first page, and waits for room
	if _, err := st.(store.EventLog).ExpireEvents(t.Context(), time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	close(c.hold)
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	var refused *schema.RefusedError
	if errors.As(ended, &refused) {
		t.Fatalf("postUpdated, which never resumed, was refused: %v (%v)", refused.Errors, ended)
	}
	if !errors.Is(ended, schema.ErrFeedFellBehind) {
		t.Fatalf("postUpdated ended with %v, want %v", ended, schema.ErrFeedFellBehind)
	}
}

// A connection whose Sequence holds few responses (4) rereads its live subscription again and
// again while a resume of another holds it back and updates come fast: each reread's replay
// meets the feed at a seam of its own. Whatever the timing, the client reads each write once,
// in the order written.
func TestRereadsAgainAndAgainDeliverEachEventOnce(t *testing.T) {
	s, svc, broker := subscribed(t, 4096)
	cursor := cursorOfFirst(t, s, svc, broker)
	w := &writes{t: t, svc: svc}
	behind, live := 300, 1500
	if race.Enabled {
		behind, live = 100, 400
	}
	for range behind {
		w.create()
	}
	// The client's queue takes every write: what this test checks is the Sequence's order, not
	// whether a reader that the loaded machine leaves unscheduled for some milliseconds keeps
	// up with writes that go on meanwhile (it may not with a queue the size of the limit).
	c := newConn(t, 4096, 0)
	c.seq = schema.NewSequence(16, c.room, nil) // holds 4
	c.listen(t, s, `subscription { postUpdated { title } }`, "")
	c.listen(t, s, `subscription { postCreated { title } }`, cursor)
	started(t, broker, 2)
	for range live {
		w.update()
	}
	read := c.readAll(t, w.n, 60*time.Second)
	time.Sleep(500 * time.Millisecond) // for any response twice
	c.mu.Lock()
	n := len(c.read)
	c.mu.Unlock()
	if n != w.n {
		t.Errorf("the client read %d responses, want %d", n, w.n)
	}
	inWriteOrder(t, read, w.n)
}

// A resume reaches its seam, and its feed's first response after it is held (it waits for
// the events the replay still has to answer) beside the other subscription's, half the
// Sequence's limit or more. The replay's next event then waits in pace for fewer responses
// held, but every one of them waits for that event: once the writes stop, nothing is delivered
// any more, however fast the client reads.
func TestAReplayPastItsSeamIsNotHeldBackByItsOwnFeedsResponses(t *testing.T) {
	s, svc, broker := subscribed(t, 4096)
	cursor := cursorOfFirst(t, s, svc, broker)
	w := &writes{t: t, svc: svc}
	c := newConn(t, 8, 0)
	gate := make(chan struct{}) // room: one replayed response per value sent, all once closed
	c.seq = schema.NewSequence(32, func(ctx context.Context) error {
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, nil)
	w.create() // 1, 2: what the replay reads before its seam
	w.create()
	c.listen(t, s, `subscription { postUpdated { title } }`, "")
	c.listen(t, s, `subscription { postCreated { title } }`, cursor)
	started(t, broker, 2)
	time.Sleep(200 * time.Millisecond) // the replay waits for room to hand write 1
	w.create()                         // 3, 4: the replay's, read after its seam
	w.create()
	for range 4 { // 5 to 8: postUpdated's, held until the replay has answered 4
		w.update()
	}
	time.Sleep(200 * time.Millisecond)
	gate <- struct{}{} // writes 1 and 2; the seam is then at write 8, and the replay waits to hand 3
	gate <- struct{}{}
	time.Sleep(200 * time.Millisecond)
	w.create() // 9: postCreated's feed's, held: 5 held, half the limit or more
	time.Sleep(200 * time.Millisecond)
	close(gate)
	read := c.readAll(t, w.n, 5*time.Second)
	inWriteOrder(t, read, w.n)
}

// Replays that end at any moment (their listener closed as they hand an event over, wait for a
// turn or read a page) give back every turn of turnsToReplay they took: one kept would stall
// every replay of the process. Two hundred resumes over 300 events are closed after a random
// while; then none is taken, and one more resume catches up.
func TestReplaysThatEndMidwayGiveBackTheirTurns(t *testing.T) {
	s, svc, broker := subscribed(t, 4096)
	first := cursorOfFirst(t, s, svc, broker)
	w := &writes{t: t, svc: svc}
	for range 300 {
		w.create()
	}
	op, refusal := s.Prepare(schema.Request{Query: createdQuery, ResumeFrom: json.RawMessage(fmt.Sprintf("%q", first))})
	if refusal != nil {
		t.Fatal(refusal)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var wg sync.WaitGroup
	for range 200 {
		c := newConn(t, 256, 0)
		l, err := s.ListenIn(c.seq, "user bob", op, bob, c.deliver, func(error) {})
		if err != nil {
			t.Fatal(err)
		}
		wait := time.Duration(r.IntN(3000)) * time.Microsecond
		wg.Go(func() {
			time.Sleep(wait)
			l.Close()
		})
	}
	wg.Wait()
	for deadline := time.Now().Add(5 * time.Second); schema.ReplayTurnsTaken() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d turns to replay are still taken 5s after every replay ended", schema.ReplayTurnsTaken())
		}
	}
	c := newConn(t, 256, 0)
	c.listen(t, s, createdQuery, first)
	c.readAll(t, 300, 30*time.Second)
}

// A feed that falls behind the events (the broker's queue of one fills while every turn to
// resolve is held, as on a machine whose cores are all busy) starts again, and its listener
// reads what it missed from the log (Schema.fellBehind): it does not end, and its client reads
// each write once, in the order written, those made while it was behind and those after;
// whether it had read an event before (a reread from the last it was handed) or not, on a log
// empty when it subscribed (from where it joined: position 0).
func TestAFeedThatFallsBehindReadsWhatItMissedFromTheLog(t *testing.T) {
	for _, readFirst := range []bool{true, false} {
		t.Run(fmt.Sprint("read an event first: ", readFirst), func(t *testing.T) {
			feedFallsBehind(t, readFirst)
		})
	}
}

func feedFallsBehind(t *testing.T, readFirst bool) {
	s, svc, broker := subscribed(t, 1)
	w := &writes{t: t, svc: svc}
	c := newConn(t, 100_000, 0)
	c.listen(t, s, `subscription { postCreated { title } }`, "")
	started(t, broker, 1)
	if readFirst {
		w.create()
		c.readAll(t, 1, 10*time.Second)
	}

	release := schema.HoldTurns()
	for range 50 {
		w.create()
	}
	// Dropped by the broker, the feed starts again, and waits for a turn to subscribe.
	for deadline := time.Now().Add(10 * time.Second); broker.Subscribers() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			release()
			t.Fatal("the feed did not fall behind")
		}
	}
	release()
	for range 50 {
		w.create()
	}
	read := c.readAll(t, w.n, 20*time.Second)
	for i, r := range read {
		if want := fmt.Sprintf("postCreated %d", i+1); r != want {
			t.Fatalf("response %d is %q, want %q (of %d: %q)", i+1, r, want, len(read), read)
		}
	}
	if len(read) != w.n {
		t.Fatalf("read %d responses, want %d", len(read), w.n)
	}
	if s.Feeds() != 1 {
		t.Errorf("%d feeds run, want the one started again", s.Feeds())
	}
}
