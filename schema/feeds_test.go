package schema_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graph-gophers/graphql-go"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/events/eventstest"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

func prepare(t *testing.T, s *schema.Schema, query string, vars map[string]any) *schema.Operation {
	t.Helper()
	op, refusal := s.Prepare(schema.Request{Query: query, Variables: vars})
	if refusal != nil {
		t.Fatal(refusal)
	}
	return op
}

// listener is a Listener whose responses a test reads from a channel.
type listener struct {
	*schema.Listener
	c   chan string // closed when the feed ends
	err error       // why, set before c is closed
}

// listen joins the feed of query with vars, as caller.
func listen(t *testing.T, s *schema.Schema, query string, vars map[string]any, caller posts.Caller) *listener {
	t.Helper()
	l, err := listenAs(t, s, "user "+caller.UserID, query, vars, caller)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// listenAs joins the feed of query with vars, as caller, counted against client's share.
func listenAs(t *testing.T, s *schema.Schema, client, query string, vars map[string]any, caller posts.Caller) (*listener, error) {
	t.Helper()
	l := &listener{c: make(chan string, 16)}
	var err error
	l.Listener, err = s.Listen(client, prepare(t, s, query, vars), caller,
		func(p json.RawMessage) {
			select {
			case l.c <- string(p):
			default:
				t.Errorf("a response the test did not read in time: %s", p)
			}
		},
		func(err error) { l.err = err; close(l.c) })
	return l, err
}

func next(t *testing.T, l *listener) string {
	t.Helper()
	select {
	case p, ok := <-l.c:
		if !ok {
			t.Fatalf("the listener ended: %v", l.err)
		}
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("nothing in 5s")
	}
	return ""
}

func TestSubscribersShareOneFeedPerOperation(t *testing.T) {
	s, svc, broker := subscribed(t, 16)
	ctx := t.Context()
	const query = `subscription($u: ID) { postCreated(userId: $u) { title author { id name } } }`
	a := listen(t, s, query, map[string]any{"u": "alice"}, alice)
	b := listen(t, s, query, map[string]any{"u": "alice"}, bob)
	other := listen(t, s, query, map[string]any{"u": "bob"}, alice)
	if n := s.Feeds(); n != 2 {
		t.Errorf("%d feeds for two distinct operations; want 2", n)
	}
	waitFor := func(n int) {
		for deadline := time.Now().Add(5 * time.Second); broker.Subscribers() != n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d broker subscriptions; want %d", broker.Subscribers(), n)
			}
		}
	}
	waitFor(2) // one per feed, not one per subscriber
	if _, err := svc.Create(ctx, alice, posts.NewPost{Title: "shared"}); err != nil {
		t.Fatal(err)
	}
	want := `{"postCreated":{"title":"shared","author":{"id":"alice","name":"Alice"}}}`
	got, cursor := eventstest.SplitEvent(t, []byte(next(t, a)))
	if got != want {
		t.Errorf("alice got %s; want %s", got, want)
	}
	got, bobs := eventstest.SplitEvent(t, []byte(next(t, b)))
	if got != want {
		t.Errorf("bob got %s; want %s", got, want)
	}
	if bobs != cursor {
		t.Errorf("the one event with cursor %s for alice and %s for bob", cursor, bobs)
	}
	select {
	case p := <-other.c:
		t.Errorf("the feed of bob's posts got %s", p)
	case <-time.After(50 * time.Millisecond):
	}

	t.Run("an operation that selects the author's email gets a feed per caller", func(t *testing.T) {
		const personal = `subscription { postCreated { author { email } } }`
		mine := listen(t, s, personal, nil, alice)
		theirs := listen(t, s, personal, nil, bob)
		defer mine.Close()
		defer theirs.Close()
		if n := s.Feeds(); n != 4 {
			t.Errorf("%d feeds; want 4", n)
		}
		waitFor(4)
		if _, err := svc.Create(ctx, alice, posts.NewPost{Title: "mine"}); err != nil {
			t.Fatal(err)
		}
		cursors := map[string]bool{}
		for l, want := range map[*listener]string{
			mine:   `{"postCreated":{"author":{"email":"alice@example.com"}}}`,
			theirs: `{"postCreated":{"author":{"email":null}}}`,
		} {
			got, c := eventstest.SplitEvent(t, []byte(next(t, l)))
			if got != want {
				t.Errorf("got %s; want %s", got, want)
			}
			cursors[c] = true
		}
		_, ofA := eventstest.SplitEvent(t, []byte(next(t, a)))
		_, ofB := eventstest.SplitEvent(t, []byte(next(t, b)))
		cursors[ofA], cursors[ofB] = true, true
		if len(cursors) != 1 {
			t.Errorf("the one event with cursors %v across its feeds; want one", cursors)
		}
		if cursors[cursor] {
			t.Errorf("a second event with the first one's cursor %s", cursor)
		}
	})

	t.Run("a listener that leaves stops only its own deliveries", func(t *testing.T) {
		b.Close()
		if _, err := svc.Create(ctx, alice, posts.NewPost{Title: "after b left"}); err != nil {
			t.Fatal(err)
		}
		next(t, a)
		select {
		case p := <-b.c:
			t.Errorf("b got %s after it left", p)
		case <-time.After(50 * time.Millisecond):
		}
	})

	a.Close()
	other.Close()
	if n := s.Feeds(); n != 0 {
		t.Errorf("%d feeds after their last listeners left", n)
	}
	waitFor(0)
}

