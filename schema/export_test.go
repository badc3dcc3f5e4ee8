package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
)

// Do prepares and executes req, as a transport does: the response has the refusal of Prepare or
// the result.
func (s *Schema) Do(ctx context.Context, req Request) *graphql.Response {
	op, refusal := s.Prepare(req)
	if refusal != nil {
		return &graphql.Response{Errors: []*gqlerrors.QueryError{refusal}}
	}
	return s.Execute(ctx, op)
}

// Subscribe is one subscription stream of op, not shared.
func (s *Schema) Subscribe(ctx context.Context, op *Operation) <-chan *graphql.Response {
	return s.subscribe(ctx, op)
}

// DefaultLimits are the defaults of caddymodule/config.go's table, which fills every limit
// before New: the limits of a site that sets none. The tests build other limits from a copy.
var DefaultLimits = Limits{
	MaxQueryLength:       16 << 10,
	MaxDepth:             15,
	MaxCost:              2000,
	SearchCost:           500,
	MaxFeeds:             1000,
	MaxFeedsPerClient:    100,
	MaxAliases:           30,
	MaxRootFields:        10,
	MaxFields:            500,
	MaxResponseSize:      8 << 20,
	MaxResume:            100_000,
	DocumentCacheEntries: 1000,
	DocumentCacheSize:    32 << 20,
}

// WithOverflow is withOverflow, for the tests of the overflow signal.
var WithOverflow = withOverflow

// Feeds is how many subscription operations are running.
func (s *Schema) Feeds() int {
	s.feeds.mu.Lock()
	defer s.feeds.mu.Unlock()
	return len(s.feeds.all)
}

// CapErrors is capErrors, for its test.
var CapErrors = capErrors

// RaceFactor is raceFactor, for the memory bounds of the tests outside the package.
const RaceFactor = raceFactor

// Unplanned makes s run every operation through graphql-go's Exec, never a plan: the other side
// of the differential test.
func Unplanned(s *Schema) *Schema {
	s.unplanned = true
	return s
}

// Planned says whether s runs op by a plan rather than graphql-go's Exec.
func (s *Schema) Planned(op *Operation) bool {
	return !s.unplanned && s.planOf(op) != nil
}

// State is what q holds and what each of its listeners waits for: the model test logs it when
// a subscription stalls.
func (q *Sequence) State() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "limit %d, held %d\n", q.limit, len(q.held))
	for i, h := range q.held {
		if i < 5 || i > len(q.held)-3 {
			fmt.Fprintf(&b, "  held %p at %d replayed %v\n", h.l, h.position, h.replayed)
		}
	}
	for l := range q.listeners {
		l.f.pending.mu.Lock()
		fp := slices.Clone(l.f.pending.positions)
		l.f.pending.mu.Unlock()
		if len(fp) > 5 {
			fp = fp[:5]
		}
		fmt.Fprintf(&b, "  listener %p after %d delivered %d resuming %v feed pending %v", l, l.after, l.delivered, l.resuming, fp)
		if l.replay != nil {
			l.replay.mu.Lock()
			fmt.Fprintf(&b, " replay open %d positions %v", l.replay.open, l.replay.positions)
			l.replay.mu.Unlock()
		}
		b.WriteString("\n")
	}
	return b.String()
}

// ResolveTurns is how many turns turnsToResolve has.
func ResolveTurns() int { return cap(turnsToResolve) }

// ResolveTurnsTaken is how many of turnsToResolve are taken.
func ResolveTurnsTaken() int { return len(turnsToResolve) }

// TakeResolveTurns takes every turn of turnsToResolve, and returns what gives them back.
func TakeResolveTurns() (giveBack func()) {
	for range cap(turnsToResolve) {
		turnsToResolve <- struct{}{}
	}
	return func() {
		for range cap(turnsToResolve) {
			<-turnsToResolve
		}
	}
}

// ReplayTurnsTaken is how many of turnsToReplay are taken.
func ReplayTurnsTaken() int { return len(turnsToReplay) }

// Encode is encode: the payload a feed delivers of res, the response to the event at position.
func (s *Schema) Encode(res *graphql.Response, position int64) json.RawMessage {
	return s.encode(res, position)
}

// HoldTurns takes every turn to resolve (turnsToResolve), as subscriptions busy on every core
// would, once each is free, and returns what gives them back.
func HoldTurns() (release func()) {
	for range cap(turnsToResolve) {
		turnsToResolve <- struct{}{}
	}
	return func() {
		for range cap(turnsToResolve) {
			<-turnsToResolve
		}
	}
}
