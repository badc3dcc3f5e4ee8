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

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

var (
	alice     = auth.Identity{UserID: "alice", Method: "api_key"}
	bob       = auth.Identity{UserID: "bob", Method: "api_key"}
	anonymous = auth.Identity{}
)

// start is the clock's reading when a test begins: not UTC and finer than a millisecond, as
// time.Now is.
var start = time.Date(2025, 3, 14, 17, 9, 26, 535_897_932, time.FixedZone("UTC+2", 2*60*60))

// newStore returns a new embedded store, closed when the test ends.
func newStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

func newService(st store.Store, maxLimit int) *Service {
	return NewService(Config{Store: st, Timeout: 5 * time.Second, MaxLimit: maxLimit, Logger: zap.NewNop()})
}

// setClock makes now return the time the returned pointer holds, until the test ends.
func setClock(t *testing.T, at time.Time) *time.Time {
	t.Helper()
	clock, saved := at, now
	now = func() time.Time { return clock }
	t.Cleanup(func() { now = saved })
	return &clock
}

// stored returns every post in st, newest first.
func stored(t *testing.T, st store.Store) []Post {
	t.Helper()
	all, err := st.ListPosts(t.Context(), store.Filter{Limit: 10_000})
	if err != nil {
		t.Fatalf("listing the store: %v", err)
	}
	return all
}

func create(t *testing.T, s *Service, caller auth.Identity, title string) Post {
	t.Helper()
	post, err := s.Create(t.Context(), caller, NewPost{Title: title, Body: ptr("body of " + title)})
	if err != nil {
		t.Fatalf("Create(%q): %v", title, err)
	}
	return post
}

func get(t *testing.T, s *Service, id string) Post {
	t.Helper()
	post, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return post
}

// describe renders every field of a post, its body dereferenced and its times with their zone.
func describe(p Post) string {
	body := "<none>"
	if p.Body != nil {
		body = fmt.Sprintf("%q", *p.Body)
	}
	return fmt.Sprintf("{ID: %s, UserID: %q, Title: %q, Body: %s, CreatedAt: %s, UpdatedAt: %s}",
		p.ID, p.UserID, p.Title, body,
		p.CreatedAt.Format(time.RFC3339Nano+" MST"), p.UpdatedAt.Format(time.RFC3339Nano+" MST"))
}

// wantInvalid fails unless err is an *InvalidError for field that matches ErrInvalid.
func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	var invalidErr *InvalidError
	switch {
	case !errors.Is(err, ErrInvalid):
		t.Errorf("error = %v, want ErrInvalid", err)
	case !errors.As(err, &invalidErr):
		t.Errorf("error = %v, want an *InvalidError", err)
	case invalidErr.Field != field:
		t.Errorf("error names the field %q, want %q (%v)", invalidErr.Field, field, err)
	}
}

func ptr(s string) *string { return &s }

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
				CreatedAt: storedAt, UpdatedAt: storedAt}
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

	validCursor := encodeCursor(store.Key{CreatedAt: all[3].CreatedAt, ID: all[3].ID})
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
			want.UpdatedAt = created.Add(time.Minute)

			got, err := s.Update(t.Context(), alice, before.ID, tc.ch)
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

	t.Run("each update advances updatedAt and keeps createdAt", func(t *testing.T) {
		*clock = start
		post := create(t, s, alice, "Clocked")
		for i := 1; i <= 3; i++ {
			*clock = start.Add(time.Duration(i) * time.Second)
			got, err := s.Update(t.Context(), alice, post.ID, Changes{Title: set(fmt.Sprintf("v%d", i))})
			if err != nil {
				t.Fatalf("Update %d: %v", i, err)
			}
			if want := created.Add(time.Duration(i) * time.Second); !got.UpdatedAt.Equal(want) {
				t.Errorf("after update %d updatedAt = %v, want %v", i, got.UpdatedAt, want)
			}
			if !got.CreatedAt.Equal(created) {
				t.Errorf("after update %d createdAt = %v, want %v", i, got.CreatedAt, created)
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
			_, err := s.Update(t.Context(), alice, post.ID, tc.ch)
			wantInvalid(t, err, tc.field)
			unchanged(t)
		})
	}

	refused := refusals(post)
	for _, tc := range refused {
		t.Run(tc.name+" and the post is unchanged", func(t *testing.T) {
			_, err := s.Update(t.Context(), tc.caller, tc.id, Changes{Title: set("Hijacked"), Body: null})
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
			if err := s.Delete(t.Context(), tc.caller, tc.id); !errors.Is(err, tc.want) {
				t.Errorf("Delete error = %v, want %v", err, tc.want)
			}
			get(t, s, post.ID)
		})
	}

	t.Run("the owner deletes the post, and deleting it again is not found", func(t *testing.T) {
		if err := s.Delete(t.Context(), alice, post.ID); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if _, err := s.Get(t.Context(), post.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get after Delete error = %v, want ErrNotFound", err)
		}
		if err := s.Delete(t.Context(), alice, post.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("second Delete error = %v, want ErrNotFound", err)
		}
		if n := len(stored(t, st)); n != 0 {
			t.Errorf("the store holds %d posts after the delete, want 0", n)
		}
	})
}