func TestAFeedThatCannotRunTellsItsListeners(t *testing.T) {
	s := newSchema(t) // no event broker
	l := listen(t, s, `subscription { postDeleted }`, nil, posts.Caller{})
	for range l.c {
	}
	var refused *schema.RefusedError
	if !errors.As(l.err, &refused) || len(refused.Errors) != 1 || refused.Errors[0].Extensions["code"] != errcode.Unavailable.GraphQL {
		b, _ := json.Marshal(refused)
		t.Errorf("ended with %v %s; want a RefusedError with UNAVAILABLE", l.err, b)
	}
	if n := s.Feeds(); n != 0 {
		t.Errorf("%d feeds left", n)
	}
}

func TestTheNumberOfFeedsIsCapped(t *testing.T) {
	s, _, _ := subscribed(t, 4, limitsWith(func(l *schema.Limits) { l.MaxFeeds = 1 }))
	const query = `subscription($u: ID) { postCreated(userId: $u) { id } }`
	first := listen(t, s, query, map[string]any{"u": "alice"}, alice)
	defer first.Close()
	same := listen(t, s, query, map[string]any{"u": "alice"}, bob) // joins the running feed
	defer same.Close()
	if _, err := s.Listen("user alice", prepare(t, s, query, map[string]any{"u": "bob"}), alice, func(json.RawMessage) {}, func(error) {}); !errors.Is(err, schema.ErrTooManyFeeds) {
		t.Errorf("a second distinct feed: %v; want ErrTooManyFeeds", err)
	}
}

func TestEachClientHasItsShareOfFeeds(t *testing.T) {
	s, _, _ := subscribed(t, 4, limitsWith(func(l *schema.Limits) { l.MaxFeeds, l.MaxFeedsPerClient = 10, 2 }))
	const query = `subscription($u: ID) { postCreated(userId: $u) { id } }`
	of := func(u string) map[string]any { return map[string]any{"u": u} }
	mustListen := func(t *testing.T, client, u string) *listener {
		t.Helper()
		l, err := listenAs(t, s, client, query, of(u), posts.Caller{})
		if err != nil {
			t.Fatalf("%s listening to %s: %v", client, u, err)
		}
		return l
	}
	one, two := mustListen(t, "a", "1"), mustListen(t, "a", "2")
	again := mustListen(t, "a", "1") // a feed the client is in already counts once

	t.Run("a client at its share is refused a third distinct feed, even one that runs", func(t *testing.T) {
		other := mustListen(t, "b", "3")
		defer other.Close()
		for _, u := range []string{"3", "4"} {
			if _, err := listenAs(t, s, "a", query, of(u), posts.Caller{}); !errors.Is(err, schema.ErrTooManyFeedsPerClient) {
				t.Errorf("a third feed: %v; want ErrTooManyFeedsPerClient", err)
			}
		}
		if got := s.ClientFeeds("a"); got != 2 {
			t.Errorf("a takes part in %d feeds; want 2", got)
		}
	})
	t.Run("another client still gets its own share", func(t *testing.T) {
		x, y := mustListen(t, "c", "1"), mustListen(t, "c", "4")
		x.Close()
		y.Close()
	})
	t.Run("a client's share comes back when its last listener of a feed leaves", func(t *testing.T) {
		one.Close()
		if got := s.ClientFeeds("a"); got != 2 {
			t.Errorf("with a listener of the feed left: %d feeds; want 2", got)
		}
		again.Close()
		if got := s.ClientFeeds("a"); got != 1 {
			t.Errorf("with no listener of the feed left: %d feeds; want 1", got)
		}
		mustListen(t, "a", "5").Close()
	})
	two.Close()
	if s.FeedClients() != 0 || s.Feeds() != 0 {
		t.Errorf("%d clients and %d feeds left; want none", s.FeedClients(), s.Feeds())
	}
}

