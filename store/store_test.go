package store_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/store"
)

const (
	database = "test"
	timeout  = 5 * time.Second
)

// base is the createdAt the tests' posts are placed around.
var base = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// openEmbedded returns a client for an embedded server keeping its files in dir, closed when
// the test ends.
func openEmbedded(t *testing.T, dir string) *store.Client {
	t.Helper()
	c := store.Embedded(dir, zap.NewNop())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// newPosts returns the posts collection of a new embedded server, and the server's data directory.
func newPosts(t *testing.T) (*store.Posts, string) {
	t.Helper()
	dir := t.TempDir()
	return store.NewPosts(openEmbedded(t, dir), database, timeout), dir
}

// oid returns an ObjectID that sorts by n, so tests can name posts by number.
func oid(n byte) bson.ObjectID {
	id := bson.ObjectID{0x67, 0xd4, 0x46, 0x00}
	id[11] = n
	return id
}

func newPost(n byte, userID string, createdAt time.Time) store.Post {
	return store.Post{
		ID:        oid(n),
		UserID:    userID,
		Title:     fmt.Sprintf("post %d", n),
		CreatedAt: createdAt,
		UpdatedAt: createdAt,
	}
}

func insert(t *testing.T, p *store.Posts, posts ...store.Post) {
	t.Helper()
	for _, post := range posts {
		if err := p.Insert(t.Context(), post); err != nil {
			t.Fatalf("Insert(%s): %v", post.ID.Hex(), err)
		}
	}
}

func find(t *testing.T, p *store.Posts, id bson.ObjectID) store.Post {
	t.Helper()
	post, err := p.FindByID(t.Context(), id)
	if err != nil {
		t.Fatalf("FindByID(%s): %v", id.Hex(), err)
	}
	return post
}

// numbers names a list of posts by the n their ids were made from.
func numbers(posts []store.Post) []byte {
	ns := make([]byte, len(posts))
	for i, p := range posts {
		ns[i] = p.ID[11]
	}
	return ns
}

// diffPost describes how got differs from want, or returns "" when they are the same post.
func diffPost(got, want store.Post) string {
	var diffs []string
	if got.ID != want.ID {
		diffs = append(diffs, fmt.Sprintf("ID %s, want %s", got.ID.Hex(), want.ID.Hex()))
	}
	if got.UserID != want.UserID {
		diffs = append(diffs, fmt.Sprintf("UserID %q, want %q", got.UserID, want.UserID))
	}
	if got.Title != want.Title {
		diffs = append(diffs, fmt.Sprintf("Title %q, want %q", got.Title, want.Title))
	}
	if (got.Body == nil) != (want.Body == nil) || (got.Body != nil && *got.Body != *want.Body) {
		diffs = append(diffs, fmt.Sprintf("Body %s, want %s", show(got.Body), show(want.Body)))
	}
	for _, tm := range []struct {
		name      string
		got, want time.Time
	}{{"CreatedAt", got.CreatedAt, want.CreatedAt}, {"UpdatedAt", got.UpdatedAt, want.UpdatedAt}} {
		if !tm.got.Equal(tm.want) || tm.got.Location() != tm.want.Location() {
			diffs = append(diffs, fmt.Sprintf("%s %v, want %v", tm.name, tm.got, tm.want))
		}
	}
	return strings.Join(diffs, "; ")
}

func show(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", *s)
}

func ptr(s string) *string { return &s }

func TestInsertAndFindByID(t *testing.T) {
	p, _ := newPosts(t)
	// Not UTC and finer than a millisecond: both are normalized on the way through the database.
	created := time.Date(2025, 3, 14, 17, 9, 26, 535_897_932, time.FixedZone("UTC+2", 2*60*60))
	storedCreated := time.Date(2025, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

	tests := []struct {
		name string
		post store.Post
		want store.Post
	}{
		{
			name: "a post comes back as stored, its times in UTC truncated to milliseconds",
			post: store.Post{ID: oid(1), UserID: "alice", Title: "Hello", Body: ptr("First post."),
				CreatedAt: created, UpdatedAt: created.Add(time.Second)},
			want: store.Post{ID: oid(1), UserID: "alice", Title: "Hello", Body: ptr("First post."),
				CreatedAt: storedCreated, UpdatedAt: storedCreated.Add(time.Second)},
		},
		{
			name: "a post without a body comes back without one",
			post: store.Post{ID: oid(2), UserID: "bob", Title: "No body", CreatedAt: base, UpdatedAt: base},
			want: store.Post{ID: oid(2), UserID: "bob", Title: "No body", CreatedAt: base, UpdatedAt: base},
		},
		{
			name: "an empty body is kept apart from no body",
			post: store.Post{ID: oid(3), UserID: "bob", Title: "Empty body", Body: ptr(""), CreatedAt: base, UpdatedAt: base},
			want: store.Post{ID: oid(3), UserID: "bob", Title: "Empty body", Body: ptr(""), CreatedAt: base, UpdatedAt: base},
		},
		{
			name: "text outside ASCII comes back unchanged",
			post: store.Post{ID: oid(4), UserID: "chloé", Title: "Grüße 👋", Body: ptr("日本語"), CreatedAt: base, UpdatedAt: base},
			want: store.Post{ID: oid(4), UserID: "chloé", Title: "Grüße 👋", Body: ptr("日本語"), CreatedAt: base, UpdatedAt: base},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			insert(t, p, tc.post)
			if d := diffPost(find(t, p, tc.post.ID), tc.want); d != "" {
				t.Errorf("FindByID: %s", d)
			}
		})
	}

	t.Run("an unknown id is not found", func(t *testing.T) {
		_, err := p.FindByID(t.Context(), oid(99))
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("FindByID(unknown) error = %v, want ErrNotFound", err)
		}
	})

	t.Run("a second post with the same id is refused and the first is kept", func(t *testing.T) {
		dup := newPost(1, "mallory", base)
		if err := p.Insert(t.Context(), dup); err == nil {
			t.Fatal("Insert of a duplicate id succeeded")
		}
		if got := find(t, p, oid(1)); got.UserID != "alice" {
			t.Errorf("after the duplicate insert the post belongs to %q, want %q", got.UserID, "alice")
		}
	})
}