func TestUnavailable(t *testing.T) {
	unreachable, err := mongo.Open("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=60000", "test")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = unreachable.Close() })
	s := NewService(Config{Store: unreachable, Timeout: 300 * time.Millisecond, MaxLimit: 100, Logger: zap.NewNop()})
	id := store.NewID(time.Now())

	ops := []struct {
		name string
		do   func(context.Context) error
	}{
		{"Get", func(ctx context.Context) error {
			_, err := s.Get(ctx, id)
			return err
		}},
		{"List", func(ctx context.Context) error {
			_, err := s.List(ctx, ListQuery{})
			return err
		}},
		{"Create", func(ctx context.Context) error {
			_, err := s.Create(ctx, alice, NewPost{Title: "Hello"})
			return err
		}},
		{"Update", func(ctx context.Context) error {
			_, err := s.Update(ctx, alice, id, Changes{Title: Change{Set: true, Value: ptr("New")}})
			return err
		}},
		{"Delete", func(ctx context.Context) error {
			return s.Delete(ctx, alice, id)
		}},
		{"User", func(ctx context.Context) error {
			_, _, err := s.User(ctx, alice, "alice")
			return err
		}},
	}
	for _, op := range ops {
		t.Run(op.name+" against an unreachable database is unavailable", func(t *testing.T) {
			err := op.do(t.Context())
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("%s error = %v, want ErrUnavailable", op.name, err)
			}
			for _, other := range []error{ErrNotFound, ErrForbidden} {
				if errors.Is(err, other) {
					t.Errorf("%s error = %v, also matches %v", op.name, err, other)
				}
			}
		})
	}
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
		if _, err := s.Update(t.Context(), carolByKey, post.ID, Changes{Title: Change{Set: true, Value: ptr("Edited")}}); err != nil {
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
		if err := s.Delete(t.Context(), dave, post.ID); !errors.Is(err, ErrForbidden) {
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
		if err := s.Delete(t.Context(), renamed, post.ID); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		u, _ := profile(t, "carol")
		want := store.User{ID: "carol", Name: ptr("Carol Smith"), Email: ptr("carol@example.com"), UpdatedAt: start.Add(2 * time.Minute).UTC().Truncate(time.Millisecond)}
		if describeUser(u) != describeUser(want) {
			t.Errorf("users holds %s, want %s", describeUser(u), describeUser(want))
		}
	})
}

func TestUser(t *testing.T) {
	st := newStore(t)
	s := newService(st, 100)
	carol := auth.Identity{UserID: "carol", Method: auth.MethodJWT, Name: "Carol", Email: "carol@example.com"}
	create(t, s, carol, "Carol's")
	// A post stored without a profile, as one written before profiles were saved.
	if err := st.InsertPost(t.Context(), Post{ID: store.NewID(start), UserID: "dave", Title: "old", CreatedAt: start, UpdatedAt: start}); err != nil {
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