func TestAFeedThatEndsGivesBackItsClientsShares(t *testing.T) {
	s := newSchemaWith(t, 10, limitsWith(func(l *schema.Limits) { l.MaxFeedsPerClient = 1 })) // no event broker: every feed ends at once
	for range 3 {
		l, err := listenAs(t, s, "a", `subscription { postDeleted }`, nil, posts.Caller{})
		if err != nil {
			t.Fatal(err)
		}
		for range l.c {
		}
	}
	if s.FeedClients() != 0 || s.Feeds() != 0 {
		t.Errorf("%d clients and %d feeds left; want none", s.FeedClients(), s.Feeds())
	}
}

// TestClientSharesUnderConcurrentListeners has clients listen and leave at once, to distinct
// and to shared feeds, and some feeds end on their own: no client ever holds more than its
// share, and every count is back to zero at the end (run it with -race).
func TestClientSharesUnderConcurrentListeners(t *testing.T) {
	const share = 3
	s, _, _ := subscribed(t, 4, limitsWith(func(l *schema.Limits) { l.MaxFeeds, l.MaxFeedsPerClient = 100, share }))
	const query = `subscription($u: ID) { postCreated(userId: $u) { id } }`
	var wg sync.WaitGroup
	for g := range 16 {
		client := fmt.Sprint("client ", g%4)
		wg.Go(func() {
			for i := range 50 {
				l, err := listenAs(t, s, client, query, map[string]any{"u": fmt.Sprint(i % 5)}, posts.Caller{})
				switch {
				case errors.Is(err, schema.ErrTooManyFeedsPerClient):
					continue
				case err != nil:
					t.Error(err)
					return
				}
				if n := s.ClientFeeds(client); n > share {
					t.Errorf("%s takes part in %d feeds; want at most %d", client, n, share)
				}
				l.Close()
			}
		})
	}
	wg.Wait()
	if s.FeedClients() != 0 || s.Feeds() != 0 {
		t.Errorf("%d clients and %d feeds left; want none", s.FeedClients(), s.Feeds())
	}
}

// A feed answers an event past its budget as an executed operation with an error, and goes on.
func TestAFeedGoesOnAfterAnEventTooLarge(t *testing.T) {
	s, svc, broker := subscribedOver(t, newStore(t), 16, 10, limitsWith(func(l *schema.Limits) { l.MaxResponseSize = 1 << 20 }))
	l := listen(t, s, `subscription { postCreated { `+aliases("body", 19)+`} }`, nil, alice)
	defer l.Close()
	started(t, broker, 1)
	big := strings.Repeat("<", 50_000) // 19 × 300 kB
	if _, err := svc.Create(t.Context(), alice, posts.NewPost{Title: "big", Body: &big}); err != nil {
		t.Fatal(err)
	}
	var res graphql.Response
	if err := json.Unmarshal([]byte(next(t, l)), &res); err != nil {
		t.Fatal(err)
	}
	tooLarge(t, &res)
	if _, err := svc.Create(t.Context(), alice, posts.NewPost{Title: "small", Body: new("s")}); err != nil {
		t.Fatal(err)
	}
	if got := next(t, l); !strings.HasPrefix(got, `{"data":{"postCreated":{"a0":"s",`) || strings.Contains(got, "errors") {
		t.Errorf("the next event: %.300s", got)
	}
}

