// The MongoDB store's search backfill end to end: a database of posts an earlier release wrote,
// without terms, served by the in-process Caddy while the backfill gives them theirs: a search
// answers 503 until it is done, lists are served meanwhile, and the search is complete after.
package caddymodule

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/postsedge/caddy-posts/internal/race"
	"github.com/postsedge/caddy-posts/openapi/openapitest"
	storemongo "github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// backfillWrites is a TCP proxy to the FerretDB's unix socket that can hold the writes of the
// MongoDB store's search backfill until the test lets them go: the update commands that set
// terms, which only search.go's indexBatch sends (a post's own writes are insert and
// findAndModify commands). The backfill is then certainly under way, and not done, for as long
// as the test needs, however fast or slow the machine.
type backfillWrites struct {
	addr string
	hold atomic.Pointer[chan struct{}] // while set, each such write waits until it is closed
	held atomic.Int64                  // how many such writes it has held
}

// backfillProxy is the process's one backfillWrites: mongotest.ServeTCP serves until it ends.
var backfillProxy = sync.OnceValue(func() *backfillWrites {
	p := &backfillWrites{}
	p.addr = mongotest.ServeTCP(ferret.Socket, p.pass)
	return p
})

// pass holds a write of the backfill while hold is set, and lets every message through.
func (p *backfillWrites) pass(_ net.Conn, msg []byte) bool {
	if mongotest.CommandName(msg) == "update" && bytes.Contains(msg, []byte("terms")) {
		if hold := p.hold.Load(); hold != nil {
			p.held.Add(1)
			<-*hold
		}
	}
	return true
}

// holdWrites holds the backfill's writes from now until the function it returns is called, or
// the test ends.
func (p *backfillWrites) holdWrites(t *testing.T) (release func()) {
	hold := make(chan struct{})
	p.held.Store(0)
	p.hold.Store(&hold)
	release = sync.OnceFunc(func() {
		p.hold.Store(nil)
		close(hold)
	})
	t.Cleanup(release)
	return release
}

// backfillDatabases numbers the databases of TestSearchDuringTheMongoDBBackfill's runs, one each.
var backfillDatabases atomic.Int64

// earlierReleasePosts is how many posts the earlier release left: more than FerretDB v1 takes in
// one update command (99: from 100, its pool of 100 SQLite connections deadlocks, as each
// update's read holds one until the command ends), and a search of them several pages. Not
// thousands: FerretDB v1 scans the posts for each of the backfill's updates (docs/scaling.md),
// so that its time grows with the square of the posts: on 2 loaded cores, 3,000 took 14
// minutes; 200 take 2 s, 20 s under -race.
const earlierReleasePosts = 200

// backfillBase is the time of the earlier release's first post; post i was created i seconds
// later.
var backfillBase = time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)

// earlierReleasePost is post i of the earlier release, as its documents were, and whether a
// search of "lighthouse" finds it. Decided by the rules of a search, not by package words: a
// whole word of the title or the body in any case, or, the one word being the last, the
// beginning of one ("lighthouses"); never two words ("light house").
func earlierReleasePost(i int) (doc bson.D, found bool) {
	title := fmt.Sprintf("Harbour log %d", i)
	if i%7 == 0 {
		title = fmt.Sprintf("Notes from the lighthouse, part %d", i)
	}
	var body string
	switch {
	case i%17 == 0: // no body at all
	case i%11 == 0:
		body = "We sailed past the LIGHTHOUSE at dusk."
	case i%13 == 0:
		body = "Two lighthouses guard the bay."
	case i%5 == 0:
		body = "A light house, not the word we look for."
	default:
		body = "Nothing to see here."
	}
	at := backfillBase.Add(time.Duration(i) * time.Second)
	user := "alice"
	if i%2 == 0 {
		user = "bob"
	}
	doc = bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "userId", Value: user}, {Key: "title", Value: title}}
	if body != "" {
		doc = append(doc, bson.E{Key: "body", Value: body})
	}
	doc = append(doc, bson.E{Key: "createdAt", Value: at}, bson.E{Key: "updatedAt", Value: at})
	if i%10 != 0 { // the first releases wrote no version
		doc = append(doc, bson.E{Key: "version", Value: int64(1)})
	}
	return doc, i%7 == 0 || i%17 != 0 && (i%11 == 0 || i%13 == 0)
}

