package schema

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestTheFieldsOfAnEventComeBackFromTheStoreTogether checks feedTurn.leave and its returns, called
// at once by the fields of one event that call the store again and again: one of them takes a
// turn again, none waits for the one another took (which the event holds until its response),
// and once the response has come no turn is taken.
func TestTheFieldsOfAnEventComeBackFromTheStoreTogether(t *testing.T) {
	// All turns but one taken, as on 2 cores: a second field waiting would wait for ever.
	for range cap(turnsToResolve) - 1 {
		turnsToResolve <- struct{}{}
		t.Cleanup(func() { <-turnsToResolve })
	}
	for range 50 {
		ft := newFeedTurn()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		if _, ok := ft.take(ctx, nil); !ok {
			t.Fatal("no turn in 5s")
		}
		cancel()
		returned := make(chan struct{}, 8)
		for range 8 {
			go func() {
				for range 20 {
					back := ft.leave(t.Context())
					back()
				}
				returned <- struct{}{}
			}()
		}
		for range 8 {
			select {
			case <-returned:
			case <-time.After(5 * time.Second):
				t.Fatal("a field came back from the store and waited 5s for a turn")
			}
		}
		if !ft.turn {
			t.Error("no field took a turn again")
		}
		ft.done(false)
		if taken := len(turnsToResolve); taken > cap(turnsToResolve)-1 {
			t.Fatalf("%d turns taken once the response came; want the test's own %d", taken, cap(turnsToResolve)-1)
		}
	}
}

// TestFeedTurnsAgainstAModel drives feedTurns the way streams and their resolvers do, at random:
// several streams each take a turn for an event, its fields leave for the store and come back,
// its response comes, and some streams end (a take under way gives up). Checked: no call waits
// for ever, once an event's fields have returned none is counted away or retaking, a stream that
// ended takes nothing, and once every stream has ended no turn is taken.
func TestFeedTurnsAgainstAModel(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		var streams sync.WaitGroup
		for range 6 {
			ft, events, fields, endAt := newFeedTurn(), 1+r.IntN(30), 1+r.IntN(6), r.IntN(40)
			ctx, cancel := context.WithCancel(t.Context())
			streams.Go(func() {
				defer cancel()
				for e := range events {
					if e == endAt {
						cancel() // the stream ends: a take under way gives up
					}
					if _, ok := ft.take(ctx, nil); !ok {
						break
					}
					var resolution sync.WaitGroup
					for range fields {
						resolution.Go(func() {
							for range 10 {
								back := ft.leave(ctx)
								time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond) // the goroutines share no r
								back()
							}
						})
					}
					resolution.Wait()
					ft.mu.Lock()
					if ft.retaking || ft.away != 0 {
						t.Errorf("seed %d: after every field returned, retaking %v, away %d", seed, ft.retaking, ft.away)
					}
					ft.mu.Unlock()
					ft.done(false)
				}
				ft.done(true)
				if _, ok := ft.take(t.Context(), nil); ok {
					t.Errorf("seed %d: a turn taken after the stream ended", seed)
				}
			})
		}
		finished := make(chan struct{})
		go func() { streams.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Fatalf("seed %d: the streams had not ended in 10s: a call waits for a turn for ever", seed)
		}
		if taken := len(turnsToResolve); taken != 0 {
			t.Fatalf("seed %d: %d turns taken once every stream ended", seed, taken)
		}
	}
}
