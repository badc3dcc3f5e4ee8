package posts

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/store"
)

func TestCreate(t *testing.T) {
	st := newStore(t)
	s := newService(st, 100)
	setClock(t, start)
	storedAt := start.UTC().Truncate(time.Millisecond)

	valid := []struct {
		name      string
		in        NewPost
		wantTitle string
	}{
		{"a title is stored", NewPost{Title: "Hello", Body: ptr("First post.")}, "Hello"},
		{"white space around the title is trimmed before it is stored", NewPost{Title: " \t Hello world \n"}, "Hello world"},
		{"a title of 300 characters is accepted", NewPost{Title: strings.Repeat("a", 300)}, strings.Repeat("a", 300)},
		{"a title of 300 characters with white space around it is accepted", NewPost{Title: "  " + strings.Repeat("a", 300) + "\n"}, strings.Repeat("a", 300)},
		{"a title of 300 two-byte characters is accepted", NewPost{Title: strings.Repeat("é", 300)}, strings.Repeat("é", 300)},
		{"a title of 300 four-byte characters is accepted", NewPost{Title: strings.Repeat("🙂", 300)}, strings.Repeat("🙂", 300)},
		{"a post without a body is accepted", NewPost{Title: "No body"}, "No body"},
		{"an empty body is accepted", NewPost{Title: "Empty body", Body: ptr("")}, "Empty body"},
		{"a body of 50,000 characters is accepted", NewPost{Title: "Long", Body: ptr(strings.Repeat("b", 50_000))}, "Long"},
		{"a body of 50,000 three-byte characters is accepted", NewPost{Title: "Long", Body: ptr(strings.Repeat("語", 50_000))}, "Long"},
	}
	for _, tc := range valid {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Create(t.Context(), alice, tc.in)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			want := Post{ID: got.ID, UserID: alice.UserID, Title: tc.wantTitle, Body: tc.in.Body,
				CreatedAt: storedAt, UpdatedAt: storedAt, Version: 1}
			if !store.ValidID(got.ID) {
				t.Errorf("Create returned the id %q", got.ID)
			}
			if describe(got) != describe(want) {
				t.Errorf("Create returned\n%s\nwant\n%s", describe(got), describe(want))
			}
			if back := get(t, s, got.ID); describe(back) != describe(want) {
				t.Errorf("Get returned\n%s\nwant\n%s", describe(back), describe(want))
			}
		})
	}

	t.Run("the post belongs to the caller", func(t *testing.T) {
		if got := create(t, s, bob, "Bob's"); got.UserID != bob.UserID {
			t.Errorf("UserID = %q, want the caller's %q", got.UserID, bob.UserID)
		}
	})

	before := len(stored(t, st))
	invalid := []struct {
		name  string
		in    NewPost
		field string
	}{
		{"a missing title", NewPost{Body: ptr("body")}, "title"},
		{"a title of white space only", NewPost{Title: " \t\n\u00a0\u2003"}, "title"},
		{"a title of 301 characters", NewPost{Title: strings.Repeat("a", 301)}, "title"},
		{"a title of 301 two-byte characters", NewPost{Title: strings.Repeat("é", 301)}, "title"},
		{"a title that is not valid UTF-8", NewPost{Title: "bad \xff title"}, "title"},
		{"a body that is not valid UTF-8", NewPost{Title: "t", Body: ptr("bad \xff body")}, "body"},
		{"a body of 50,001 characters", NewPost{Title: "Long", Body: ptr(strings.Repeat("b", 50_001))}, "body"},
		{"a body of 50,001 three-byte characters", NewPost{Title: "Long", Body: ptr(strings.Repeat("語", 50_001))}, "body"},
	}
	for _, tc := range invalid {
		t.Run(tc.name+" is invalid and nothing is stored", func(t *testing.T) {
			_, err := s.Create(t.Context(), alice, tc.in)
			wantInvalid(t, err, tc.field)
			if n := len(stored(t, st)); n != before {
				t.Errorf("the store holds %d posts, want %d as before", n, before)
			}
		})
	}

	unauthenticated := []struct {
		name string
		in   NewPost
	}{
		{"a valid post", NewPost{Title: "Hello"}},
		{"an invalid post", NewPost{Title: ""}},
	}
	for _, tc := range unauthenticated {
		t.Run("an anonymous caller creating "+tc.name+" is unauthenticated and nothing is stored", func(t *testing.T) {
			_, err := s.Create(t.Context(), anonymous, tc.in)
			if !errors.Is(err, ErrUnauthenticated) {
				t.Errorf("Create error = %v, want ErrUnauthenticated", err)
			}
			if n := len(stored(t, st)); n != before {
				t.Errorf("the store holds %d posts, want %d as before", n, before)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	st := newStore(t)
	s := newService(st, 100)
	clock := setClock(t, start)
	created := start.UTC().Truncate(time.Millisecond)

	set := func(v string) Change { return Change{Set: true, Value: &v} }
	null := Change{Set: true}

	valid := []struct {
		name   string
		ch     Changes
		change func(*Post)
	}{
		{"a new title is trimmed and the body kept", Changes{Title: set("  New title ")},
			func(p *Post) { p.Title = "New title" }},
		{"a new body keeps the title", Changes{Body: set("New body")},
			func(p *Post) { p.Body = ptr("New body") }},
		{"a null body removes the body", Changes{Body: null},
			func(p *Post) { p.Body = nil }},
		{"an empty body is kept apart from a null one", Changes{Body: set("")},
			func(p *Post) { p.Body = ptr("") }},
		{"title and body change together", Changes{Title: set("New title"), Body: set("New body")},
			func(p *Post) { p.Title, p.Body = "New title", ptr("New body") }},
		{"a title of 300 characters is accepted", Changes{Title: set(strings.Repeat("é", 300))},
			func(p *Post) { p.Title = strings.Repeat("é", 300) }},
	}
	for _, tc := range valid {
		t.Run(tc.name, func(t *testing.T) {
			*clock = start
			before := create(t, s, alice, "Old title")
			*clock = start.Add(time.Minute)
			want := before
			tc.change(&want)
			want.UpdatedAt, want.Version = created.Add(time.Minute), 2

			got, err := s.Update(t.Context(), alice, before.ID, tc.ch, Expect{})
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if describe(got) != describe(want) {
				t.Errorf("Update returned\n%s\nwant\n%s", describe(got), describe(want))
			}
			if back := get(t, s, before.ID); describe(back) != describe(want) {
				t.Errorf("Get after Update returned\n%s\nwant\n%s", describe(back), describe(want))
			}
		})
	}

	t.Run("each update advances updatedAt and the version and keeps createdAt", func(t *testing.T) {
		*clock = start
		post := create(t, s, alice, "Clocked")
		for i := 1; i <= 3; i++ {
			*clock = start.Add(time.Duration(i) * time.Second)
			got, err := s.Update(t.Context(), alice, post.ID, Changes{Title: set(fmt.Sprintf("v%d", i))}, Expect{})
			if err != nil {
				t.Fatalf("Update %d: %v", i, err)
			}
			if want := created.Add(time.Duration(i) * time.Second); !got.UpdatedAt.Equal(want) {
				t.Errorf("after update %d updatedAt = %v, want %v", i, got.UpdatedAt, want)
			}
			if !got.CreatedAt.Equal(created) {
				t.Errorf("after update %d createdAt = %v, want %v", i, got.CreatedAt, created)
			}
			if got.Version != int64(1+i) {
				t.Errorf("after update %d the version is %d, want %d", i, got.Version, 1+i)
			}
		}
	})

	*clock = start
	post := create(t, s, alice, "Untouched")
	*clock = start.Add(time.Hour)
	unchanged := func(t *testing.T) {
		t.Helper()
		if got := get(t, s, post.ID); describe(got) != describe(post) {
			t.Errorf("the post changed to\n%s\nfrom\n%s", describe(got), describe(post))
		}
	}

	invalid := []struct {
		name  string
		ch    Changes
		field string
	}{
		{"an empty update", Changes{}, ""},
		{"an update whose members are given but not set", Changes{Title: Change{Value: ptr("x")}, Body: Change{Value: ptr("y")}}, ""},
		{"a null title", Changes{Title: null}, "title"},
		{"a blank title", Changes{Title: set("   ")}, "title"},
		{"a title of 301 characters", Changes{Title: set(strings.Repeat("a", 301))}, "title"},
		{"a body of 50,001 characters", Changes{Body: set(strings.Repeat("b", 50_001))}, "body"},
		{"a valid body with a null title", Changes{Title: null, Body: set("fine")}, "title"},
	}
	for _, tc := range invalid {
		t.Run(tc.name+" is invalid and the post is unchanged", func(t *testing.T) {
			_, err := s.Update(t.Context(), alice, post.ID, tc.ch, Expect{})
			wantInvalid(t, err, tc.field)
			unchanged(t)
		})
	}

	refused := refusals(post)
	for _, tc := range refused {
		t.Run(tc.name+" and the post is unchanged", func(t *testing.T) {
			_, err := s.Update(t.Context(), tc.caller, tc.id, Changes{Title: set("Hijacked"), Body: null}, Expect{})
			if !errors.Is(err, tc.want) {
				t.Errorf("Update error = %v, want %v", err, tc.want)
			}
			unchanged(t)
		})
	}
}

func TestDelete(t *testing.T) {
	st := newStore(t)
	s := newService(st, 100)
	post := create(t, s, alice, "Doomed")

	refused := refusals(post)
	for _, tc := range refused {
		t.Run(tc.name+" and the post stays stored", func(t *testing.T) {
			if err := s.Delete(t.Context(), tc.caller, tc.id, Expect{}); !errors.Is(err, tc.want) {
				t.Errorf("Delete error = %v, want %v", err, tc.want)
			}
			get(t, s, post.ID)
		})
	}

	t.Run("the owner deletes the post, and deleting it again is not found", func(t *testing.T) {
		if err := s.Delete(t.Context(), alice, post.ID, Expect{}); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if _, err := s.Get(t.Context(), post.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get after Delete error = %v, want ErrNotFound", err)
		}
		if err := s.Delete(t.Context(), alice, post.ID, Expect{}); !errors.Is(err, ErrNotFound) {
			t.Errorf("second Delete error = %v, want ErrNotFound", err)
		}
		if n := len(stored(t, st)); n != 0 {
			t.Errorf("the store holds %d posts after the delete, want 0", n)
		}
	})
}

// refusal is a write to post that must fail with want.
type refusal struct {
	name   string
	caller auth.Identity
	id     string
	want   error
}

// refusals are the writes Update and Delete both refuse: another user's post, no caller, an
// unknown id and a malformed one.
func refusals(post Post) []refusal {
	return []refusal{
		{"another user's post is forbidden", bob, post.ID, ErrForbidden},
		{"an anonymous caller is unauthenticated", anonymous, post.ID, ErrUnauthenticated},
		{"an unknown id is not found", alice, store.NewID(time.Now()), ErrNotFound},
		{"a malformed id is not found", alice, "not-an-id", ErrNotFound},
	}
}