// seedEarlierRelease writes the earlier release's posts straight into the posts collection of
// database, as that release did (no terms), and returns the ids of all of them and of those a
// search of "lighthouse" finds, each newest first.
func seedEarlierRelease(t *testing.T, database string) (all, found []string) {
	t.Helper()
	docs := make([]any, earlierReleasePosts)
	for i := range earlierReleasePosts {
		doc, match := earlierReleasePost(i + 1)
		docs[i] = doc
		id := doc[0].Value.(bson.ObjectID).Hex()
		all = append(all, id)
		if match {
			found = append(found, id)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := ferretDB.Database(database).Collection(storemongo.PostsCollection).InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	slices.Reverse(all)
	slices.Reverse(found)
	return all, found
}

// A store of an earlier release's posts, first used by this one through the site: its first
// request, a search, is a 503 with Retry-After (GraphQL: SEARCH_INDEX_BUILDING), never a partial
// list, while lists without a search are served and posts are written; once the backfill is done
// the search finds every post it should, the one written meanwhile too.
func TestSearchDuringTheMongoDBBackfill(t *testing.T) {
	inProcess(t)
	database := fmt.Sprintf("backfill_%d", backfillDatabases.Add(1))
	start := time.Now()
	all, found := seedEarlierRelease(t, database)
	t.Logf("seeded %d posts of an earlier release, %d of them with lighthouse, in %s", len(all), len(found), time.Since(start).Round(time.Millisecond))

	proxy := backfillProxy()
	release := proxy.holdWrites(t)
	backfillSite := extraSite
	tc := caddytest.NewTester(t)
	tc.InitServer(config()+fmt.Sprintf(`
%s {
	posts {
		mongodb_uri mongodb://%s/?directConnection=true
		database %s
		api_key %s alice
		timeout 30s
	}
}
`, backfillSite, proxy.addr, database, aliceKey), "caddyfile")
	if t.Failed() {
		t.FailNow()
	}
	tc.Client.Transport = openapitest.Checked{Base: tc.Client.Transport, Report: t.Errorf}
	tc.Client.Timeout = time.Minute // the first use prepares the collection, on a FerretDB under load
	c := &client{t: t, http: tc.Client}
	search := backfillSite + "/posts?q=lighthouse&limit=20"

	t.Run("the first request, a search, is a 503 with Retry-After that says the index is being built", func(t *testing.T) {
		searchIsBuilding(t, c.do("GET", search, ""))
	})

	t.Run("the GraphQL search is SEARCH_INDEX_BUILDING, with no list", func(t *testing.T) {
		check(t, c.graphql(backfillSite, `{ posts(search: "lighthouse", limit: 100) { id } }`, nil),
			fieldError(`null`, "SEARCH_INDEX_BUILDING", "search index is being built", "", `["posts"]`))
		check(t, c.graphql(backfillSite, `{ postsConnection(search: "lighthouse") { edges { node { id } } } }`, nil),
			fieldError(`null`, "SEARCH_INDEX_BUILDING", "search index is being built", "", `["postsConnection"]`))
	})

	t.Run("a list without a search is served meanwhile, the newest posts first", func(t *testing.T) {
		res := c.do("GET", backfillSite+"/posts?limit=100", "")
		if res.status != http.StatusOK {
			t.Fatalf("status = %d; want 200 (body %s)", res.status, res.body)
		}
		var page []postOut
		res.decode(t, &page)
		if got := idsOf(page); !slices.Equal(got, all[:100]) {
			t.Errorf("ids = %v\nwant the 100 newest posts %v", got, all[:100])
		}
		if nextLink(t, res.header.Get("Link")) == "" {
			t.Error("no Link to the next page")
		}
		res = c.do("GET", backfillSite+"/posts?userId=bob&limit=1", "")
		if res.status != http.StatusOK {
			t.Fatalf("userId=bob: status = %d; want 200 (body %s)", res.status, res.body)
		}
	})

	var created postOut
	t.Run("a post is written meanwhile, and the search still answers 503", func(t *testing.T) {
		res := c.do("POST", backfillSite+"/posts", `{"title": "A new lighthouse", "body": "written while the index was being built"}`, asAlice, jsonBody)
		if res.status != http.StatusCreated {
			t.Fatalf("status = %d; want 201 (body %s)", res.status, res.body)
		}
		res.decode(t, &created)
		// The backfill has read its first batch and is held writing it: it is under way, not done.
		for deadline := time.Now().Add(2 * time.Minute); proxy.held.Load() == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the backfill wrote no batch within 2 minutes")
			}
		}
		searchIsBuilding(t, c.do("GET", search, ""))
	})
	if t.Failed() {
		t.FailNow()
	}

	release()
	start = time.Now()
	first := searchOnceIndexed(t, c, search, backfillSite+"/posts?limit=20", database)
	t.Logf("the backfill ended %s after its writes were let go", time.Since(start).Round(time.Millisecond))

	t.Run("once the backfill is done, the search finds every post it should, in order, across its pages", func(t *testing.T) {
		want := append([]string{created.ID}, found...)
		var got []string
		res := first
		for pages := 1; ; pages++ {
			if res.status != http.StatusOK {
				t.Fatalf("page %d: status = %d; want 200 (body %s)", pages, res.status, res.body)
			}
			var page []postOut
			res.decode(t, &page)
			got = append(got, idsOf(page)...)
			next := nextLink(t, res.header.Get("Link"))
			if next == "" {
				break
			}
			if pages > len(want)/20+1 {
				t.Fatalf("still a Link after %d pages of 20: %s", pages, next)
			}
			res = c.do("GET", backfillSite+next, "")
		}
		if !slices.Equal(got, want) {
			t.Errorf("found %d posts; want %d, the one written meanwhile then the earlier release's, newest first\n got %v\nwant %v",
				len(got), len(want), got, want)
		}
	})

	t.Run("the GraphQL search answers the same first page", func(t *testing.T) {
		want := append([]string{created.ID}, found[:19]...)
		check(t, c.graphql(backfillSite, `{ posts(search: "lighthouse", limit: 20) { id } }`, nil),
			dataOnly(`{"posts": %s}`, idObjects(want...)))
	})

	t.Run("every post has its terms", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		n, err := ferretDB.Database(database).Collection(storemongo.PostsCollection).
			CountDocuments(ctx, bson.D{{Key: "terms", Value: bson.D{{Key: "$exists", Value: false}}}})
		if err != nil || n != 0 {
			t.Errorf("%d posts without terms, %v; want none", n, err)
		}
	})
}

