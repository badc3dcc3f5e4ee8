package posts

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/store"
)

func TestGet(t *testing.T) {
	st := newStore(t)
	s := newService(st, 100)
	post := create(t, s, alice, "Hello")

	t.Run("a post is found by its id", func(t *testing.T) {
		if got := get(t, s, post.ID); describe(got) != describe(post) {
			t.Errorf("Get = %s, want %s", describe(got), describe(post))
		}
	})

	notFound := []struct {
		name string
		id   string
	}{
		{"an unknown id", store.NewID(time.Now())},
		{"an empty id", ""},
		{"an id that is not hex", "not-an-object-id-at-all!"},
		{"an id one hex digit short", post.ID[:23]},
		{"an id one hex digit long", post.ID + "0"},
		{"an id with a trailing space", post.ID + " "},
	}
	for _, tc := range notFound {
		t.Run(tc.name+" is not found", func(t *testing.T) {
			if _, err := s.Get(t.Context(), tc.id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(%q) error = %v, want ErrNotFound", tc.id, err)
			}
		})
	}
}

func TestList(t *testing.T) {
	st := newStore(t)
	wide := newService(st, 100)
	narrow := newService(st, 5)
	clock := setClock(t, start)

	// 25 posts, in pairs sharing a createdAt, by alternating users.
	var all []Post
	for i := range 25 {
		caller := alice
		if i%3 == 0 {
			caller = bob
		}
		all = append(all, create(t, wide, caller, fmt.Sprintf("post %d", i)))
		if i%2 == 1 {
			*clock = clock.Add(time.Millisecond)
		}
	}
	slices.SortFunc(all, func(a, b Post) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	ids := func(posts []Post) []string {
		hex := make([]string, len(posts))
		for i, p := range posts {
			hex[i] = p.ID
		}
		return hex
	}
	var bobs []Post
	for _, p := range all {
		if p.UserID == bob.UserID {
			bobs = append(bobs, p)
		}
	}

	pages := []struct {
		name     string
		s        *Service
		q        ListQuery
		want     []Post
		wantNext bool
	}{
		{"no limit gives DefaultLimit posts", wide, ListQuery{}, all[:DefaultLimit], true},
		{"no limit gives the maximum when it is below DefaultLimit", narrow, ListQuery{}, all[:5], true},
		{"a limit of 1 gives one post", wide, ListQuery{Limit: 1}, all[:1], true},
		{"a limit equal to the maximum is accepted", narrow, ListQuery{Limit: 5}, all[:5], true},
		{"a limit above the number of posts gives them all and no next page", wide, ListQuery{Limit: 100}, all, false},
		{"a limit equal to the number of posts gives them all and no next page", wide, ListQuery{Limit: len(all)}, all, false},
		{"a limit one below the number of posts leaves a next page", wide, ListQuery{Limit: len(all) - 1}, all[:len(all)-1], true},
		{"the user filter keeps only that user's posts", wide, ListQuery{UserID: bob.UserID, Limit: 100}, bobs, false},
		{"a user without posts gets an empty last page", wide, ListQuery{UserID: "nobody"}, nil, false},
	}
	for _, tc := range pages {
		t.Run(tc.name, func(t *testing.T) {
			page, err := tc.s.List(t.Context(), tc.q)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if !slices.Equal(ids(page.Posts), ids(tc.want)) {
				t.Errorf("List = %v,\nwant %v", ids(page.Posts), ids(tc.want))
			}
			if (page.Next != "") != tc.wantNext {
				t.Errorf("Next = %q, want a next page: %v", page.Next, tc.wantNext)
			}
		})
	}

	limits := []struct {
		name  string
		s     *Service
		limit int
	}{
		{"a negative limit", wide, -1},
		{"a limit one above the maximum", wide, 101},
		{"a limit one above a maximum below DefaultLimit", narrow, 6},
		{"DefaultLimit itself when the maximum is below it", narrow, DefaultLimit},
	}
	for _, tc := range limits {
		t.Run(tc.name+" is invalid", func(t *testing.T) {
			_, err := tc.s.List(t.Context(), ListQuery{Limit: tc.limit})
			wantInvalid(t, err, "limit")
		})
	}

	validCursor := Cursor(all[3])
	cursors := []struct {
		name  string
		after string
	}{
		{"a cursor that is not base64", "not a cursor!"},
		{"a post id in place of a cursor", all[0].ID},
		{"a cursor one byte short", base64.RawURLEncoding.EncodeToString(make([]byte, cursorSize-1))},
		{"a cursor one byte long", base64.RawURLEncoding.EncodeToString(make([]byte, cursorSize+1))},
		{"a cursor with base64 padding", base64.URLEncoding.EncodeToString(make([]byte, cursorSize))},
		{"a cursor in standard base64", base64.RawStdEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, cursorSize))},
		{"a cursor with a character outside base64url", validCursor[:len(validCursor)-1] + "+"},
		{"a cursor with a space appended", validCursor + " "},
	}
	for _, tc := range cursors {
		t.Run(tc.name+" is an invalid after", func(t *testing.T) {
			_, err := wide.List(t.Context(), ListQuery{After: tc.after})
			wantInvalid(t, err, "after")
		})
	}

	follow := []struct {
		name string
		s    *Service
		q    ListQuery
		want []Post
	}{
		{"following Next visits every post once, newest first, ending on a full page", narrow, ListQuery{}, all},
		{"following Next visits every post once, newest first, ending on a short page", wide, ListQuery{Limit: 7}, all},
		{"following Next keeps the user filter", wide, ListQuery{UserID: bob.UserID, Limit: 2}, bobs},
	}
	for _, tc := range follow {
		t.Run(tc.name, func(t *testing.T) {
			var got []Post
			q := tc.q
			for range len(all) + 1 {
				page, err := tc.s.List(t.Context(), q)
				if err != nil {
					t.Fatalf("List(%+v): %v", q, err)
				}
				got = append(got, page.Posts...)
				if page.Next == "" {
					break
				}
				if len(page.Posts) == 0 {
					t.Fatalf("List(%+v) returned an empty page with a next cursor", q)
				}
				q.After = page.Next
			}
			if !slices.Equal(ids(got), ids(tc.want)) {
				t.Errorf("pages visited %v,\nwant %v", ids(got), ids(tc.want))
			}
		})
	}
}

