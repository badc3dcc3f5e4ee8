package posts

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/store"
)

func TestProfile(t *testing.T) {
	st := newStore(t)
	s := newService(st, 100)
	clock := setClock(t, start)
	carol := auth.Identity{UserID: "carol", Method: auth.MethodJWT, Name: "Carol", Email: "carol@example.com"}
	carolByKey := auth.Identity{UserID: "carol", Method: auth.MethodAPIKey}

	profile := func(t *testing.T, id string) (store.User, bool) {
		t.Helper()
		u, err := st.GetUser(t.Context(), id)
		if errors.Is(err, store.ErrNotFound) {
			return store.User{}, false
		}
		if err != nil {
			t.Fatalf("FindByID(%q): %v", id, err)
		}
		return u, true
	}
	describeUser := func(u store.User) string {
		deref := func(s *string) string {
			if s == nil {
				return "<none>"
			}
			return *s
		}
		return fmt.Sprintf("{ID: %q, Name: %q, Email: %q, UpdatedAt: %s}", u.ID, deref(u.Name), deref(u.Email), u.UpdatedAt.UTC().Format(time.RFC3339Nano))
	}

	t.Run("a refused write records no user", func(t *testing.T) {
		if _, err := s.Create(t.Context(), carol, NewPost{Title: " "}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Create error = %v, want ErrInvalid", err)
		}
		if u, ok := profile(t, "carol"); ok {
			t.Errorf("users holds %s after a refused write, want nothing", describeUser(u))
		}
	})

	post := create(t, s, carol, "Carol's")
	t.Run("a write records the caller with the profile its credential gives", func(t *testing.T) {
		u, _ := profile(t, "carol")
		want := store.User{ID: "carol", Name: ptr("Carol"), Email: ptr("carol@example.com"), UpdatedAt: start.UTC().Truncate(time.Millisecond)}
		if describeUser(u) != describeUser(want) {
			t.Errorf("users holds %s, want %s", describeUser(u), describeUser(want))
		}
	})

	t.Run("a write with a credential without a profile keeps the stored profile and refreshes updatedAt", func(t *testing.T) {
		*clock = start.Add(time.Minute)
		if _, err := s.Update(t.Context(), carolByKey, post.ID, Changes{Title: Change{Set: true, Value: ptr("Edited")}}, Expect{}); err != nil {
			t.Fatalf("Update: %v", err)
		}
		u, _ := profile(t, "carol")
		want := store.User{ID: "carol", Name: ptr("Carol"), Email: ptr("carol@example.com"), UpdatedAt: start.Add(time.Minute).UTC().Truncate(time.Millisecond)}
		if describeUser(u) != describeUser(want) {
			t.Errorf("users holds %s, want %s", describeUser(u), describeUser(want))
		}
	})

	t.Run("a forbidden write records nothing for the caller", func(t *testing.T) {
		dave := auth.Identity{UserID: "dave", Method: auth.MethodJWT, Name: "Dave"}
		if err := s.Delete(t.Context(), dave, post.ID, Expect{}); !errors.Is(err, ErrForbidden) {
			t.Fatalf("Delete error = %v, want ErrForbidden", err)
		}
		if u, ok := profile(t, "dave"); ok {
			t.Errorf("users holds %s after a forbidden write, want nothing", describeUser(u))
		}
	})

	t.Run("the same profile is saved again only after ProfileRefresh", func(t *testing.T) {
		erin := auth.Identity{UserID: "erin", Method: auth.MethodJWT, Name: "Erin"}
		*clock = start
		create(t, s, erin, "first")
		*clock = start.Add(ProfileRefresh - time.Second)
		create(t, s, erin, "second")
		if u, _ := profile(t, "erin"); !u.UpdatedAt.Equal(start.UTC().Truncate(time.Millisecond)) {
			t.Errorf("after a second write within ProfileRefresh, updatedAt = %v; want the first write's, %v", u.UpdatedAt, start)
		}
		*clock = start.Add(ProfileRefresh)
		create(t, s, erin, "third")
		if u, _ := profile(t, "erin"); !u.UpdatedAt.Equal(start.Add(ProfileRefresh).UTC().Truncate(time.Millisecond)) {
			t.Errorf("after ProfileRefresh, updatedAt = %v; want %v", u.UpdatedAt, start.Add(ProfileRefresh))
		}
	})

	t.Run("a delete refreshes the profile with the new claims", func(t *testing.T) {
		*clock = start.Add(2 * time.Minute)
		renamed := carol
		renamed.Name = "Carol Smith"
		if err := s.Delete(t.Context(), renamed, post.ID, Expect{}); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		u, _ := profile(t, "carol")
		want := store.User{ID: "carol", Name: ptr("Carol Smith"), Email: ptr("carol@example.com"), UpdatedAt: start.Add(2 * time.Minute).UTC().Truncate(time.Millisecond)}
		if describeUser(u) != describeUser(want) {
			t.Errorf("users holds %s, want %s", describeUser(u), describeUser(want))
		}
	})
}
