package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
	"github.com/postsedge/caddy-posts/store/words"
)

// searchPosts are the posts the search tests find: n is the post's number (its id, and its
// second from searchBase), by alice for an even n and by bob for an odd one.
var searchPosts = []struct {
	n           int
	title, body string
}{
	{1, "Caddy at the edge", "Serving posts from the edge."},
	{2, "Édgar's café", "Ünïcödé words: CAFÉ, naïve."},
	{3, "Edges and corners", ""},
	{4, "Nothing here", "a b c"},
	{5, "caddy-posts", "https://caddyserver.com/docs"},
	{6, "東京の天気", "晴れ"},
	{7, "Edge", "edge edge edge"},
	{8, "", ""},
}

var searchBase = time.Date(2026, 2, 3, 4, 5, 0, 0, time.UTC)

func searchID(n int) string { return fmt.Sprintf("67d44600%016x", n) }

// insertSearchPosts stores searchPosts in s; post 8 has no body, and every other one has one.
func insertSearchPosts(t *testing.T, s store.Store) {
	t.Helper()
	for _, p := range searchPosts {
		post := store.Post{ID: searchID(p.n), UserID: []string{"alice", "bob"}[p.n%2], Title: p.title,
			CreatedAt: searchBase.Add(time.Duration(p.n) * time.Second), UpdatedAt: searchBase}
		if p.n != 8 {
			post.Body = &p.body
		}
		if _, err := s.InsertPost(t.Context(), post); err != nil {
			t.Fatal(err)
		}
	}
}

// found is the numbers of posts, in their order.
func found(posts []store.Post) []int {
	var ns []int
	for _, p := range posts {
		var n int
		fmt.Sscanf(p.ID[8:], "%x", &n)
		ns = append(ns, n)
	}
	return ns
}

