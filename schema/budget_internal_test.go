package schema

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

func TestJSONStringLenIsWhatGraphQLGoWrites(t *testing.T) {
	strs := []string{
		"", "plain", `quote " and backslash \`, "<>&", strings.Repeat("<", 50_000),
		"\b\f\n\r\t", "\x00\x01\x1f\x7f", "\xff", "\xe2\x82", "é", "日本", "🙂", "\u2028\u2029",
		"eve\u0001", "a\xffb\xc0\xafc",
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 { // random bytes: every class, valid and invalid UTF-8
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		strs = append(strs, string(b))
	}
	for _, s := range strs {
		want, _ := json.Marshal(s) // as graphql-go writes a string scalar
		if got := jsonStringLen(s); got != len(want) {
			t.Errorf("jsonStringLen(%q) = %d; json.Marshal writes %d bytes: %s", s, got, len(want), want)
		}
		id, err := json.Marshal(ID(s))
		if err != nil || string(id) != string(want) || !json.Valid(id) {
			t.Errorf("ID(%q) marshals to %s, %v; want %s", s, id, err, want)
		}
	}
}

func TestTimeChargeIsWhatTimeWrites(t *testing.T) {
	for _, at := range []time.Time{time.Date(2026, 11, 21, 4, 35, 44, 36e6, time.UTC), time.Unix(0, 0), time.Date(12345, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600))} {
		b := newBudget(1000, shapeOfText(t, `{ posts { createdAt } }`), nil)
		b.time("createdAt", at)
		out, _ := Time{at}.MarshalJSON()
		if spent := 1000 - b.left.Load(); spent != int64(len(`"createdAt":,`)+len(out)) {
			t.Errorf("%v: charged %d for %s", at, spent, out)
		}
	}
}

func TestBudgetKeysAreTheLongestAliasOfEachField(t *testing.T) {
	b := newBudget(1, shapeOfText(t, `query { posts { id a1: body longerAlias: body ...F ... on Post { x: title } } } fragment F on Post { fragmentAlias: userId }`), nil)
	want := map[string]int{"posts": 5, "id": 2, "body": len("longerAlias"), "title": 1, "userId": len("fragmentAlias")}
	for name, n := range want {
		if b.keys[name] != n {
			t.Errorf("key of %s = %d; want %d", name, b.keys[name], n)
		}
	}
	if b.typename != 0 {
		t.Errorf("typename = %d without __typename", b.typename)
	}
}

// shapeOfText is the shape of the document in text.
func shapeOfText(t *testing.T, text string) *shape {
	t.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: text})
	if err != nil {
		t.Fatal(err)
	}
	return shapeOf(doc, len(text))
}

// TestAnEventsPostCountsTheTitlesAndBodiesSureToBeWritten checks least for the subscription
// roots that return a post, which ahead reads before an event's post resolves.
func TestAnEventsPostCountsTheTitlesAndBodiesSureToBeWritten(t *testing.T) {
	for _, tt := range []struct {
		name, query, root string
		want              leaves
	}{
		{"aliases of body are each counted", `subscription { postCreated { id a: body b: body title } }`, "postCreated", leaves{1, 2}},
		{"a fragment's bodies are counted", `subscription { postUpdated { ...F ... on Post { t: title } } } fragment F on Post { a: body b: body }`, "postUpdated", leaves{1, 2}},
		{"bodies under @skip or @include are not", `subscription { postCreated { a: body @skip(if: true) ...F @include(if: false) } } fragment F on Post { body }`, "postCreated", leaves{0, 0}},
		{"the bodies of the author's posts are their list's, not the event's", `subscription { postCreated { author { posts { a: body b: body } } } }`, "postCreated", leaves{0, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := shapeOfText(t, tt.query).least[tt.root]; got != tt.want {
				t.Errorf("least[%s] = %+v; want %+v", tt.root, got, tt.want)
			}
		})
	}
}

// TestTheBudgetsOfWritesAreSharedAndForgotten checks writes: the responses to one write share
// its budget, and the budgets of writes are kept for the latest writesKept only.
func TestTheBudgetsOfWritesAreSharedAndForgotten(t *testing.T) {
	w := &writes{limit: 100}
	t.Run("the responses to one write draw on one budget", func(t *testing.T) {
		if !take(w.of(1), 60) || take(w.of(1), 60) || !take(w.of(1), 40) {
			t.Errorf("two responses to one write took 60 bytes each of its 100, or 40 did not fit after 60")
		}
		if !take(w.of(2), 100) {
			t.Errorf("another write's budget is not its own")
		}
	})
	t.Run("an event with no position has no write's budget", func(t *testing.T) {
		if w.of(0) != nil {
			t.Errorf("an event at position 0 draws on a write's budget")
		}
	})
	t.Run("only the latest writes' budgets are kept", func(t *testing.T) {
		for p := range int64(3 * writesKept) {
			w.of(p + 1)
		}
		if len(w.byPosition) != writesKept {
			t.Errorf("%d budgets kept; want %d", len(w.byPosition), writesKept)
		}
		if w.byPosition[3*writesKept] == nil || w.byPosition[2*writesKept] != nil {
			t.Errorf("the latest write's budget is forgotten, or an older one kept")
		}
	})
	t.Run("a large response waits for room among those being resolved, a small one does not", func(t *testing.T) {
		w := newWrites(100)
		resolving := func(drawn int64) *budget {
			b := newBudget(100, &shape{}, nil)
			b.write, b.w = w.of(1), w
			if drawn > 0 && !b.reserve(drawn) {
				t.Fatalf("the write's budget has no %d bytes", drawn)
			}
			return b
		}
		first := resolving(80)
		first.hold(t.Context())
		first.reserve(40) // under way, it takes what it finds it needs, room or not: -20 left
		second, held := resolving(80), make(chan struct{})
		go func() { second.hold(t.Context()); close(held) }()
		small := resolving(0)
		small.hold(t.Context()) // returns at once, though nothing is left
		small.release()
		select {
		case <-held:
			t.Fatal("two responses of 80 bytes resolved at once, with 100 between them")
		case <-time.After(50 * time.Millisecond):
		}
		first.release()
		select {
		case <-held:
		case <-time.After(5 * time.Second):
			t.Fatal("the second response still waits once the first is built")
		}
		second.release()
		if w.building != 100 {
			t.Errorf("%d bytes of 100 left once both are built", w.building)
		}
	})
	t.Run("a response whose stream ended gives back what it waited for", func(t *testing.T) {
		w := newWrites(100)
		b := newBudget(100, &shape{}, nil)
		b.write, b.w = w.of(1), w
		b.reserve(80)
		b.release() // the stream ended before its event resolved
		b.hold(t.Context())
		if w.building != 100 {
			t.Errorf("%d bytes of 100 left", w.building)
		}
	})
	t.Run("a response that does not fit takes nothing", func(t *testing.T) {
		left := w.of(10 * writesKept)
		if take(left, 101) || left.Load() != 100 {
			t.Errorf("a response of 101 bytes left %d of 100", left.Load())
		}
	})
}