func TestUser(t *testing.T) {
	st := newStore(t)
	s := newService(st, 100)
	carol := auth.Identity{UserID: "carol", Method: auth.MethodJWT, Name: "Carol", Email: "carol@example.com"}
	create(t, s, carol, "Carol's")
	// A post stored without a profile, as one written before profiles were saved.
	if _, err := st.InsertPost(t.Context(), store.Post{ID: store.NewID(start), UserID: "dave", Title: "old", CreatedAt: start, UpdatedAt: start}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		caller    auth.Identity
		id        string
		want      User
		wantFound bool
	}{
		{"a user sees their own email", carol, "carol", User{ID: "carol", Name: ptr("Carol"), Email: ptr("carol@example.com")}, true},
		{"another user sees the name but not the email", bob, "carol", User{ID: "carol", Name: ptr("Carol")}, true},
		{"an anonymous caller sees the name but not the email", anonymous, "carol", User{ID: "carol", Name: ptr("Carol")}, true},
		{"a user with posts but no profile is found with the id alone", bob, "dave", User{ID: "dave"}, true},
		{"a user with neither a profile nor posts is not found", bob, "nobody", User{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, found, err := s.User(t.Context(), tc.caller, tc.id)
			if err != nil {
				t.Fatalf("User: %v", err)
			}
			if found != tc.wantFound || fmt.Sprint(describeProfile(got)) != fmt.Sprint(describeProfile(tc.want)) {
				t.Errorf("User = %s, %v; want %s, %v", describeProfile(got), found, describeProfile(tc.want), tc.wantFound)
			}
		})
	}
}

func describeProfile(u User) string {
	deref := func(s *string) string {
		if s == nil {
			return "<none>"
		}
		return *s
	}
	return fmt.Sprintf("{ID: %q, Name: %q, Email: %q}", u.ID, deref(u.Name), deref(u.Email))
}

// pageStore answers every ListPosts with a fresh copy of its posts, as a real store allocates
// its answer, so that a benchmark over it measures the service alone.
type pageStore struct {
	store.Store
	posts []store.Post
}

func (ps pageStore) ListPosts(context.Context, store.Filter) ([]store.Post, error) {
	return slices.Clone(ps.posts), nil
}

// BenchmarkList measures a page of DefaultLimit posts: over a store that only copies, what the
// service adds to a list; over SQLite, the whole of it.
func BenchmarkList(b *testing.B) {
	body := "a body of a few words"
	var page []store.Post
	for i := range DefaultLimit + 1 {
		t := start.Add(time.Duration(i) * time.Millisecond).UTC()
		page = append(page, store.Post{ID: store.NewID(t), UserID: "alice", Title: fmt.Sprintf("post %d", i), Body: &body, CreatedAt: t, UpdatedAt: t})
	}
	sqlite := newStore(b)
	for _, p := range page {
		if _, err := sqlite.InsertPost(b.Context(), p); err != nil {
			b.Fatal(err)
		}
	}
	stores := []struct {
		name string
		st   store.Store
	}{
		{"service alone", pageStore{posts: page}},
		{"SQLite", sqlite},
	}
	for _, s := range stores {
		b.Run(s.name, func(b *testing.B) {
			svc := newService(s.st, 100)
			b.ReportAllocs()
			for b.Loop() {
				p, err := svc.List(b.Context(), ListQuery{})
				if err != nil || len(p.Posts) != DefaultLimit {
					b.Fatalf("List: %d posts, %v", len(p.Posts), err)
				}
			}
		})
	}
}
