package events_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/postsedge/caddy-posts/events"
)

// drain reads what s has queued, without waiting.
func drain(s *events.Subscription[int]) (got []int, ended bool) {
	for {
		select {
		case v, ok := <-s.C():
			if !ok {
				return got, true
			}
			got = append(got, v)
		default:
			return got, false
		}
	}
}

func TestSubscribersGetTheEventsTheyMatchInOrder(t *testing.T) {
	b := events.NewBroker[int](10)
	all := b.Subscribe(nil)
	even := b.Subscribe(func(v int) bool { return v%2 == 0 })
	for v := range 5 {
		b.Publish(v)
	}
	if got, _ := drain(all); len(got) != 5 || got[0] != 0 || got[4] != 4 {
		t.Errorf("all got %v; want 0..4 in order", got)
	}
	if got, _ := drain(even); len(got) != 3 || got[0] != 0 || got[1] != 2 || got[2] != 4 {
		t.Errorf("even got %v; want [0 2 4]", got)
	}
}

func TestASlowSubscriberIsDroppedAndTheOthersGetEverything(t *testing.T) {
	b := events.NewBroker[int](3)
	slow := b.Subscribe(nil)
	fast := b.Subscribe(nil)
	var fastGot []int
	for v := range 10 { // the slow one never reads; Publish must not wait for it
		b.Publish(v)
		got, _ := drain(fast)
		fastGot = append(fastGot, got...)
	}
	if len(fastGot) != 10 {
		t.Errorf("the fast subscriber got %v; want all 10", fastGot)
	}
	got, ended := drain(slow)
	if len(got) != 3 || !ended || !errors.Is(slow.Err(), events.ErrTooSlow) {
		t.Errorf("the slow subscriber got %v, ended %v, err %v; want its 3 queued events, then the end with ErrTooSlow", got, ended, slow.Err())
	}
	if n := b.Subscribers(); n != 1 {
		t.Errorf("%d subscribers; want 1", n)
	}
}

func TestClosing(t *testing.T) {
	t.Run("a subscription its owner closes ends without an error, and closing twice is fine", func(t *testing.T) {
		b := events.NewBroker[int](1)
		s := b.Subscribe(nil)
		s.Close()
		s.Close()
		b.Publish(1)
		if _, ended := drain(s); !ended || s.Err() != nil || b.Subscribers() != 0 {
			t.Errorf("ended %v, err %v, %d subscribers; want ended, nil, 0", ended, s.Err(), b.Subscribers())
		}
	})
	t.Run("closing the broker ends every subscription with ErrClosed, and later ones at once", func(t *testing.T) {
		b := events.NewBroker[int](1)
		before := b.Subscribe(nil)
		b.Close()
		after := b.Subscribe(nil)
		b.Publish(1)
		for name, s := range map[string]*events.Subscription[int]{"before": before, "after": after} {
			if _, ended := drain(s); !ended || !errors.Is(s.Err(), events.ErrClosed) {
				t.Errorf("%s: ended %v, err %v; want ended with ErrClosed", name, ended, s.Err())
			}
			s.Close()
		}
	})
}

// TestConcurrentUse runs publishers, subscribers and closers at once, for the race detector.
func TestConcurrentUse(t *testing.T) {
	b := events.NewBroker[int](4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for v := range 200 {
				b.Publish(v)
			}
		})
		wg.Go(func() {
			for range 50 {
				s := b.Subscribe(func(v int) bool { return v%3 == 0 })
				drain(s)
				s.Close()
			}
		})
	}
	wg.Wait()
	b.Close()
	if n := b.Subscribers(); n != 0 {
		t.Errorf("%d subscribers after Close", n)
	}
}