func TestList(t *testing.T) {
	p, _ := newPosts(t)
	// Inserted out of order, with three posts sharing a createdAt and an older post whose _id
	// is the largest, so neither insertion order nor _id alone gives the expected order.
	insert(t, p,
		newPost(3, "alice", base.Add(time.Second)),
		newPost(1, "alice", base),
		newPost(9, "bob", base.Add(-time.Second)),
		newPost(5, "alice", base.Add(2*time.Second)),
		newPost(2, "bob", base.Add(time.Second)),
		newPost(4, "bob", base.Add(time.Second)),
		newPost(6, "alice", base.Add(time.Second+time.Millisecond)),
	)
	keyOf := func(n byte, createdAt time.Time) *store.Key { return &store.Key{CreatedAt: createdAt, ID: oid(n)} }

	tests := []struct {
		name   string
		filter store.Filter
		want   []byte
	}{
		{
			name:   "all posts come newest first, ties on createdAt broken by the larger _id first",
			filter: store.Filter{Limit: 100},
			want:   []byte{5, 6, 4, 3, 2, 1, 9},
		},
		{
			name:   "the user filter keeps only that user's posts in the same order",
			filter: store.Filter{UserID: "alice", Limit: 100},
			want:   []byte{5, 6, 3, 1},
		},
		{
			name:   "a user without posts gets an empty list",
			filter: store.Filter{UserID: "nobody", Limit: 100},
			want:   []byte{},
		},
		{
			name:   "the limit caps the number of posts",
			filter: store.Filter{Limit: 2},
			want:   []byte{5, 6},
		},
		{
			name:   "after a key inside a tie the rest of the tie comes first",
			filter: store.Filter{After: keyOf(4, base.Add(time.Second)), Limit: 100},
			want:   []byte{3, 2, 1, 9},
		},
		{
			name:   "after a key the user filter still applies",
			filter: store.Filter{UserID: "bob", After: keyOf(4, base.Add(time.Second)), Limit: 100},
			want:   []byte{2, 9},
		},
		{
			name:   "after a key the limit still applies",
			filter: store.Filter{After: keyOf(6, base.Add(time.Second+time.Millisecond)), Limit: 2},
			want:   []byte{4, 3},
		},
		{
			name:   "after a key no post has, the posts older than it follow",
			filter: store.Filter{After: keyOf(200, base.Add(time.Second/2)), Limit: 100},
			want:   []byte{1, 9},
		},
		{
			name:   "after the oldest post the page is empty",
			filter: store.Filter{After: keyOf(9, base.Add(-time.Second)), Limit: 100},
			want:   []byte{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.List(t.Context(), tc.filter)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if !slices.Equal(numbers(got), tc.want) {
				t.Errorf("List = posts %v, want %v", numbers(got), tc.want)
			}
			if got == nil {
				t.Error("List = nil, want an empty slice")
			}
		})
	}
}

