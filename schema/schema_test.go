// The fixtures of the tests outside the package (callers, schemas over a fresh embedded store, a
// log of the store's calls), and the tests of the schema as a whole.

package schema_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

var (
	alice = posts.Caller{UserID: "alice", Method: auth.MethodJWT, Name: "Alice", Email: "alice@example.com"}
	bob   = posts.Caller{UserID: "bob", Method: auth.MethodAPIKey}
)

func newSchema(t *testing.T, calls ...*callLog) *schema.Schema {
	return newSchemaWith(t, 5, schema.DefaultLimits, calls...)
}

// limitsWith is a copy of schema.DefaultLimits that change alters: the limits of a site that sets
// only those.
func limitsWith(change func(l *schema.Limits)) schema.Limits {
	l := schema.DefaultLimits
	change(&l)
	return l
}

// newStore is a fresh embedded store, closed when the test ends.
func newStore(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newSchemaWith is a schema over a fresh embedded store, with the given max_limit and limits;
// the store's calls go to calls, when given.
func newSchemaWith(t testing.TB, maxLimit int, limits schema.Limits, calls ...*callLog) *schema.Schema {
	t.Helper()
	st := newStore(t)
	if len(calls) > 0 {
		st = counted{st, calls[0]}
	}
	return newSchemaOver(t, st, maxLimit, limits)
}

// newSchemaOver is a schema over st, with the given max_limit and limits.
func newSchemaOver(t testing.TB, st store.Store, maxLimit int, limits schema.Limits) *schema.Schema {
	t.Helper()
	svc := posts.NewService(posts.Config{Store: st, Timeout: 5 * time.Second, MaxLimit: maxLimit, Logger: zap.NewNop()})
	s, err := schema.New(svc, zap.NewNop(), limits)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// insert writes n posts by userID straight into st, as rows from before validation could be,
// the newest last; it returns their ids.
func insert(t testing.TB, st store.Store, n int, userID string, body *string) []string {
	t.Helper()
	ids := make([]string, n)
	at := time.Now().UTC().Truncate(time.Millisecond)
	for i := range ids {
		created := at.Add(time.Duration(i) * time.Millisecond)
		p := store.Post{ID: store.NewID(created), UserID: userID, Title: "t" + strconv.Itoa(i), Body: body, CreatedAt: created, UpdatedAt: created}
		if _, err := st.InsertPost(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		ids[i] = p.ID
	}
	return ids
}

// exec runs an operation as caller and returns its data as JSON and the codes of its errors.
func exec(t testing.TB, s *schema.Schema, caller posts.Caller, query string, vars map[string]any) (data string, codes []string) {
	t.Helper()
	res := s.Do(auth.NewContext(t.Context(), caller), schema.Request{Query: query, Variables: vars})
	for _, e := range res.Errors {
		code, _ := e.Extensions["code"].(string)
		codes = append(codes, code)
		if code == "" {
			t.Errorf("error without a code: %v", e)
		}
	}
	return string(res.Data), codes
}

func create(t testing.TB, s *schema.Schema, caller posts.Caller, title string) string {
	t.Helper()
	data, codes := exec(t, s, caller, `mutation($t: String!) { createPost(input: {title: $t, body: "b"}) { id } }`, map[string]any{"t": title})
	if codes != nil {
		t.Fatalf("createPost: %v", codes)
	}
	var out struct{ CreatePost struct{ ID string } }
	json.Unmarshal([]byte(data), &out)
	return out.CreatePost.ID
}

// aliases selects field n times under different aliases.
func aliases(field string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "a%d: %s ", i, field)
	}
	return b.String()
}

// allocated is the bytes that f allocates, as runtime.MemStats.TotalAlloc counts them.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// callLog records the store calls that read or write data: each is one database round trip.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(call string) { l.mu.Lock(); l.calls = append(l.calls, call); l.mu.Unlock() }

func (l *callLog) reset() { l.mu.Lock(); l.calls = nil; l.mu.Unlock() }

func (l *callLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// counted is a store that logs its calls.
type counted struct {
	store.Store
	log *callLog
}

// Unwrap is the store it counts the calls of.
func (c counted) Unwrap() store.Store { return c.Store }

func (c counted) GetPost(ctx context.Context, id string) (store.Post, error) {
	c.log.add("GetPost")
	return c.Store.GetPost(ctx, id)
}

func (c counted) ListPosts(ctx context.Context, f store.Filter) ([]store.Post, error) {
	c.log.add("ListPosts")
	return c.Store.ListPosts(ctx, f)
}

func (c counted) InsertPost(ctx context.Context, p store.Post) (store.Event, error) {
	c.log.add("InsertPost")
	return c.Store.InsertPost(ctx, p)
}

func (c counted) UpdatePost(ctx context.Context, id, owner string, version int64, u store.Update) (store.Event, error) {
	c.log.add("UpdatePost")
	return c.Store.UpdatePost(ctx, id, owner, version, u)
}

func (c counted) DeletePost(ctx context.Context, id, owner string, version int64) (store.Event, error) {
	c.log.add("DeletePost")
	return c.Store.DeletePost(ctx, id, owner, version)
}

func (c counted) SaveUser(ctx context.Context, u store.User) error {
	c.log.add("SaveUser")
	return c.Store.SaveUser(ctx, u)
}

func (c counted) GetUser(ctx context.Context, id string) (store.User, error) {
	c.log.add("GetUser")
	return c.Store.GetUser(ctx, id)
}

func (c counted) GetUsers(ctx context.Context, ids []string) ([]store.User, error) {
	c.log.add("GetUsers")
	return c.Store.GetUsers(ctx, ids)
}

func TestEveryTypeFieldAndArgumentIsDescribed(t *testing.T) {
	s := newSchema(t)
	data, _ := exec(t, s, posts.Caller{}, `{ __schema { types { name description fields { name description args { name description } } inputFields { name description } } } }`, nil)
	type described struct{ Name, Description string }
	var out struct {
		Schema struct {
			Types []struct {
				Name, Description string
				Fields            []struct {
					Name, Description string
					Args              []described
				}
				InputFields []described
			}
		} `json:"__schema"`
	}
	if err := json.Unmarshal([]byte(data), &out); err != nil {
		t.Fatal(err)
	}
	for _, typ := range out.Schema.Types {
		if strings.HasPrefix(typ.Name, "__") || map[string]bool{"String": true, "Int": true, "Float": true, "Boolean": true, "ID": true}[typ.Name] {
			continue
		}
		if typ.Description == "" {
			t.Errorf("type %s has no description", typ.Name)
		}
		for _, f := range typ.Fields {
			if f.Description == "" {
				t.Errorf("%s.%s has no description", typ.Name, f.Name)
			}
			for _, arg := range f.Args {
				if arg.Description == "" {
					t.Errorf("the argument %s of %s.%s has no description", arg.Name, typ.Name, f.Name)
				}
			}
		}
		for _, f := range typ.InputFields {
			if f.Description == "" {
				t.Errorf("%s.%s has no description", typ.Name, f.Name)
			}
		}
	}
}

// nest is a query whose fields nest depth deep: user, then posts and author in turn, then id.
func nest(depth int) string {
	var open, close strings.Builder
	open.WriteString(`{ user(id: "alice") { `)
	for i := 2; i < depth; i++ {
		if i%2 == 0 {
			open.WriteString("posts(limit: 1) { ")
		} else {
			open.WriteString("author { ")
		}
		close.WriteString("} ")
	}
	return open.String() + "id " + close.String() + "} }"
}

// TestNewTakesItsLimitsAsGiven builds schemas with limits no config passes Validate with: New
// fills and checks nothing (caddymodule does), and nothing fails or panics, before or when an
// operation comes.
func TestNewTakesItsLimitsAsGiven(t *testing.T) {
	for _, tt := range []struct {
		name   string
		limits schema.Limits
	}{
		{"zero limits", schema.Limits{}},
		{"negative limits", schema.Limits{MaxQueryLength: -1, MaxDepth: -1, MaxCost: -1, MaxFeeds: -1,
			MaxFeedsPerClient: -1, MaxAliases: -1, MaxRootFields: -1, MaxFields: -1, MaxResponseSize: -1}},
	} {
		t.Run(tt.name+" build a schema that refuses an operation without panicking", func(t *testing.T) {
			s := newSchemaWith(t, 5, tt.limits)
			res := s.Do(t.Context(), schema.Request{Query: `{ posts { id } }`})
			if len(res.Errors) == 0 {
				t.Errorf("got %s; want a refusal", res.Data)
			}
		})
	}
}

// TestMaxDepth sends fields nested past max_depth, which graphql-go's validation checks (New
// sets it): refused before anything runs, and a query at the limit runs.
func TestMaxDepth(t *testing.T) {
	commands := &callLog{}
	defaults := newSchemaWith(t, 100, schema.DefaultLimits, commands)
	create(t, defaults, alice, "one")
	strict := newSchemaWith(t, 100, strictLimits)
	checkLimits(t, commands, []limitCase{
		{"a depth of 15 runs", defaults, nest(15), nil, "", ""},
		{"a depth of 16 is refused", defaults, nest(16), nil, "exceeds max depth 15", ""},
		{"the strict site refuses a depth of 4", strict, nest(4), nil, "exceeds max depth 3", ""},
	})
}
