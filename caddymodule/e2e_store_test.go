// The store end to end: down or past its timeout, shared across reloads, bad configs.
package caddymodule

import (
	"bytes"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/postsedge/caddy-posts/store/sqlite"
)

// TestStorageUnavailable: a database that cannot be reached, or does not answer within timeout,
// gets 503 with Retry-After and a message without internals, and nothing is reported as done.
func TestStorageUnavailable(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	// The post is in the stalled site's store, so the PATCH and DELETE below would change it if
	// they reached the database.
	p := c.createOn(stalledSite, asAlice, "kept")
	requests := []struct{ method, path, body string }{
		{"GET", "/posts", ""},
		{"GET", "/posts/" + p.ID, ""},
		{"POST", "/posts", `{"title": "lost"}`},
		{"PATCH", "/posts/" + p.ID, `{"title": "lost"}`},
		{"DELETE", "/posts/" + p.ID, ""},
	}
	check := func(t *testing.T, res response) {
		t.Helper()
		res.wantError(t, http.StatusServiceUnavailable, "the database is unavailable")
		if res.header.Get("Retry-After") == "" {
			t.Error("no Retry-After")
		}
		if bytes.Contains(res.body, []byte("127.0.0.1")) || bytes.Contains(bytes.ToLower(res.body), []byte("mongo")) {
			t.Errorf("the error leaks internals: %s", res.body)
		}
	}
	t.Run("the proxied site works while the proxy passes traffic", func(t *testing.T) {
		res := c.do("GET", stalledSite+"/posts/"+p.ID, "")
		if res.status != 200 {
			t.Fatalf("status = %d, body %s", res.status, res.body)
		}
		// The checks below that nothing changed see the site's writes only if they read its store.
		if docs := strings.Join(storedDocuments(t), "\n"); !strings.Contains(docs, p.ID) {
			t.Errorf("the FerretDB holds no post %s; the site writes elsewhere", p.ID)
		}
	})

	// Each request waits out a timeout (the dead site's server selection, the stalled site's
	// storage timeout): they are made all at once, with the proxy stalled, and nothing stored
	// may have changed after any of them.
	before := stored(t)
	var all []request
	for _, site := range []string{deadSite, stalledSite} {
		for _, r := range requests {
			all = append(all, request{r.method, site + r.path, r.body, []string{asAlice, jsonBody}})
		}
	}
	proxy.stall(true)
	responses, err := c.atOnce(all)
	resume(t)
	if err != nil {
		t.Fatal(err)
	}
	dead, stalled := responses[:len(requests)], responses[len(requests):]
	for i, r := range requests {
		t.Run(r.method+" "+strings.Split(r.path, "/")[1]+" with no database listening gets 503", func(t *testing.T) {
			check(t, dead[i])
			unchanged(t, before)
		})
	}
	for i, r := range requests {
		t.Run(r.method+" "+strings.Split(r.path, "/")[1]+" past the timeout gets 503", func(t *testing.T) {
			check(t, stalled[i])
			unchanged(t, before)
		})
	}
}

// resume ends the proxy's stall and waits until the breaker of the stalled site's store, which
// the stall's timeouts may have opened, has closed again: the tests after it find the store
// answering at once.
func resume(t *testing.T) {
	t.Helper()
	proxy.stall(false)
	key := "mongodb mongodb://" + proxy.addr + "/?directConnection=true " + DefaultDatabase
	for deadline := time.Now().Add(5 * time.Second); poolValue[pooledStore](t, stores, key).breaker.Open(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stalled site's store breaker is still open 5s after the stall ended")
		}
	}
}

