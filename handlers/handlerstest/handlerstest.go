// Package handlerstest serves the tests of handlers/ and of the packages under it: the posts
// service they serve, over a SQLite store of the test's own. It is imported by tests only.
package handlerstest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/live"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/posts/poststest"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// Subscriptions and Limits are the defaults of caddymodule/config.go's table, which fills every
// field before handlers.New and schema.New: the config of a site that sets none.
var (
	Subscriptions = live.Subscriptions{
		ReadLimit:             32 << 10,
		InitTimeout:           3 * time.Second,
		MaxSubscriptions:      100,
		MaxConnectionsPerUser: 100,
		MaxConnections:        10000,
		KeepAlive:             12 * time.Second,
	}
	Limits = schema.Limits{
		MaxQueryLength:       16 << 10,
		MaxDepth:             15,
		MaxCost:              2000,
		SearchCost:           500,
		MaxFeeds:             1000,
		MaxFeedsPerClient:    100,
		MaxAliases:           30,
		MaxRootFields:        10,
		MaxFields:            500,
		MaxResponseSize:      8 << 20,
		DocumentCacheEntries: 1000,
		DocumentCacheSize:    32 << 20,
	}
)

// Posts returns a posts.Service with the rules of rules over a new SQLite store, and the broker
// its writes are published to (poststest.Publishing, queues of 16); it sets rules's store,
// timeout (5 s), largest page (10), logger, events and follower. Both end with the test.
func Posts(t testing.TB, rules posts.Config) (*posts.Service, *events.Broker[*posts.Event]) {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	broker, follower := poststest.Publishing(t, st, 16)
	rules.Store, rules.Timeout, rules.MaxLimit, rules.Logger, rules.Events, rules.Follower = st, 5*time.Second, 10, zap.NewNop(), broker, follower
	return posts.NewService(rules), broker
}

// BodySeeds are request bodies for the fuzz targets of body decoding (request.Object, REST's posts and patches): valid posts and
// patches, and each kind of bad body the tests name.
var BodySeeds = []string{
	`{"title": "Hello", "body": "First post."}`,
	`{"title": "Hello again", "body": null}`,
	`{"body": null}`,
	`{}`,
	`{"title": {"$ne": null}}`,
	`{"title": "t", "title": "u"}`,
	`{"id": "x", "userId": "mallory", "createdAt": 1}`,
	`{"title": "\ud83d\ude00 \\ud800 \u0000 \u2028"}`,
	`{"title": "\ud800"}`,
	`{"title": "\udc00\ud800"}`,
	`{"\ud83d": 1}`,
	"{\"title\": \"\xff\"}",
	"{\"ti\xc3tle\": \"x\"}",
	"{\"title\": \"x\"}\xa0",
	"\xef\xbb\xbf{\"title\": \"with a BOM\"}",
	`{"title": "x"} {"title": "y"}`,
	`{"title": ` + strings.Repeat("[", 1000) + `}`,
	`{"title": 1e999999}`,
	`[]`, `null`, `"title"`, `{`, ``, `   `,
}

// CheckRefusal checks that err, written as the API writes it (answer.Failer.Fail), is a 4xx
// whose body is {"error": "..."}.
func CheckRefusal(t *testing.T, err error) {
	t.Helper()
	w := httptest.NewRecorder()
	(&answer.Failer{Logger: zap.NewNop()}).Fail(w, httptest.NewRequest(http.MethodPost, "/posts", nil), err)
	var body map[string]string
	if w.Code < 400 || w.Code > 499 || json.Unmarshal(w.Body.Bytes(), &body) != nil || len(body) != 1 || body["error"] == "" {
		t.Fatalf("refused with %d %s; want a 4xx and {\"error\": \"...\"} (%v)", w.Code, w.Body, err)
	}
}

// CheckText checks s, a string read from body: valid UTF-8, and U+FFFD only where body spells
// it.
func CheckText(t *testing.T, body []byte, what, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("%s %q is not valid UTF-8", what, s)
	}
	if strings.ContainsRune(s, utf8.RuneError) && !bytes.ContainsRune(body, utf8.RuneError) && !bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`)) {
		t.Fatalf("%s %q holds U+FFFD, which the body %q does not", what, s, body)
	}
}
