package schema

import (
	"context"
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