func TestListPagesWithoutGapsOrDuplicates(t *testing.T) {
	p, _ := newPosts(t)
	var want []byte
	for n := byte(1); n <= 10; n++ {
		// Pairs of posts share a createdAt, so page boundaries fall inside ties too.
		insert(t, p, newPost(n, "alice", base.Add(time.Duration(n/2)*time.Second)))
	}
	for n := byte(10); n >= 1; n-- {
		want = append(want, n)
	}

	var got []byte
	var after *store.Key
	for page := 0; ; page++ {
		if page > 10 {
			t.Fatalf("still paging after %d pages; visited %v", page, got)
		}
		posts, err := p.List(t.Context(), store.Filter{After: after, Limit: 3})
		if err != nil {
			t.Fatalf("List page %d: %v", page, err)
		}
		if len(posts) > 3 {
			t.Fatalf("page %d has %d posts, more than the limit 3", page, len(posts))
		}
		if len(posts) == 0 {
			break
		}
		got = append(got, numbers(posts)...)
		last := posts[len(posts)-1]
		after = &store.Key{CreatedAt: last.CreatedAt, ID: last.ID}
		// A post written between two pages is newer than every key and must not show up later.
		insert(t, p, newPost(byte(100+page), "alice", base.Add(time.Hour+time.Duration(page)*time.Second)))
	}
	if !slices.Equal(got, want) {
		t.Errorf("pages visited posts %v, want each of %v once, in order", got, want)
	}
}