// TestTheStoreIsSharedAcrossReloads: a reload keeps the store (and the embedded store's open
// file) of the config before; the last config that used a store releases it, and with it the
// lock of the data_dir; the data outlives the store.
func TestTheStoreIsSharedAcrossReloads(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	p := c.create(asAlice, "outlives the store")
	embedded := "sqlite " + dataDir
	stalled := "mongodb mongodb://" + proxy.addr + "/?directConnection=true " + DefaultDatabase
	dead := "mongodb mongodb://127.0.0.1:1/?directConnection=true&serverSelectionTimeoutMS=300 " + DefaultDatabase
	before := pooled(t, embedded)

	t.Run("a reload that changes the handler keeps the store", func(t *testing.T) {
		tc := caddytest.NewTester(t)
		tc.InitServer(strings.Replace(config(), "max_limit 5", "max_limit 4", 1), "caddyfile")
		if after := pooled(t, embedded); after != before {
			t.Error("the reload made a new store")
		}
		if refs, _ := stores.References(embedded); refs != 2 {
			t.Errorf("%d references to the embedded store; want 2 (the two sites that use it)", refs)
		}
		c.do("GET", site+"/posts?limit=5", "").wantError(t, 400, "limit must be from 1 to 4")
	})

	t.Run("while a config uses the data_dir, no other store can open it", func(t *testing.T) {
		// What the next subtest sees free must be locked now, or it proves nothing.
		s, err := sqlite.Open(dataDir, sqlite.Options{})
		if err == nil {
			s.Close()
			t.Fatal("a second store opened the data_dir the running config holds")
		}
		if !strings.Contains(err.Error(), sqlite.LockFile+" is locked") {
			t.Errorf("error = %v; want one saying %s is locked", err, sqlite.LockFile)
		}
	})

	t.Run("the last config that uses a store releases it", func(t *testing.T) {
		tc := caddytest.NewTester(t)
		tc.InitServer(globalOptions()+"\n}\n"+site+" {\n\trespond \"no posts\"\n}\n", "caddyfile")
		for _, key := range []string{embedded, stalled, dead} {
			if _, ok := stores.References(key); ok {
				t.Errorf("%s is still pooled", key)
			}
		}
		// The lock on posts.lock is gone with the store: another store (of another process, or
		// of this one, as here) can open the data_dir.
		s, err := sqlite.Open(dataDir, sqlite.Options{})
		if err != nil {
			t.Fatalf("the data_dir is still held: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the posts are there after the store is opened again", func(t *testing.T) {
		c := startCaddy(t)
		var got postOut
		c.do("GET", site+"/posts/"+p.ID, "").decode(t, &got)
		if !reflect.DeepEqual(got, p) {
			t.Errorf("got %+v; want %+v", got, p)
		}
	})
}

// TestSynchronousFull: a config whose data_dir sites all set synchronous full loads onto the
// store that is open already, which goes on serving writes. (The next test's startCaddy sets
// it back to normal.)
func TestSynchronousFull(t *testing.T) {
	inProcess(t)
	c := startCaddy(t)
	embedded := "sqlite " + dataDir
	before := pooled(t, embedded)
	tc := caddytest.NewTester(t)
	tc.InitServer(strings.ReplaceAll(config(), "data_dir "+dataDir, "data_dir "+dataDir+"\n\t\tsynchronous full"), "caddyfile")
	if t.Failed() {
		t.FailNow()
	}

	t.Run("the reload keeps the open store", func(t *testing.T) {
		if after := pooled(t, embedded); after != before {
			t.Error("the reload made a new store")
		}
	})
	t.Run("a write is answered and stored", func(t *testing.T) {
		p := c.create(asAlice, "synced in full")
		if doc, ok := storedPost(t, p.ID); !ok || doc["title"] != "synced in full" {
			t.Errorf("stored %v", doc)
		}
	})
}

// TestBadConfigIsRefused: values only Provision or Validate can check fail the load, and the
// running config stays.
func TestBadConfigIsRefused(t *testing.T) {
	inProcess(t)
	startCaddy(t)
	global := globalOptions() + "\n}\n"
	// json is a config of one posts handler on site's port, with the fields given.
	json := func(fields string) string {
		return fmt.Sprintf(`{"admin": {"listen": "localhost:%d"}, "apps": {"http": {"servers": {"s": {"listen": [":%s"],
			"routes": [{"handle": [{"handler": "posts", %s, "data_dir": %q}]}]}}}}}`, caddytest.Default.AdminPort, sitePort(site), fields, dataDir)
	}
	t.Run("an API key from an unset environment variable", func(t *testing.T) {
		caddytest.AssertLoadError(t, global+site+" {\n\tposts {\n\t\tapi_key {env.POSTS_TEST_UNSET_KEY} alice\n\t}\n}\n",
			"caddyfile", "api_keys[0]: the key is empty (is its environment variable set?)")
	})
	t.Run("an API key whose user id holds a control character, in JSON", func(t *testing.T) {
		caddytest.AssertLoadError(t, json(`"api_keys": [{"key": "k", "user_id": "eve\u0001"}]`),
			"json", "api_keys[0]: the user id has a control character")
	})
	t.Run("a jwks_url that is not an http URL", func(t *testing.T) {
		caddytest.AssertLoadError(t, global+site+" {\n\tposts {\n\t\tjwks_url ftp://keys.example.com/jwks.json\n\t}\n}\n",
			"caddyfile", `jwks_urls[0]: \"ftp://keys.example.com/jwks.json\" is not an http or https URL`)
	})
	t.Run("an issuer without a jwks_url", func(t *testing.T) {
		caddytest.AssertLoadError(t, global+site+" {\n\tposts {\n\t\tissuer https://idp.example.com/\n\t}\n}\n",
			"caddyfile", "issuers and audiences apply to bearer tokens, which need jwks_urls")
	})
	t.Run("an HMAC algorithm in JSON", func(t *testing.T) {
		caddytest.AssertLoadError(t, json(`"jwks_urls": ["https://idp.example.com/jwks.json"], "algorithms": ["HS256"]`),
			"json", `algorithms: \"HS256\" is not an accepted signing algorithm`)
	})
	t.Run("a negative max_limit in JSON", func(t *testing.T) {
		caddytest.AssertLoadError(t, json(`"max_limit": -1`),
			"json", "max_limit must be at least 1")
	})
	t.Run("a mongodb_uri from an unset environment variable", func(t *testing.T) {
		caddytest.AssertLoadError(t, global+site+" {\n\tposts {\n\t\tmongodb_uri {env.POSTS_TEST_UNSET_URI}\n\t}\n}\n",
			"caddyfile", `mongodb_uri \"{env.POSTS_TEST_UNSET_URI}\" expands to nothing: is its environment variable set?`)
	})
	t.Run("synchronous with a mongodb_uri", func(t *testing.T) {
		caddytest.AssertLoadError(t, global+site+" {\n\tposts {\n\t\tmongodb_uri mongodb://127.0.0.1:1/\n\t\tsynchronous full\n\t}\n}\n",
			"caddyfile", "synchronous applies to the embedded store")
	})
	t.Run("post_cache_size with a mongodb_uri", func(t *testing.T) {
		caddytest.AssertLoadError(t, global+site+" {\n\tposts {\n\t\tmongodb_uri mongodb://127.0.0.1:1/\n\t\tpost_cache_size 1MiB\n\t}\n}\n",
			"caddyfile", "post_cache_size applies to the embedded store")
	})
	t.Run("two sites on one data_dir with different post_cache_size", func(t *testing.T) {
		sites := fmt.Sprintf("%s {\n\tposts {\n\t\tdata_dir %s\n\t\tpost_cache_size 1MiB\n\t}\n}\n"+
			"%s {\n\tposts {\n\t\tdata_dir %s\n\t}\n}\n", site, dataDir, basicSite, dataDir)
		caddytest.AssertLoadError(t, global+sites, "caddyfile", "data_dir "+dataDir+": the sites that use it set different post_cache_size values")
	})
	t.Run("a negative post_cache_size in JSON", func(t *testing.T) {
		caddytest.AssertLoadError(t, json(`"post_cache_size": -1`), "json", "post_cache_size must be from 1 byte to 64 GiB, not -1")
	})
	t.Run("two sites on one data_dir with different synchronous", func(t *testing.T) {
		// dataDir is the running config's: the refused config must leave its store as it is.
		sites := fmt.Sprintf("%s {\n\tposts {\n\t\tdata_dir %s\n\t\tsynchronous normal\n\t}\n}\n"+
			"%s {\n\tposts {\n\t\tdata_dir %s\n\t\tsynchronous full\n\t}\n}\n", site, dataDir, basicSite, dataDir)
		caddytest.AssertLoadError(t, global+sites, "caddyfile", "data_dir "+dataDir+": the sites that use it set different synchronous values")
	})
	t.Run("a synchronous that is neither normal nor full in JSON", func(t *testing.T) {
		caddytest.AssertLoadError(t, json(`"synchronous": "fast"`),
			"json", `synchronous must be normal or full, not \"fast\"`)
	})
	t.Run("the running config still serves", func(t *testing.T) {
		c := startCaddy(t)
		if res := c.do("GET", site+"/posts", ""); res.status != 200 {
			t.Errorf("status = %d", res.status)
		}
	})
}
