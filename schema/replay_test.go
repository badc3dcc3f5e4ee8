package schema_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graph-gophers/graphql-go"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store"
)

// created is one postCreated response, as a client reads it.
type created struct {
	Data struct {
		PostCreated struct{ Title string } `json:"postCreated"`
	} `json:"data"`
	Extensions struct{ Cursor string } `json:"extensions"`
}

func readCreated(t *testing.T, payload string) created {
	t.Helper()
	var c created
	if err := json.Unmarshal([]byte(payload), &c); err != nil || c.Extensions.Cursor == "" {
		t.Fatalf("a response with no cursor: %s (%v)", payload, err)
	}
	return c
}

// resume joins the feed of query with vars from cursor.
func resume(t *testing.T, s *schema.Schema, query string, vars map[string]any, cursor string) *listener {
	t.Helper()
	op, refusal := s.Prepare(schema.Request{Query: query, Variables: vars, ResumeFrom: json.RawMessage(fmt.Sprintf("%q", cursor))})
	if refusal != nil {
		t.Fatal(refusal)
	}
	l := &listener{c: make(chan string, 1000)}
	var err error
	l.Listener, err = s.Listen("user bob", op, bob, func(p json.RawMessage) { l.c <- string(p) }, func(err error) { l.err = err; close(l.c) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// refusedWith waits for l to end, refused with code.
func refusedWith(t *testing.T, l *listener, code errcode.Code) {
	t.Helper()
	select {
	case p, ok := <-l.c:
		if ok {
			t.Fatalf("a response rather than %s: %s", code.GraphQL, p)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("not refused in 5s")
	}
	var refused *schema.RefusedError
	if !errors.As(l.err, &refused) || len(refused.Errors) != 1 || refused.Errors[0].Extensions["code"] != code.GraphQL {
		t.Fatalf("ended with %v, want one %s error", l.err, code.GraphQL)
	}
}

func createAll(t *testing.T, svc *posts.Service, caller posts.Caller, titles ...string) {
	t.Helper()
	for _, title := range titles {
		if _, err := svc.Create(t.Context(), caller, posts.NewPost{Title: title}); err != nil {
			t.Fatal(err)
		}
	}
}

const createdQuery = `subscription($u: ID) { postCreated(userId: $u) { title } }`

func TestResumeReplaysWhatWasMissedThenGoesLive(t *testing.T) {
	s, svc, broker := subscribed(t, 64)
	first := listen(t, s, createdQuery, nil, bob)
	started(t, broker, 1)
	createAll(t, svc, alice, "a1", "a2")
	readCreated(t, next(t, first))
	last := readCreated(t, next(t, first))
	first.Close()
	createAll(t, svc, alice, "a3", "a4")
	createAll(t, svc, bob, "b1")
	createAll(t, svc, alice, "a5")

	again := resume(t, s, createdQuery, map[string]any{"u": "alice"}, last.Extensions.Cursor)
	var titles []string
	for _, want := range []string{"a3", "a4", "a5"} {
		c := readCreated(t, next(t, again))
		titles = append(titles, c.Data.PostCreated.Title)
		if c.Data.PostCreated.Title != want {
			t.Fatalf("resumed with %v, want a3 a4 a5 (alice's only, after the cursor)", titles)
		}
	}
	createAll(t, svc, alice, "a6")
	if c := readCreated(t, next(t, again)); c.Data.PostCreated.Title != "a6" {
		t.Fatalf("the first live event is %q, want a6", c.Data.PostCreated.Title)
	}
	select {
	case p := <-again.c:
		t.Fatalf("one more response: %s", p)
	case <-time.After(100 * time.Millisecond):
	}
}

// Writes go on while subscribers resume: each gets every post after its cursor once, in order.
func TestResumeHasNoSeamUnderWrites(t *testing.T) {
	s, svc, broker := subscribed(t, 4096)
	const total = 300
	watch := &listener{c: make(chan string, total)}
	l, err := s.Listen("user bob", prepare(t, s, createdQuery, nil), bob, func(p json.RawMessage) { watch.c <- string(p) }, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	watch.Listener = l
	started(t, broker, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range total {
			createAll(t, svc, alice, fmt.Sprint(i))
		}
	})
	// A cursor from each of the first events, each resumed while the writes go on.
	var resumed []*listener
	var from []int
	for read := 0; read < 100; read++ {
		c := readCreated(t, next(t, watch))
		if read%10 == 0 {
			resumed = append(resumed, resume(t, s, createdQuery, nil, c.Extensions.Cursor))
			from = append(from, read)
		}
	}
	wg.Wait()
	for k, l := range resumed {
		for want := from[k] + 1; want < total; want++ {
			if got := readCreated(t, next(t, l)).Data.PostCreated.Title; got != fmt.Sprint(want) {
				t.Fatalf("resumed after %d: got %s, want %d", from[k], got, want)
			}
		}
	}
}

func TestResumeRefusals(t *testing.T) {
	st := newStore(t)
	s, svc, broker := subscribedOver(t, st, 64, 10, limitsWith(func(l *schema.Limits) { l.MaxResume = 3 }))
	first := listen(t, s, createdQuery, nil, bob)
	started(t, broker, 1)
	createAll(t, svc, alice, "a1")
	cursor := readCreated(t, next(t, first)).Extensions.Cursor

	t.Run("a cursor not made by the log is BAD_USER_INPUT", func(t *testing.T) {
		for _, bad := range []string{"x", strings.Repeat("A", len(cursor)), cursor[:len(cursor)-1] + "B"} {
			refusedWith(t, resume(t, s, createdQuery, nil, bad), errcode.BadUserInput)
		}
	})
	t.Run("a cursor further behind than max_resume_events is RESUME_TOO_LONG", func(t *testing.T) {
		createAll(t, svc, alice, "a2", "a3", "a4", "a5")
		refusedWith(t, resume(t, s, createdQuery, nil, cursor), errcode.ResumeTooLong)
	})
	t.Run("a cursor whose events expired is CURSOR_EXPIRED", func(t *testing.T) {
		if _, err := st.(store.EventLog).ExpireEvents(t.Context(), time.Now().Add(time.Hour), 0); err != nil {
			t.Fatal(err)
		}
		refusedWith(t, resume(t, s, createdQuery, nil, cursor), errcode.CursorExpired)
	})
	t.Run("resumeFrom that is not a string, or on a query, is refused before it runs", func(t *testing.T) {
		for _, req := range []schema.Request{
			{Query: createdQuery, ResumeFrom: json.RawMessage(`42`)},
			{Query: `{ posts { edges { node { id } } } }`, ResumeFrom: json.RawMessage(`"` + cursor + `"`)},
		} {
			if _, refusal := s.Prepare(req); refusal == nil || refusal.Extensions["code"] != errcode.BadUserInput.GraphQL {
				t.Errorf("Prepare(%s, resumeFrom %s) = %v, want BAD_USER_INPUT", req.Query, req.ResumeFrom, refusal)
			}
		}
	})
}

// Two subscriptions of one connection resume together: their replays and the live events after
// them come in the order written, across both.
func TestResumesOfOneConnectionComeInOneOrder(t *testing.T) {
	s, svc, broker := subscribed(t, 4096)
	watch := listen(t, s, createdQuery, nil, bob)
	started(t, broker, 1)
	createAll(t, svc, alice, "0")
	cursor := readCreated(t, next(t, watch)).Extensions.Cursor
	watch.Close()

	// Each write's title is its place in the order: creates and updates, interleaved.
	write := 1
	step := func() {
		p, err := svc.Create(t.Context(), alice, posts.NewPost{Title: fmt.Sprint(write)})
		if err != nil {
			t.Fatal(err)
		}
		title := fmt.Sprint(write + 1)
		if _, err := svc.Update(t.Context(), alice, p.ID, posts.Changes{Title: posts.Change{Set: true, Value: &title}}, posts.Expect{}); err != nil {
			t.Fatal(err)
		}
		write += 2
	}
	for range 50 {
		step()
	}
	got := make(chan string, 1000)
	// The order holds across the subscriptions the connection has: a replay that delivered before
	// the second subscription came could not take back what it sent. Both are subscribed before
	// either replay delivers, as a client that resubscribes sends both at once; the connection's
	// room (which every replayed response waits for) is what holds them back until then.
	joined := make(chan struct{})
	seq := schema.NewSequence(1000, func(ctx context.Context) error {
		select {
		case <-joined:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, nil)
	for _, query := range []string{createdQuery, `subscription { postUpdated { title } }`} {
		op, refusal := s.Prepare(schema.Request{Query: query, ResumeFrom: json.RawMessage(`"` + cursor + `"`)})
		if refusal != nil {
			t.Fatal(refusal)
		}
		l, err := s.ListenIn(seq, "user bob", op, bob, func(p json.RawMessage) {
			var r struct {
				Data map[string]struct{ Title string } `json:"data"`
			}
			json.Unmarshal(p, &r)
			for _, post := range r.Data {
				got <- post.Title
			}
		}, func(err error) { t.Errorf("ended: %v", err) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
	}
	close(joined)
	for range 50 {
		step()
	}
	for want := 1; want < write; want++ {
		select {
		case title := <-got:
			if title != fmt.Sprint(want) {
				t.Fatalf("got write %s, want %d: the two subscriptions' events out of order", title, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("write %d never came", want)
		}
	}
}

// A replay resolves its events as a feed does: an event too large for max_response_size is
// RESPONSE_TOO_LARGE there too, with its cursor, and nothing of it is built.
func TestAReplayRefusesAnEventTooLargeBeforeItIsBuilt(t *testing.T) {
	s, svc, broker := subscribed(t, 64)
	query := `subscription { postCreated { title ` + aliases("body", 30) + `} }`
	first := listen(t, s, query, nil, bob)
	started(t, broker, 1)
	createAll(t, svc, alice, "before")
	cursor := readCreated(t, next(t, first)).Extensions.Cursor
	first.Close()
	big := strings.Repeat("<", 50_000)
	if _, err := svc.Create(t.Context(), alice, posts.NewPost{Title: "big", Body: &big}); err != nil {
		t.Fatal(err)
	}
	createAll(t, svc, alice, "after")

	var again *listener
	var replayed string
	n := allocated(func() {
		again = resume(t, s, query, nil, cursor)
		replayed = next(t, again)
	})
	var res struct {
		graphql.Response
		Extensions struct{ Cursor string } `json:"extensions"`
	}
	if err := json.Unmarshal([]byte(replayed), &res); err != nil {
		t.Fatal(err)
	}
	tooLarge(t, &res.Response)
	if res.Extensions.Cursor == "" {
		t.Errorf("the refused event has no cursor to resume after: %s", replayed)
	}
	limit := uint64(schema.DefaultLimits.MaxResponseSize)
	t.Logf("allocated %d bytes for the resume up to its refused event", n)
	// The page of the log it reads: the post's 50 kB, as the store copies it.
	if n > limit/8*schema.RaceFactor {
		t.Errorf("allocated %d bytes; want at most %d, an eighth of max_response_size", n, limit/8*schema.RaceFactor)
	}
	if got := readCreated(t, next(t, again)).Data.PostCreated.Title; got != "after" {
		t.Errorf("the event after it: %q, want after", got)
	}
}
