package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

func TestNewID(t *testing.T) {
	t0 := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	var ids []string
	for i := range 1000 {
		ids = append(ids, store.NewID(t0.Add(time.Duration(i/100)*time.Second)))
	}
	t.Run("ids are 24 lowercase hex characters", func(t *testing.T) {
		for _, id := range ids {
			if !store.ValidID(id) {
				t.Fatalf("NewID made %q", id)
			}
		}
	})
	t.Run("ids are distinct", func(t *testing.T) {
		sorted := slices.Clone(ids)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) != len(ids) {
			t.Errorf("an id repeats")
		}
	})
	t.Run("ids of later seconds sort later", func(t *testing.T) {
		// Within a second the counter orders them too, except where it wraps around, as an
		// ObjectID's does.
		var firsts []string
		for i := 0; i < len(ids); i += 100 {
			firsts = append(firsts, ids[i])
		}
		if !slices.IsSorted(firsts) {
			t.Errorf("ids out of order: %v", firsts)
		}
	})
	t.Run("an id begins with its time in seconds, as an ObjectID does", func(t *testing.T) {
		if got, want := ids[0][:8], "67d446a6"; got != want {
			t.Errorf("prefix %s; want %s (0x%x)", got, want, t0.Unix())
		}
	})
}

func TestValidID(t *testing.T) {
	for _, bad := range []string{"", "67d4465600000000000000", "67D446560000000000000000", "67d44656000000000000000g", "67d446560000000000000000a", " 67d44656000000000000000"} {
		if store.ValidID(bad) {
			t.Errorf("ValidID(%q) = true", bad)
		}
	}
	if !store.ValidID("67d446560123456789abcdef") {
		t.Error("a valid id was refused")
	}
}