// An event whose titles and bodies alone, as its selection is sure to write them, cannot fit in
// max_response_size is answered RESPONSE_TOO_LARGE before any of it is built: 30 aliases of a
// body of 50,000 '<' (300 kB of JSON each) would be 9 MB.
func TestAnEventTooLargeIsRefusedBeforeItIsBuilt(t *testing.T) {
	s, svc, broker := subscribed(t, 16)
	query := `subscription { postCreated { id ` + aliases("body", 30) + `} }`
	a, b := listen(t, s, query, nil, alice), listen(t, s, query, nil, bob)
	defer a.Close()
	defer b.Close()
	started(t, broker, 1)
	big := strings.Repeat("<", 50_000)
	var got []string
	n := allocated(func() {
		if _, err := svc.Create(t.Context(), alice, posts.NewPost{Title: "big", Body: &big}); err != nil {
			t.Fatal(err)
		}
		got = []string{next(t, a), next(t, b)}
	})
	for _, p := range got {
		var res graphql.Response
		if err := json.Unmarshal([]byte(p), &res); err != nil {
			t.Fatal(err)
		}
		tooLarge(t, &res)
	}
	limit := uint64(schema.DefaultLimits.MaxResponseSize)
	t.Logf("allocated %d bytes for the write and its one response", n)
	// The write itself: the post's 50 kB through the service, the store and the event log.
	if n > limit/8*schema.RaceFactor {
		t.Errorf("allocated %d bytes to answer it; want at most %d, an eighth of max_response_size", n, limit/8*schema.RaceFactor)
	}
	if _, err := svc.Create(t.Context(), alice, posts.NewPost{Title: "small", Body: new("s")}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*listener{a, b} {
		if got := next(t, l); !strings.HasPrefix(got, `{"data":{"postCreated":{"id":`) || !strings.Contains(got, `"a29":"s"`) || strings.Contains(got, "errors") {
			t.Errorf("the next event: %.300s", got)
		}
	}
}

// One write's responses across distinct subscriptions are bounded: past 8 × max_response_size
// (each response's first 64 KiB aside), a feed answers the write RESPONSE_TOO_LARGE, though
// its response alone would fit; small feeds beside them get every event, the next write has a
// budget of its own, and a replay of the write draws on the same budget as the feeds.
func TestOneWritesResponsesAcrossFeedsAreBounded(t *testing.T) {
	const (
		limit = 1 << 20 // 8 MiB for the write
		feeds = 100
	)
	s, svc, broker := subscribed(t, 16, limitsWith(func(l *schema.Limits) { l.MaxResponseSize, l.MaxFeedsPerClient = limit, 1000 }))
	large, queries := make([]*listener, feeds), make([]string, feeds)
	for i := range large {
		// Three bodies of 300 kB: 900 kB, under max_response_size; distinct documents, distinct feeds.
		queries[i] = fmt.Sprintf(`subscription { postCreated { f%[1]d_a: body f%[1]d_b: body f%[1]d_c: body } }`, i)
		large[i] = listen(t, s, queries[i], nil, alice)
		defer large[i].Close()
	}
	small := []*listener{listen(t, s, `subscription { postCreated { id title } }`, nil, alice), listen(t, s, `subscription { postCreated { title } }`, nil, bob)}
	for _, l := range small {
		defer l.Close()
	}
	started(t, broker, feeds+len(small))
	createAll(t, svc, alice, "before")
	for _, l := range large {
		next(t, l)
	}
	before := readCreated(t, next(t, small[0])).Extensions.Cursor
	next(t, small[1])

	big := strings.Repeat("<", 50_000)
	var answered, refused, sent int
	var refusedQuery string
	n := allocated(func() {
		if _, err := svc.Create(t.Context(), alice, posts.NewPost{Title: "big", Body: &big}); err != nil {
			t.Fatal(err)
		}
		for i, l := range large {
			p := next(t, l)
			if strings.HasPrefix(p, `{"data":{"postCreated":{"f`) { // read no further: what the test allocates counts
				answered++
				sent += len(p)
				continue
			}
			var res graphql.Response
			if err := json.Unmarshal([]byte(p), &res); err != nil {
				t.Fatal(err)
			}
			tooLarge(t, &res)
			if refused++; !strings.Contains(res.Errors[0].Message, "across subscriptions") {
				t.Errorf("refused with %q; want it to say that a write's responses across subscriptions are bounded", res.Errors[0].Message)
			}
			refusedQuery = queries[i]
		}
	})
	t.Logf("%d feeds answered (%d bytes), %d refused; %d bytes allocated", answered, sent, refused, n)
	if answered == 0 || refused == 0 || sent > 8*limit+feeds*64<<10 {
		t.Errorf("%d feeds answered the write with %d bytes, %d refused; want some of each, at most %d bytes", answered, sent, refused, 8*limit+feeds*64<<10)
	}
	// Each response answered is allocated some eight times on its way (graphql-go's encoding of
	// each body, its buffers of field, object and response, each grown by doubling, then the
	// payload, and the test's string of it): 85 MB; 900 MB without the bound.
	if bound := uint64(16 * 8 * limit * schema.RaceFactor); n > bound {
		t.Errorf("allocated %d bytes for the write; want at most %d, 16 times its budget", n, bound)
	}
	for _, l := range small {
		if got := next(t, l); !strings.Contains(got, `"title":"big"`) {
			t.Errorf("a small feed got %.300s", got)
		}
	}

	if _, err := svc.Create(t.Context(), alice, posts.NewPost{Title: "next", Body: new("s")}); err != nil {
		t.Fatal(err)
	}
	for _, l := range append(large, small...) {
		if got := next(t, l); strings.Contains(got, `"errors"`) {
			t.Fatalf("the next write: %.300s", got)
		}
	}

	again := resume(t, s, refusedQuery, nil, before)
	var res graphql.Response
	if err := json.Unmarshal([]byte(next(t, again)), &res); err != nil {
		t.Fatal(err)
	}
	tooLarge(t, &res)
	if !strings.Contains(res.Errors[0].Message, "across subscriptions") {
		t.Errorf("the replay of the write refused with %q; want the write's bound", res.Errors[0].Message)
	}
	if got := next(t, again); !strings.HasPrefix(got, `{"data":{"postCreated":{"f`) {
		t.Errorf("the replay of the next write: %.300s", got)
	}
}