func TestUpdateOwned(t *testing.T) {
	p, _ := newPosts(t)
	updated := base.Add(time.Hour)

	tests := []struct {
		name   string
		body   *string
		update store.Update
		want   func(store.Post) store.Post
	}{
		{
			name:   "setting the title keeps the body",
			body:   ptr("body"),
			update: store.Update{Title: ptr("new title"), UpdatedAt: updated},
			want:   func(p store.Post) store.Post { p.Title = "new title"; return p },
		},
		{
			name:   "setting the body keeps the title",
			body:   ptr("body"),
			update: store.Update{Body: ptr("new body"), UpdatedAt: updated},
			want:   func(p store.Post) store.Post { p.Body = ptr("new body"); return p },
		},
		{
			name:   "setting a body on a post without one adds it",
			update: store.Update{Body: ptr("new body"), UpdatedAt: updated},
			want:   func(p store.Post) store.Post { p.Body = ptr("new body"); return p },
		},
		{
			name:   "setting title and body changes both",
			body:   ptr("body"),
			update: store.Update{Title: ptr("new title"), Body: ptr("new body"), UpdatedAt: updated},
			want: func(p store.Post) store.Post {
				p.Title, p.Body = "new title", ptr("new body")
				return p
			},
		},
		{
			name:   "unsetting the body removes it",
			body:   ptr("body"),
			update: store.Update{UnsetBody: true, UpdatedAt: updated},
			want:   func(p store.Post) store.Post { p.Body = nil; return p },
		},
		{
			name:   "unsetting the body with a new title does both",
			body:   ptr("body"),
			update: store.Update{Title: ptr("new title"), UnsetBody: true, UpdatedAt: updated},
			want: func(p store.Post) store.Post {
				p.Title, p.Body = "new title", nil
				return p
			},
		},
		{
			name:   "unsetting a body that is not there is no error",
			update: store.Update{UnsetBody: true, UpdatedAt: updated},
			want:   func(p store.Post) store.Post { return p },
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := newPost(byte(i+1), "alice", base)
			before.Body = tc.body
			insert(t, p, before)
			want := tc.want(before)
			want.UpdatedAt = updated

			got, err := p.UpdateOwned(t.Context(), before.ID, "alice", tc.update)
			if err != nil {
				t.Fatalf("UpdateOwned: %v", err)
			}
			if d := diffPost(got, want); d != "" {
				t.Errorf("UpdateOwned returned: %s", d)
			}
			if d := diffPost(find(t, p, before.ID), want); d != "" {
				t.Errorf("stored after UpdateOwned: %s", d)
			}
		})
	}

	refused := []struct {
		name  string
		id    bson.ObjectID
		owner string
	}{
		{"another user's post is not found and stays as it was", oid(100), "mallory"},
		{"an owner id differing only in case is another user", oid(100), "Alice"},
		{"an empty owner is another user", oid(100), ""},
		{"an unknown id is not found", oid(101), "alice"},
	}
	stored := newPost(100, "alice", base)
	stored.Body = ptr("body")
	insert(t, p, stored)
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.UpdateOwned(t.Context(), tc.id, tc.owner,
				store.Update{Title: ptr("hijacked"), UnsetBody: true, UpdatedAt: updated})
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("UpdateOwned error = %v, want ErrNotFound", err)
			}
			if d := diffPost(find(t, p, stored.ID), stored); d != "" {
				t.Errorf("the post changed: %s", d)
			}
		})
	}
}

func TestDeleteOwned(t *testing.T) {
	p, _ := newPosts(t)
	post := newPost(1, "alice", base)
	insert(t, p, post)

	refused := []struct {
		name  string
		id    bson.ObjectID
		owner string
	}{
		{"another user's post is not found and stays stored", post.ID, "mallory"},
		{"an empty owner is another user", post.ID, ""},
		{"an unknown id is not found", oid(2), "alice"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.DeleteOwned(t.Context(), tc.id, tc.owner); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("DeleteOwned error = %v, want ErrNotFound", err)
			}
			find(t, p, post.ID)
		})
	}

	t.Run("the owner deletes the post, and a second delete finds nothing", func(t *testing.T) {
		if err := p.DeleteOwned(t.Context(), post.ID, "alice"); err != nil {
			t.Fatalf("DeleteOwned: %v", err)
		}
		if _, err := p.FindByID(t.Context(), post.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("FindByID after delete error = %v, want ErrNotFound", err)
		}
		if err := p.DeleteOwned(t.Context(), post.ID, "alice"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("second DeleteOwned error = %v, want ErrNotFound", err)
		}
	})
}

func TestIndexesExistAfterFirstUse(t *testing.T) {
	p, dir := newPosts(t)
	if _, err := p.FindByID(t.Context(), oid(1)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FindByID on an empty store error = %v, want ErrNotFound", err)
	}

	specs, err := directCollection(t, dir).Indexes().ListSpecifications(t.Context())
	if err != nil {
		t.Fatalf("listing indexes: %v", err)
	}
	var got []string
	for _, s := range specs {
		got = append(got, keyPattern(t, s.KeysDocument))
	}
	for _, want := range []string{"{userId:1, createdAt:-1, _id:-1}", "{createdAt:-1, _id:-1}"} {
		t.Run("the index "+want+" exists", func(t *testing.T) {
			if !slices.Contains(got, want) {
				t.Errorf("indexes are %v, want one on %s", got, want)
			}
		})
	}
}