// searchOnceIndexed polls the search, each answer until the last a 503 of searchIsBuilding, and
// returns the first answer that is not; every 5 s, the list must be served meanwhile. It waits
// for as long as the backfill gives the posts of database their terms, however slowly (FerretDB
// under load), and fails once none has had them for stall: a backfill that makes no progress.
func searchOnceIndexed(t *testing.T, c *client, search, list, database string) response {
	t.Helper()
	stall := 2 * time.Minute
	if race.Enabled {
		stall *= 3
	}
	left, progress, checked := int64(-1), time.Now(), time.Time{} // checked zero: at once
	for ; ; time.Sleep(250 * time.Millisecond) {
		res := c.do("GET", search, "")
		if res.status != http.StatusServiceUnavailable {
			return res
		}
		searchIsBuilding(t, res)
		if time.Since(checked) < 5*time.Second {
			continue
		}
		checked = time.Now()
		if res := c.do("GET", list, ""); res.status != http.StatusOK {
			t.Fatalf("a list without a search answered %d while the backfill wrote (body %s)", res.status, res.body)
		}
		// The count scans the posts, and waits behind FerretDB while it is wedged: bounded.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n, err := ferretDB.Database(database).Collection(storemongo.PostsCollection).
			CountDocuments(ctx, bson.D{{Key: "terms", Value: bson.D{{Key: "$exists", Value: false}}}})
		cancel()
		if err == nil && (left < 0 || n < left) {
			left, progress = n, time.Now()
		}
		if time.Since(progress) > stall {
			counted := "no count of them answered"
			if left >= 0 {
				counted = fmt.Sprintf("%d posts without them", left)
			}
			t.Fatalf("the search still answers 503: no post has had its terms for %s (%s; the last count: %v)", stall, counted, err)
		}
	}
}

// searchIsBuilding fails t unless res is a search's answer while the index is being built: 503,
// a Retry-After of some seconds, and {"error": ...} that says why.
func searchIsBuilding(t *testing.T, res response) {
	t.Helper()
	res.wantError(t, http.StatusServiceUnavailable, "the search index is being built")
	if s, err := strconv.Atoi(res.header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After = %q; want a number of seconds", res.header.Get("Retry-After"))
	}
}