// searchStore is a store on a database of its own of a FerretDB of the test's own.
func searchStore(t *testing.T, opts ...*options.ClientOptions) (*mongo.Store, string, string) {
	t.Helper()
	uri := mongotest.FerretDB(t).URI
	name := fmt.Sprintf("search_%d_%d", time.Now().UnixNano()%1e9, databases.Add(1))
	s, err := mongo.Open(uri, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, uri, name
}

func TestASearchFindsThePostsOfItsWords(t *testing.T) {
	t.Parallel() // on a server of its own, and sets none of the package's waits
	s, _, _ := searchStore(t)
	insertSearchPosts(t, s)
	at := func(n int) time.Time { return searchBase.Add(time.Duration(n) * time.Second) }
	after := func(n int) *store.Key { return &store.Key{CreatedAt: at(n), ID: searchID(n)} }
	for _, tc := range []struct {
		name   string
		filter store.Filter
		want   []int
	}{
		{"a word and a prefix find the posts that hold both", store.Filter{Search: words.Parse("edge caddy")}, []int{1}},
		{"the last word is a prefix", store.Filter{Search: words.Parse("edg")}, []int{7, 3, 2, 1}},
		{"a whole word is not a prefix", store.Filter{Search: words.Parse("edg the")}, nil},
		{"the words come in any order", store.Filter{Search: words.Parse("the edg")}, []int{1}},
		{"case and diacritics are folded", store.Filter{Search: words.Parse("CAFE unicode")}, []int{2}},
		{"a hyphen and a URL's punctuation separate words", store.Filter{Search: words.Parse("posts caddyserver docs")}, []int{5}},
		{"each Han and Hiragana character is a word", store.Filter{Search: words.Parse("天気 晴")}, []int{6}},
		{"a word in no post finds nothing", store.Filter{Search: words.Parse("nowhere")}, nil},
		{"every word must be held", store.Filter{Search: words.Parse("caddy corners")}, nil},
		{"one user's posts", store.Filter{UserID: "bob", Search: words.Parse("edge")}, []int{7, 3, 1}},
		{"oldest first", store.Filter{Search: words.Parse("edg"), Oldest: true}, []int{1, 2, 3, 7}},
		{"since is inclusive, until exclusive", store.Filter{Search: words.Parse("e"), Since: at(2), Until: at(7)}, []int{3, 2}},
		{"a bound below the millisecond is rounded up", store.Filter{Since: at(2).Add(time.Microsecond), Until: at(3).Add(time.Microsecond)}, []int{3}},
		{"after a key, newest first", store.Filter{Search: words.Parse("edg"), After: after(3)}, []int{2, 1}},
		{"after a key, oldest first", store.Filter{Search: words.Parse("edg"), After: after(2), Oldest: true}, []int{3, 7}},
		{"every filter at once", store.Filter{UserID: "bob", Search: words.Parse("edge"), Since: at(1), Until: at(8), After: after(1), Oldest: true}, []int{3, 7}},
		{"the limit cuts a search", store.Filter{Search: words.Parse("e"), Limit: 2}, []int{7, 3}},
		{"oldest first without a search", store.Filter{Oldest: true, Limit: 3}, []int{1, 2, 3}},
		{"after a key, oldest first, without a search", store.Filter{Oldest: true, After: after(6)}, []int{7, 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.filter.Limit == 0 {
				tc.filter.Limit = 20
			}
			got, err := s.ListPosts(t.Context(), tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(found(got), tc.want) {
				t.Errorf("found %v; want %v", found(got), tc.want)
			}
		})
	}
}

// A prefix is matched as text: what a regular expression would read as syntax is quoted. The
// tokenizer keeps no such character in a word; these queries are made by hand to check the
// quoting itself.
func TestAPrefixIsText(t *testing.T) {
	t.Parallel() // on a server of its own, and sets none of the package's waits
	s, _, _ := searchStore(t)
	insertSearchPosts(t, s)
	for _, prefix := range []string{".", "e.g", ".*", "ed?", "[a-z]", `\w`, "(edge)", "edge|caddy", "^edge", "edge$", "e{1}"} {
		t.Run(fmt.Sprintf("the prefix %q finds nothing", prefix), func(t *testing.T) {
			got, err := s.ListPosts(t.Context(), store.Filter{Search: words.Query{Words: []string{prefix}}, Limit: 20})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 0 {
				t.Errorf("found %v; want none", found(got))
			}
		})
	}
}

// An update of the title alone, or of the body alone, gives the post the words of the other as
// stored too; an update of both, those of both.
func TestAnUpdateGivesThePostTheWordsOfItsNewText(t *testing.T) {
	t.Parallel() // on a server of its own, and sets none of the package's waits
	s, _, _ := searchStore(t)
	insertSearchPosts(t, s)
	search := func(t *testing.T, q string) []int {
		t.Helper()
		got, err := s.ListPosts(t.Context(), store.Filter{Search: words.Parse(q), Limit: 20})
		if err != nil {
			t.Fatal(err)
		}
		return found(got)
	}
	at := searchBase.Add(time.Hour)
	steps := []struct {
		name    string
		version int64
		update  store.Update
		finds   map[string][]int
	}{
		{"the title alone", store.AnyVersion, store.Update{Title: new("Corners of the web"), UpdatedAt: at},
			map[string][]int{"web": {3}, "edges": nil, "corners": {3}}},
		{"the body alone, at its version", 2, store.Update{Body: new("Webs and wires"), UpdatedAt: at},
			map[string][]int{"web": {3}, "wires": {3}, "corners": {3}}},
		{"the body unset", 3, store.Update{UnsetBody: true, UpdatedAt: at},
			map[string][]int{"wires": nil, "corners": {3}}},
		{"both", store.AnyVersion, store.Update{Title: new("Quiet"), Body: new("sea"), UpdatedAt: at},
			map[string][]int{"quiet sea": {3}, "corners": nil}},
		{"neither: the time alone", store.AnyVersion, store.Update{UpdatedAt: at.Add(time.Second)},
			map[string][]int{"quiet sea": {3}}},
	}
	for _, step := range steps {
		t.Run("an update of "+step.name, func(t *testing.T) {
			if _, err := s.UpdatePost(t.Context(), searchID(3), "bob", step.version, step.update); err != nil {
				t.Fatal(err)
			}
			for q, want := range step.finds {
				if got := search(t, q); !slices.Equal(got, want) {
					t.Errorf("%q finds %v; want %v", q, got, want)
				}
			}
		})
	}
	t.Run("an update at a version the post is not at is not found, and changes nothing", func(t *testing.T) {
		if _, err := s.UpdatePost(t.Context(), searchID(3), "bob", 2, store.Update{Title: new("stale"), UpdatedAt: at}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("UpdatePost: %v; want ErrNotFound", err)
		}
		if got := search(t, "stale"); got != nil {
			t.Errorf("stale finds %v; want nothing", got)
		}
	})
	t.Run("an update by another user is not found", func(t *testing.T) {
		if _, err := s.UpdatePost(t.Context(), searchID(3), "alice", store.AnyVersion, store.Update{Body: new("mine"), UpdatedAt: at}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("UpdatePost: %v; want ErrNotFound", err)
		}
	})
}

// Concurrent updates of the title alone and of the body alone, each reading the other's field,
// leave the terms of the post as it ends: none writes terms of a text it did not change from.
func TestConcurrentUpdatesOfTitleAndBodyLeaveTheTermsOfTheLastText(t *testing.T) {
	t.Parallel() // on a server of its own, and sets none of the package's waits
	s, _, _ := searchStore(t)
	insertSearchPosts(t, s)
	const rounds = 5
	var wg sync.WaitGroup
	for _, field := range []string{"title", "body"} {
		wg.Go(func() {
			for i := range rounds {
				text := fmt.Sprintf("%s%d", field, i)
				u := store.Update{Title: &text, UpdatedAt: searchBase}
				if field == "body" {
					u = store.Update{Body: &text, UpdatedAt: searchBase}
				}
				if _, err := s.UpdatePost(t.Context(), searchID(4), "alice", store.AnyVersion, u); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	last := fmt.Sprintf("title%d body%d", rounds-1, rounds-1)
	got, err := s.ListPosts(t.Context(), store.Filter{Search: words.Parse(last), Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(found(got), []int{4}) {
		t.Errorf("%q finds %v; want [4]", last, found(got))
	}
	for i := range rounds - 1 {
		for _, q := range []string{fmt.Sprintf("title%d", i), fmt.Sprintf("body%d", i)} {
			if got, err := s.ListPosts(t.Context(), store.Filter{Search: words.Parse(q), Limit: 20}); err != nil || len(got) != 0 {
				t.Errorf("%q finds %v, %v; want nothing: an earlier text's terms are left", q, found(got), err)
			}
		}
	}
}

// A search is read through the index on terms: MongoDB bounds a scan of termsIndex by a whole
// word's equality, or by the prefix of an anchored regular expression, and reads it in the order
// of the list, forwards or backwards. FerretDB v1 scans instead, so what this checks is the
// shape of each query, as the driver sends it, and that the index it needs exists.
func TestASearchIsReadThroughItsIndex(t *testing.T) {
	t.Parallel() // on a server of its own, and sets none of the package's waits
	var (
		mu   sync.Mutex
		sent []bson.Raw // the finds on posts
	)
	monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if coll, _ := e.Command.Lookup("find").StringValueOK(); coll == mongo.PostsCollection {
			mu.Lock()
			sent = append(sent, slices.Clone(e.Command))
			mu.Unlock()
		}
	}}
	s, uri, name := searchStore(t, options.Client().SetMonitor(monitor))
	insertSearchPosts(t, s)
	since, until := searchBase.Add(time.Second), searchBase.Add(8*time.Second)
	key := store.Key{CreatedAt: searchBase.Add(time.Second), ID: searchID(1)}
	ms := func(t time.Time) string { return fmt.Sprintf(`{"$date":{"$numberLong":"%d"}}`, t.UnixMilli()) }
	for _, tc := range []struct {
		name        string
		filter      store.Filter
		want        []int
		query, sort string
	}{
		{"a word and a prefix, newest first", store.Filter{Search: words.Parse("the edg"), Limit: 5}, []int{1},
			`{"gone": {"$exists": false}, "terms": {"$all": ["the"], "$regex": {"$regularExpression":{"pattern":"^edg","options":""}}}}`,
			`{"createdAt": {"$numberInt":"-1"}, "_id": {"$numberInt":"-1"}}`},
		{"a prefix alone", store.Filter{Search: words.Parse("edg"), Limit: 5}, []int{7, 3, 2, 1},
			`{"gone": {"$exists": false}, "terms": {"$regex": {"$regularExpression":{"pattern":"^edg","options":""}}}}`,
			`{"createdAt": {"$numberInt":"-1"}, "_id": {"$numberInt":"-1"}}`},
		{"every filter, oldest first", store.Filter{UserID: "bob", Search: words.Parse("edge e"), Since: since, Until: until, After: &key, Oldest: true, Limit: 5}, []int{7},
			`{"gone": {"$exists": false}, "userId": "bob", "terms": {"$all": ["edge"], "$regex": {"$regularExpression":{"pattern":"^e","options":""}}}, ` +
				`"createdAt": {"$gte": ` + ms(since) + `, "$lt": ` + ms(until) + `}, ` +
				`"$or": [{"createdAt": {"$gt": ` + ms(key.CreatedAt) + `}}, {"createdAt": ` + ms(key.CreatedAt) + `, "_id": {"$gt": {"$oid":"` + searchID(1) + `"}}}]}`,
			`{"createdAt": {"$numberInt":"1"}, "_id": {"$numberInt":"1"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			sent = nil
			mu.Unlock()
			got, err := s.ListPosts(t.Context(), tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(found(got), tc.want) {
				t.Errorf("found %v; want %v", found(got), tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(sent) != 1 {
				t.Fatalf("%d finds on posts; want 1", len(sent))
			}
			for field, want := range map[string]string{"filter": tc.query, "sort": tc.sort, "projection": `{"terms": {"$numberInt":"0"}}`} {
				if got := sent[0].Lookup(field).String(); compact(got) != compact(want) {
					t.Errorf("the find's %s is\n%s; want\n%s", field, got, want)
				}
			}
		})
	}
	client, err := mongo.Connect(uri)
	if err != nil {
		t.Fatal(err)
	}
	defer mongo.Disconnect(client)
	specs, err := client.Database(name).Collection(mongo.PostsCollection).Indexes().ListSpecifications(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, spec := range specs {
		got = append(got, compact(strings.NewReplacer(`{"$numberInt":"1"}`, "1", `{"$numberInt":"-1"}`, "-1").Replace(spec.KeysDocument.String())))
	}
	if want := `{"terms":1,"createdAt":-1,"_id":-1}`; !slices.Contains(got, want) {
		t.Errorf("the indexes of posts are %v; want %s", got, want)
	}
}

// compact is extended JSON without its spaces, which the driver puts after some commas only.
func compact(json string) string { return strings.Join(strings.Fields(json), "") }

// earlierRelease inserts n posts into the database name as a release before the search wrote
// them: without terms, the first few without a version either. Post i, from 1, is alice's,
// created i seconds after searchBase, titled "old post i" and with the body "word{i%3}".
func earlierRelease(t *testing.T, uri, name string, n int) {
	t.Helper()
	client, err := mongo.Connect(uri)
	if err != nil {
		t.Fatal(err)
	}
	defer mongo.Disconnect(client)
	docs := make([]bson.D, n)
	for i := range n {
		oid, err := bson.ObjectIDFromHex(searchID(i + 1))
		if err != nil {
			t.Fatal(err)
		}
		at := searchBase.Add(time.Duration(i+1) * time.Second)
		docs[i] = bson.D{{Key: "_id", Value: oid}, {Key: "userId", Value: "alice"}, {Key: "title", Value: fmt.Sprintf("old post %d", i+1)},
			{Key: "body", Value: fmt.Sprintf("word%d", (i+1)%3)}, {Key: "createdAt", Value: at}, {Key: "updatedAt", Value: at}}
		if i >= 3 {
			docs[i] = append(docs[i], bson.E{Key: "version", Value: int64(1)})
		}
	}
	if _, err := client.Database(name).Collection(mongo.PostsCollection).InsertMany(t.Context(), docs); err != nil {
		t.Fatal(err)
	}
}

// Posts of an earlier release have no terms: a store's first use starts the backfill, and until
// it is done a search answers store.ErrIndexing, while a list without one is served. A write
// of a post the backfill has read and not yet written keeps its own terms. Two stores backfill
// the same database at once; a store opened afterwards searches at once.
func TestTheBackfillIndexesThePostsOfAnEarlierRelease(t *testing.T) {
	mongo.SetBackfill(t, 7, 10*time.Millisecond) // sets package variables: not parallel
	server := mongotest.FerretDB(t)
	name := fmt.Sprintf("backfill_%d", databases.Add(1))
	const n = 30
	earlierRelease(t, server.URI, name, n)
	open := func() *mongo.Store {
		s, err := mongo.Open(server.URI, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s, other := open(), open()
	core, logs := observer.New(zap.InfoLevel)
	s.SetLogger(zap.New(core))
	other.SetLogger(zap.New(core))
	held := make(chan []string)    // the ids of each batch s read, once it is held
	release := make(chan struct{}) // lets s write the batch it holds
	s.OnBackfillRead(func(ctx context.Context, ids []string) {
		select {
		case held <- ids:
		case <-ctx.Done():
			return
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
	})
	search := func(t *testing.T, s store.Store, q string) ([]int, error) {
		t.Helper()
		got, err := s.ListPosts(t.Context(), store.Filter{Search: words.Parse(q), Limit: 100})
		return found(got), err
	}
	if _, err := s.ListPosts(t.Context(), store.Filter{Limit: 1}); err != nil { // the first use
		t.Fatal(err)
	}
	first := <-held
	t.Run("a search answers ErrIndexing while the backfill runs", func(t *testing.T) {
		if got, err := search(t, s, "old"); !errors.Is(err, store.ErrIndexing) {
			t.Errorf("search: %v, %v; want ErrIndexing", got, err)
		}
	})
	t.Run("a list without a search is served meanwhile", func(t *testing.T) {
		got, err := s.ListPosts(t.Context(), store.Filter{Limit: 100})
		if err != nil || len(got) != n {
			t.Errorf("ListPosts: %d posts, %v; want %d", len(got), err, n)
		}
	})
	// A post of the batch held, read without terms, is written meanwhile: the title alone, so
	// that its terms are those of the new title and of its body as stored.
	moved := first[0]
	if _, err := s.UpdatePost(t.Context(), moved, "alice", store.AnyVersion, store.Update{Title: new("renamed"), UpdatedAt: searchBase}); err != nil {
		t.Fatal(err)
	}
	// The other store's first use: it backfills too, at once, while s holds its batch.
	if _, err := other.ListPosts(t.Context(), store.Filter{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	close(release)
	go func() { // the batches after the first: let through
		for range held {
		}
	}()
	for _, st := range []*mongo.Store{s, other} {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := search(t, st, "old"); !errors.Is(err, store.ErrIndexing) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the backfill did not end within 20 s")
			}
		}
	}
	var movedN int
	fmt.Sscanf(moved[8:], "%x", &movedN)
	var all, word0 []int
	for i := n; i >= 1; i-- {
		if i != movedN {
			all = append(all, i)
		}
		if i%3 == 0 {
			word0 = append(word0, i)
		}
	}
	later := open()
	for _, st := range []struct {
		name  string
		store *mongo.Store
	}{{"the first store", s}, {"the second store", other}, {"a store opened afterwards", later}} {
		for _, c := range []struct {
			q, what string
			want    []int
		}{
			{"old post", "every post but the one renamed", all},
			{"word0", "the posts of that body", word0},
			{"renamed", "the one renamed", []int{movedN}},
			{fmt.Sprintf("renamed word%d", movedN%3), "the one renamed, by the body it kept", []int{movedN}},
		} {
			t.Run(fmt.Sprintf("then on %s %q finds %s", st.name, c.q, c.what), func(t *testing.T) {
				want := c.want
				if got, err := search(t, st.store, c.q); err != nil || !slices.Equal(got, want) {
					t.Errorf("search: %v, %v; want %v", got, err, want)
				}
			})
		}
	}
	t.Run("the two stores logged that they indexed every post but the one renamed, once", func(t *testing.T) {
		done := logs.FilterMessage("indexed the posts of an earlier release for search").All()
		if len(done) != 2 {
			t.Fatalf("%d stores logged that they were done; want 2", len(done))
		}
		if got := done[0].ContextMap()["posts"].(int64) + done[1].ContextMap()["posts"].(int64); got != n-1 {
			t.Errorf("the stores indexed %d posts between them; want %d", got, n-1)
		}
	})
	t.Run("every post holds the terms of its text", func(t *testing.T) {
		client, err := mongo.Connect(server.URI)
		if err != nil {
			t.Fatal(err)
		}
		defer mongo.Disconnect(client)
		cur, err := client.Database(name).Collection(mongo.PostsCollection).Find(t.Context(), bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var docs []struct {
			ID    bson.ObjectID `bson:"_id"`
			Title string        `bson:"title"`
			Body  string        `bson:"body"`
			Terms []string      `bson:"terms"`
		}
		if err := cur.All(t.Context(), &docs); err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if want := words.Of(d.Title, d.Body); !slices.Equal(d.Terms, want) {
				t.Errorf("post %s has the terms %q; want %q", d.ID.Hex(), d.Terms, want)
			}
		}
	})
}

// Close stops the backfill, and returns once it has.
func TestClosingAStoreStopsItsBackfill(t *testing.T) {
	mongo.SetBackfill(t, 5, 10*time.Millisecond) // sets package variables: not parallel
	server := mongotest.FerretDB(t)
	name := fmt.Sprintf("backfill_close_%d", databases.Add(1))
	earlierRelease(t, server.URI, name, 20)
	s, err := mongo.Open(server.URI, name)
	if err != nil {
		t.Fatal(err)
	}
	entered, stopped := make(chan struct{}), make(chan error, 1)
	s.OnBackfillRead(func(ctx context.Context, _ []string) {
		close(entered)
		<-ctx.Done()
		stopped <- ctx.Err()
	})
	if _, err := s.ListPosts(t.Context(), store.Filter{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	<-entered // the backfill holds its first batch
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10 s of a backfill it holds")
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the backfill's batch ended with %v; want its cancel", err)
		}
	default:
		t.Error("Close returned before the backfill's batch ended")
	}
	if _, err := s.ListPosts(t.Context(), store.Filter{Search: words.Parse("old"), Limit: 1}); err == nil {
		t.Error("a search of the closed store succeeded")
	}
}