// directCollection connects a driver client of its own to the embedded server serving dir.
func directCollection(t *testing.T, dir string) *mongo.Collection {
	t.Helper()
	socket := filepath.Join(dir, "mongodb.sock")
	if len(socket) > 103 {
		t.Fatalf("the socket path %s is too long; the server listens elsewhere", socket)
	}
	mc, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + url.QueryEscape(socket)))
	if err != nil {
		t.Fatalf("connecting to %s: %v", socket, err)
	}
	t.Cleanup(func() {
		if err := mc.Disconnect(context.Background()); err != nil {
			t.Errorf("Disconnect: %v", err)
		}
	})
	return mc.Database(database).Collection(store.CollectionName)
}

// keyPattern renders an index's keys as {field:order, ...}.
func keyPattern(t *testing.T, keys bson.Raw) string {
	t.Helper()
	elems, err := keys.Elements()
	if err != nil {
		t.Fatalf("index keys %v: %v", keys, err)
	}
	parts := make([]string, len(elems))
	for i, e := range elems {
		order, ok := e.Value().AsInt64OK()
		if !ok {
			t.Fatalf("index key %s has the value %v, want a number", e.Key(), e.Value())
		}
		parts[i] = fmt.Sprintf("%s:%d", e.Key(), order)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func TestDataSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	post := newPost(1, "alice", base)
	post.Body = ptr("kept on disk")

	first := store.Embedded(dir, zap.NewNop())
	insertErr := store.NewPosts(first, database, timeout).Insert(t.Context(), post)
	closeErr := first.Close(t.Context())
	if insertErr != nil {
		t.Fatalf("Insert: %v", insertErr)
	}
	if closeErr != nil {
		t.Fatalf("Close: %v", closeErr)
	}

	second := store.NewPosts(openEmbedded(t, dir), database, timeout)
	if d := diffPost(find(t, second, post.ID), post); d != "" {
		t.Errorf("after the restart: %s", d)
	}
}

// A config reload builds a new Posts over the pooled client, so the indexes are ensured again
// on a server that already has them.
func TestANewPostsOnARunningClientFindsExistingPosts(t *testing.T) {
	client := openEmbedded(t, t.TempDir())
	post := newPost(1, "alice", base)
	insert(t, store.NewPosts(client, database, timeout), post)

	again := store.NewPosts(client, database, timeout)
	if d := diffPost(find(t, again, post.ID), post); d != "" {
		t.Errorf("through the new Posts: %s", d)
	}
}

func TestEmbeddedRefusesADataDirInUse(t *testing.T) {
	p, dir := newPosts(t)
	insert(t, p, newPost(1, "alice", base))

	other := store.NewPosts(openEmbedded(t, dir), database, timeout)
	if _, err := other.FindByID(t.Context(), oid(1)); err == nil {
		t.Error("a second server on a data directory in use started")
	}
	find(t, p, oid(1))
}

func TestUnavailable(t *testing.T) {
	unreachable, err := store.Connect("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=200")
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = unreachable.Close(context.Background()) })

	closed := store.Embedded(t.TempDir(), zap.NewNop())
	if err := closed.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}

	clients := []struct {
		name   string
		client *store.Client
	}{
		{"an unreachable server", unreachable},
		{"a closed client", closed},
	}
	ops := []struct {
		name string
		do   func(context.Context, *store.Posts) error
	}{
		{"FindByID", func(ctx context.Context, p *store.Posts) error {
			_, err := p.FindByID(ctx, oid(1))
			return err
		}},
		{"Insert", func(ctx context.Context, p *store.Posts) error {
			return p.Insert(ctx, newPost(1, "alice", base))
		}},
		{"List", func(ctx context.Context, p *store.Posts) error {
			_, err := p.List(ctx, store.Filter{Limit: 10})
			return err
		}},
		{"UpdateOwned", func(ctx context.Context, p *store.Posts) error {
			_, err := p.UpdateOwned(ctx, oid(1), "alice", store.Update{Title: ptr("t"), UpdatedAt: base})
			return err
		}},
		{"DeleteOwned", func(ctx context.Context, p *store.Posts) error {
			return p.DeleteOwned(ctx, oid(1), "alice")
		}},
	}
	for _, c := range clients {
		p := store.NewPosts(c.client, database, 300*time.Millisecond)
		for _, op := range ops {
			t.Run(op.name+" on "+c.name+" is unavailable", func(t *testing.T) {
				err := op.do(t.Context(), p)
				if !errors.Is(err, store.ErrUnavailable) {
					t.Errorf("%s error = %v, want ErrUnavailable", op.name, err)
				}
				if errors.Is(err, store.ErrNotFound) {
					t.Errorf("%s error = %v, also matches ErrNotFound", op.name, err)
				}
			})
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		name string
		uri  string
		want string
	}{
		{
			name: "a replica set URI keeps its hosts and loses credentials, database and options",
			uri:  "mongodb://app:s3cret@db1.example.net:27017,db2.example.net:27018,db3.example.net/posts?replicaSet=rs0&authSource=admin",
			want: "mongodb://db1.example.net:27017,db2.example.net:27018,db3.example.net",
		},
		{
			name: "an SRV URI keeps its host and loses credentials, database and options",
			uri:  "mongodb+srv://app:s3cret@cluster0.example.net/posts?retryWrites=true&w=majority",
			want: "mongodb+srv://cluster0.example.net",
		},
		{
			name: "several hosts without credentials lose only the options",
			uri:  "mongodb://db1:27017,db2:27017/?replicaSet=rs0",
			want: "mongodb://db1:27017,db2:27017",
		},
		{
			name: "a user without a password is removed",
			uri:  "mongodb://app@db1,db2/posts",
			want: "mongodb://db1,db2",
		},
		{
			name: "credentials with escaped special characters are removed whole",
			uri:  "mongodb://app%40corp:p%40ss%2Fw%3Ard@db1,db2/posts",
			want: "mongodb://db1,db2",
		},
		{
			name: "a password with an unescaped @ is removed whole",
			uri:  "mongodb://app:p@ss@db1,db2/posts",
			want: "mongodb://db1,db2",
		},
		{
			name: "a password with an unescaped ? is removed whole",
			uri:  "mongodb://user:pa?ss@h1/db",
			want: "mongodb://h1",
		},
		{
			name: "a password with an unescaped / is removed whole",
			uri:  "mongodb://user:pa/ss@h1,h2/db",
			want: "mongodb://h1,h2",
		},
		{
			name: "a secret in the options is removed",
			uri:  "mongodb://db1/?authMechanismProperties=AWS_SESSION_TOKEN:secret",
			want: "mongodb://db1",
		},
		{
			name: "a host list alone is kept",
			uri:  "mongodb://db1:27017,db2:27017",
			want: "mongodb://db1:27017,db2:27017",
		},
		{
			name: "a unix socket host is kept",
			uri:  "mongodb://%2Ftmp%2Fmongodb-27017.sock/posts",
			want: "mongodb://%2Ftmp%2Fmongodb-27017.sock",
		},
		{
			name: "a string without a scheme is not echoed",
			uri:  "app:s3cret@db1:27017",
			want: "(not a URI)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := store.Redact(tc.uri); got != tc.want {
				t.Errorf("Redact(%q) = %q, want %q", tc.uri, got, tc.want)
			}
		})
	}
}
