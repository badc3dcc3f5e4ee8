//go:build !race

package caddymodule

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
)

// The tests of this file replay the attacks of issue 14 against a `caddy run` with the default
// limits, and measure the process from outside: the time to the refusal, the size of the answer
// and the growth of its resident memory. The race detector multiplies both time and memory, so
// they build without it; `make test` runs them on their own.

// hostile is a process under attack, with a client that keeps using it normally meanwhile.
type hostile struct {
	*caddyProcess
	normal normalClient
}

// startHostile runs caddy with the default limits on a fresh data_dir; X-Forwarded-For from
// loopback names the client, so that the tests can be many clients.
func startHostile(t *testing.T) *hostile { return startHostileWith(t, idp.URL+"/jwks.json") }

func startHostileWith(t *testing.T, jwksURL string) *hostile {
	port := freePort(t)
	caddyfile := fmt.Sprintf(`{
	admin off
	persist_config off
	servers {
		trusted_proxies static 127.0.0.1/32
	}
}
http://:%d {
	posts {
		data_dir %s
		jwks_url %s
		api_key process-key alice
	}
}
`, port, t.TempDir(), jwksURL)
	return &hostile{caddyProcess: startProcess(t, caddyfile, port)}
}

// rss reads a field of the process's /proc status (VmRSS, VmHWM) in bytes.
func (h *hostile) rss(field string) int64 {
	h.t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.cmd.Process.Pid))
	if err != nil {
		h.t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				h.t.Fatal(err)
			}
			return kb << 10
		}
	}
	h.t.Fatalf("no %s in /proc status", field)
	return 0
}

// peakGrowth runs attack and returns how far the process's resident memory rose above what it
// held before, at its peak (the kernel's high-water mark, reset first).
func (h *hostile) peakGrowth(attack func()) int64 {
	h.t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", h.cmd.Process.Pid), []byte("5"), 0); err != nil {
		h.t.Fatalf("resetting the peak: %v", err)
	}
	before := h.rss("VmRSS")
	attack()
	return h.rss("VmHWM") - before
}

// answer is one HTTP answer and how long it took.
type answer struct {
	status int
	header http.Header
	body   []byte
	took   time.Duration
}

// graphql POSTs a query as client (its X-Forwarded-For), with the given extra headers.
func (h *hostile) graphql(client, query string, header ...string) answer {
	h.t.Helper()
	body, _ := json.Marshal(map[string]string{"query": query})
	return h.send("POST", "/graphql", client, body, append([]string{"Content-Type", "application/json", "Accept", "application/graphql-response+json"}, header...)...)
}

func (h *hostile) send(method, path, client string, body []byte, header ...string) answer {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-For", client)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return answer{res.StatusCode, res.Header, data, time.Since(start)}
}

// fastest sends the same request three times and keeps the quickest answer: these machines are
// noisy, and a bound on the best of three is a bound on the work.
func fastest(send func() answer) answer {
	best := send()
	for range 2 {
		if a := send(); a.took < best.took {
			best = a
		}
	}
	return best
}

// refusedWith checks that a is a GraphQL request error: 400, one error, with code.
func refusedWith(t *testing.T, a answer, code string) {
	t.Helper()
	var res struct {
		Data   json.RawMessage
		Errors []struct {
			Message    string
			Extensions struct{ Code string }
		}
	}
	if err := json.Unmarshal(a.body, &res); err != nil {
		t.Fatalf("status %d, %d bytes that are not JSON: %.200s", a.status, len(a.body), a.body)
	}
	if a.status != http.StatusBadRequest || len(res.Errors) != 1 || res.Errors[0].Extensions.Code != code || (len(res.Data) > 0 && string(res.Data) != "null") {
		t.Fatalf("got %d %.500s; want 400 with one error %s and no data", a.status, a.body, code)
	}
}

// normalClient is a client that reads and writes as usual while the attacks run; every one of
// its requests must succeed.
type normalClient struct {
	stop     chan struct{}
	done     sync.WaitGroup
	requests atomic.Int64
	mu       sync.Mutex
	failures []string
}

func (h *hostile) startNormalClient() {
	n := &h.normal
	n.stop = make(chan struct{})
	n.done.Go(func() {
		client := &http.Client{Timeout: 10 * time.Second}
		for i := 0; ; i++ {
			select {
			case <-n.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var req *http.Request
			switch i % 3 {
			case 0:
				req, _ = http.NewRequest("GET", h.url+"/posts?limit=2", nil)
			case 1:
				req, _ = http.NewRequest("POST", h.url+"/graphql", strings.NewReader(`{"query":"{posts(limit:2){id title}}"}`))
				req.Header.Set("Content-Type", "application/json")
			case 2:
				req, _ = http.NewRequest("POST", h.url+"/posts", strings.NewReader(`{"title":"a normal post"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "ApiKey process-key")
			}
			req.Header.Set("X-Forwarded-For", "192.0.2.200")
			res, err := client.Do(req)
			n.requests.Add(1)
			if err != nil {
				n.fail(fmt.Sprintf("%s %s: %v", req.Method, req.URL.Path, err))
				continue
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusCreated || bytes.Contains(body, []byte(`"errors"`)) {
				n.fail(fmt.Sprintf("%s %s: %d %.200s", req.Method, req.URL.Path, res.StatusCode, body))
			}
		}
	})
}

func (n *normalClient) fail(s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failures = append(n.failures, s)
}

// checkNormalClient stops the normal client and checks that all of its requests succeeded.
func (h *hostile) checkNormalClient() {
	h.t.Helper()
	// The attacks may end before the client has done much: let it finish a few rounds.
	for deadline := time.Now().Add(5 * time.Second); h.normal.requests.Load() < 10 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	close(h.normal.stop)
	h.normal.done.Wait()
	if len(h.normal.failures) > 0 {
		h.t.Errorf("%d of the normal client's %d requests failed during the attacks; first: %s", len(h.normal.failures), h.normal.requests.Load(), h.normal.failures[0])
	}
	if h.normal.requests.Load() < 10 {
		h.t.Errorf("the normal client sent only %d requests", h.normal.requests.Load())
	}
}

// TestHostileGraphQLDocumentsAreRefusedSmallAndFast replays the documents of issue 14 that made
// the server work, allocate and answer without bound: each is refused before it runs, in less
// than 50 ms and 16 MB, with one error that names the limit, while a normal client is served.
func TestHostileGraphQLDocumentsAreRefusedSmallAndFast(t *testing.T) {
	h := startHostile(t)
	h.startNormalClient()
	defer h.checkNormalClient()

	// Fills 16 KiB (max_query_length) with repetitions of item(i).
	filled := func(prefix string, item func(i int) string, suffix string) string {
		var b strings.Builder
		b.WriteString(prefix)
		for i := 0; ; i++ {
			next := item(i)
			if b.Len()+len(next)+len(suffix) > 16<<10 {
				break
			}
			b.WriteString(next)
		}
		return b.String() + suffix
	}
	attacks := []struct {
		name, query, code string
	}{
		{"conflicting aliases of post fill the document", filled("{", func(i int) string { return fmt.Sprintf("a%d:post(id:\"%d\"){id} ", i%950, i) }, "}"), "MAX_ALIASES_LIMIT"},
		{"a list root field aliased 300 times", "{" + aliased("posts(limit:100){id}", 300) + "}", "MAX_ALIASES_LIMIT"},
		{"the user root field aliased 300 times", "{" + aliased(`user(id:"alice"){id}`, 300) + "}", "MAX_ALIASES_LIMIT"},
		{"one field repeated 1,998 times", "{posts{" + strings.Repeat("id ", 1998) + "}}", "MAX_FIELDS_LIMIT"},
		{"eleven root fields", "{" + strings.Repeat("posts(limit:1){id} ", 11) + "}", "MAX_ROOT_FIELDS_LIMIT"},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			if len(a.query) > 16<<10 {
				t.Fatalf("the attack is %d bytes, over max_query_length", len(a.query))
			}
			var best answer
			growth := h.peakGrowth(func() { best = fastest(func() answer { return h.graphql("198.51.100.1", a.query) }) })
			refusedWith(t, best, a.code)
			t.Logf("%d-byte document: refused in %v with %d bytes; resident memory grew %d KiB at its peak", len(a.query), best.took, len(best.body), growth>>10)
			if best.took > 50*time.Millisecond {
				t.Errorf("the refusal took %v at best of three; want under 50ms", best.took)
			}
			if growth > 16<<20 {
				t.Errorf("resident memory grew %d MiB; want under 16 MiB", growth>>20)
			}
			if len(best.body) > 4<<10 {
				t.Errorf("the refusal is %d bytes; want a small one", len(best.body))
			}
		})
	}

	t.Run("a token whose subject holds a control character is refused", func(t *testing.T) {
		a := h.send("POST", "/posts", "198.51.100.1", []byte(`{"title":"from eve"}`), "Content-Type", "application/json",
			"Authorization", "Bearer "+idp.token(claims("eve\u0001"), "RS256"))
		if a.status != http.StatusUnauthorized || !strings.Contains(a.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("got %d %q %s; want 401 invalid_token", a.status, a.header.Get("WWW-Authenticate"), a.body)
		}
	})

	t.Run("430 createPost aliases in one mutation write nothing", func(t *testing.T) {
		before := h.send("GET", "/posts?userId=alice&limit=100", "198.51.100.1", nil)
		flood := "mutation($i:PostInput!){" + aliased(`createPost(input:$i){id}`, 430) + "}"
		if len(flood) > 16<<10 {
			t.Fatalf("the mutation is %d bytes", len(flood))
		}
		a := h.graphql("198.51.100.1", flood, "X-API-Key", "process-key")
		refusedWith(t, a, "MAX_ALIASES_LIMIT")
		a = h.graphql("198.51.100.1", "mutation{"+strings.Repeat(`createPost(input:{title:"f"}){id} `, 11)+"}", "X-API-Key", "process-key")
		refusedWith(t, a, "MAX_ROOT_FIELDS_LIMIT")
		if after := h.send("GET", "/posts?userId=alice&limit=100", "198.51.100.1", nil); bytes.Count(after.body, []byte(`"title":"f"`)) != bytes.Count(before.body, []byte(`"title":"f"`)) {
			t.Errorf("a refused mutation wrote posts: %.300s", after.body)
		}
	})
}

// aliased is n copies of field, each under its own alias.
func aliased(field string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "a%d:%s ", i, field)
	}
	return b.String()
}

// TestAResponseThatWouldBeHugeStops selects body under 19 aliases in a page of 100 posts whose
// bodies are 50,000 characters that JSON escapes: the cost is exactly max_cost, so it runs, and
// its answer would be 570 MB. It stops at max_response_size instead, and the process grows by
// less than 64 MB. A page of such posts over REST is cut at the same size, its Link resuming.
func TestAResponseThatWouldBeHugeStops(t *testing.T) {
	h := startHostile(t)
	body, _ := json.Marshal(map[string]string{"title": "escaped", "body": strings.Repeat("<", 50_000)})
	for range 100 {
		if a := h.send("POST", "/posts", "198.51.100.2", body, "Content-Type", "application/json", "X-API-Key", "process-key"); a.status != http.StatusCreated {
			t.Fatalf("seeding: %d %.200s", a.status, a.body)
		}
	}
	h.startNormalClient()
	defer h.checkNormalClient()

	// A server in service has read its posts before: the store's page cache holds them.
	if a := h.graphql("198.51.100.3", "{posts(limit:100){id title}}"); a.status != http.StatusOK {
		t.Fatalf("reading the posts: %d %.200s", a.status, a.body)
	}
	// A list whose posts cannot fit is stopped before any of it is encoded: the attack of the
	// issue and its variants cost a few MiB. A document that makes graphql-go encode nearly
	// max_response_size before the budget runs out (the last case: another list of posts that
	// selects no body hides how many bodies the second writes) costs what any answer of 8 MiB
	// costs in graphql-go, which copies it up through a buffer per field, object and list:
	// 40 to 64 MiB measured, so its bound is wider.
	for _, tt := range []struct {
		name, query string
		bound       int64
	}{
		{"body under 19 aliases in a page of 100", "{posts(limit:100){" + aliased("body", 19) + "}}", 64 << 20},
		// 27 bodies fit in 8 MiB once, not 19 times over.
		{"body under 19 aliases in a page of 27", "{posts(limit:27){" + aliased("body", 19) + "}}", 64 << 20},
		{"the aliases in a fragment", "{posts(limit:27){...F}} fragment F on Post{" + aliased("body", 19) + "}", 64 << 20},
		{"the aliases in a connection", "{postsConnection(first:27){edges{node{" + aliased("body", 19) + "}}}}", 64 << 20},
		{"a few aliases in pages of two lists", "{a:posts(limit:27){" + aliased("body", 9) + "} b:posts(limit:27){" + aliased("body", 9) + "}}", 64 << 20},
		{"the aliases in a user's posts", "{posts(limit:1){author{posts(limit:27){" + aliased("body", 19) + "}}}}", 128 << 20},
	} {
		t.Run("GraphQL answers RESPONSE_TOO_LARGE to "+tt.name, func(t *testing.T) {
			var a answer
			growth := h.peakGrowth(func() { a = h.graphql("198.51.100.3", tt.query) })
			t.Logf("answered %d with %d bytes in %v; resident memory grew %d MiB at its peak", a.status, len(a.body), a.took, growth>>20)
			var res struct {
				Data   json.RawMessage
				Errors []struct{ Extensions struct{ Code string } }
			}
			if err := json.Unmarshal(a.body, &res); err != nil || len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "RESPONSE_TOO_LARGE" || (len(res.Data) > 0 && string(res.Data) != "null") {
				t.Fatalf("got %d %.300s; want one error RESPONSE_TOO_LARGE and no data", a.status, a.body)
			}
			if growth > tt.bound {
				t.Errorf("resident memory grew %d MiB; want under %d MiB", growth>>20, tt.bound>>20)
			}
			if a.took > 5*time.Second {
				t.Errorf("the answer took %v", a.took)
			}
		})
	}

	t.Run("a REST page ends at max_response_size and its Link resumes", func(t *testing.T) {
		// Four bytes a character: a page of 100 such posts would be 20 MB.
		wide, _ := json.Marshal(map[string]string{"title": "wide", "body": strings.Repeat("😀", 50_000)})
		for range 60 {
			if a := h.send("POST", "/posts", "198.51.100.2", wide, "Content-Type", "application/json", "X-API-Key", "process-key"); a.status != http.StatusCreated {
				t.Fatalf("seeding: %d %.200s", a.status, a.body)
			}
		}
		var a answer
		growth := h.peakGrowth(func() { a = h.send("GET", "/posts?limit=100", "198.51.100.3", nil) })
		var page []struct{ ID string }
		if err := json.Unmarshal(a.body, &page); err != nil || a.status != http.StatusOK {
			t.Fatalf("got %d, %d bytes: %v", a.status, len(a.body), err)
		}
		t.Logf("a page of %d posts, %d bytes; resident memory grew %d MiB at its peak", len(page), len(a.body), growth>>20)
		if len(a.body) > 8<<20 || len(page) >= 100 || len(page) == 0 {
			t.Errorf("the page has %d posts in %d bytes; want fewer than 100 in at most 8 MiB", len(page), len(a.body))
		}
		if !strings.Contains(a.header.Get("Link"), `rel="next"`) {
			t.Errorf("the cut page has no Link to the rest: %q", a.header.Get("Link"))
		}
	})
}

// TestOneClientCannotTakeEveryoneElsesShare holds a client's share of WebSocket connections and
// of distinct subscription executions, and checks that the next one is refused with the limit
// named while another client is still served.
func TestOneClientCannotTakeEveryoneElsesShare(t *testing.T) {
	h := startHostile(t)
	dial := func(client string) (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		c, res, err := websocket.Dial(ctx, strings.Replace(h.url, "http", "ws", 1)+"/graphql", &websocket.DialOptions{
			Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: http.Header{"X-Forwarded-For": {client}},
		})
		if c != nil {
			t.Cleanup(func() { _ = c.CloseNow() })
		}
		return c, res, err
	}
	exchange := func(c *websocket.Conn, send string) map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := c.Write(ctx, websocket.MessageText, []byte(send)); err != nil {
			t.Fatal(err)
		}
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}

	t.Run("connections", func(t *testing.T) {
		for i := range 100 {
			if _, res, err := dial("203.0.113.1"); err != nil {
				t.Fatalf("connection %d of the share was refused: %v (%v)", i+1, err, res)
			}
		}
		_, res, err := dial("203.0.113.1")
		if err == nil || res == nil || res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("the 101st connection of one client: %v, %v; want 429", err, res)
		}
		body, _ := io.ReadAll(res.Body)
		if !strings.Contains(string(body), "max_connections_per_user") {
			t.Errorf("the refusal does not name the limit: %s", body)
		}
		if _, res, err := dial("203.0.113.2"); err != nil {
			t.Fatalf("another client was refused while the first held its share: %v (%v)", err, res)
		}
	})

	t.Run("distinct subscription executions", func(t *testing.T) {
		// Two connections: one may run only max_subscriptions (100) operations.
		var conns [2]*websocket.Conn
		for i := range conns {
			c, _, err := dial("203.0.113.3")
			if err != nil {
				t.Fatal(err)
			}
			if m := exchange(c, `{"type":"connection_init"}`); m["type"] != "connection_ack" {
				t.Fatalf("init: %v", m)
			}
			conns[i] = c
		}
		subscribe := func(c *websocket.Conn, id string, n int) {
			msg := fmt.Sprintf(`{"type":"subscribe","id":%q,"payload":{"query":"subscription{postUpdated(id:\"%024x\"){id}}"}}`, id, n)
			if err := c.Write(t.Context(), websocket.MessageText, []byte(msg)); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 100 {
			subscribe(conns[i%2], strconv.Itoa(i), i)
		}
		// A connection reads its messages in order: its pong says its subscribes are counted.
		for _, c := range conns {
			if m := exchange(c, `{"type":"ping"}`); m["type"] != "pong" {
				t.Fatalf("a subscribe of the share was answered with %v", m)
			}
		}
		// The 101st distinct operation is refused with an error for its id; the connection stays.
		if m := exchange(conns[0], fmt.Sprintf(`{"type":"subscribe","id":"over","payload":{"query":"subscription{postUpdated(id:\"%024x\"){id}}"}}`, 100)); m["type"] != "error" || m["id"] != "over" {
			t.Fatalf("the 101st distinct execution of one client: %v; want an error for it", m)
		} else if !strings.Contains(fmt.Sprint(m["payload"]), "TOO_MANY") {
			t.Errorf("the error does not name the limit: %v", m["payload"])
		}
		other, _, err := dial("203.0.113.4")
		if err != nil {
			t.Fatal(err)
		}
		if m := exchange(other, `{"type":"connection_init"}`); m["type"] != "connection_ack" {
			t.Fatalf("init: %v", m)
		}
		subscribe(other, "mine", 5000)
		if m := exchange(other, `{"type":"ping"}`); m["type"] != "pong" {
			t.Fatalf("another client's subscribe was answered with %v", m)
		}
	})
}

// TestStrictCredentialsAndInput replays the smaller attacks of issue 14: credentials that bend
// the JOSE rules or the Authorization syntax, and input that is not what its place takes.
func TestStrictCredentialsAndInput(t *testing.T) {
	// A key set of three RSA keys: one for signing, one marked for encryption only, one that
	// says it signs RS384 only.
	var keys [3]*rsa.PrivateKey
	var marshalled []jwkset.JWKMarshal
	for i, meta := range []jwkset.JWKMetadataOptions{
		{KID: "sig-1", USE: jwkset.UseSig},
		{KID: "enc-1", USE: jwkset.UseEnc},
		{ALG: jwkset.AlgRS384},
	} {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = key
		jwk, err := jwkset.NewJWKFromKey(&key.PublicKey, jwkset.JWKOptions{Metadata: meta})
		if err != nil {
			t.Fatal(err)
		}
		marshalled = append(marshalled, jwk.Marshal())
	}
	set, _ := json.Marshal(jwkset.JWKSMarshal{Keys: marshalled})
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(set)
	}))
	defer jwks.Close()
	h := startHostileWith(t, jwks.URL)
	sign := func(key *rsa.PrivateKey, method jwt.SigningMethod, header map[string]any, sub string) string {
		tok := jwt.NewWithClaims(method, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()})
		maps.Copy(tok.Header, header)
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	post := func(header ...string) answer {
		return h.send("POST", "/posts", "198.51.100.9", []byte(`{"title":"strict"}`), append([]string{"Content-Type", "application/json"}, header...)...)
	}
	if a := post("Authorization", "Bearer "+sign(keys[0], jwt.SigningMethodRS256, map[string]any{"kid": "sig-1"}, "erin")); a.status != http.StatusCreated {
		t.Fatalf("a good token: %d %s", a.status, a.body)
	}

	for _, tt := range []struct {
		name          string
		authorization string
		status        int
		code          string
	}{
		{"a token whose crit names an extension", "Bearer " + sign(keys[0], jwt.SigningMethodRS256, map[string]any{"kid": "sig-1", "crit": []string{"exp"}}, "erin"), 401, "invalid_token"},
		{"a token signed by a key for encryption", "Bearer " + sign(keys[1], jwt.SigningMethodRS256, map[string]any{"kid": "enc-1"}, "erin"), 401, "invalid_token"},
		{"a token without kid whose key says another alg", "Bearer " + sign(keys[2], jwt.SigningMethodRS256, nil, "erin"), 401, "invalid_token"},
		{"a token whose subject holds a control character", "Bearer " + sign(keys[0], jwt.SigningMethodRS256, map[string]any{"kid": "sig-1"}, "eve\u0001"), 401, "invalid_token"},
		{"Bearer and a TAB", "Bearer\tabc.def.ghi", 400, "invalid_request"},
		{"Bearer and two spaces", "Bearer  abc.def.ghi", 400, "invalid_request"},
		{"Bearer alone", "Bearer", 400, "invalid_request"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := post("Authorization", tt.authorization)
			if a.status != tt.status || !strings.Contains(a.header.Get("WWW-Authenticate"), `error="`+tt.code+`"`) {
				t.Errorf("got %d %q %s; want %d %s", a.status, a.header.Get("WWW-Authenticate"), a.body, tt.status, tt.code)
			}
		})
	}

	t.Run("an API key in Authorization is accepted", func(t *testing.T) {
		if a := post("Authorization", "ApiKey process-key"); a.status != http.StatusCreated || !bytes.Contains(a.body, []byte(`"userId":"alice"`)) {
			t.Errorf("got %d %s; want 201 as alice", a.status, a.body)
		}
	})

	before := h.send("GET", "/posts?limit=100", "198.51.100.9", nil).body
	for _, tt := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"invalid UTF-8 in a JSON body", "{\"title\":\"a\xff\"}", 400, "UTF-8"},
		{"a control character in a title", `{"title":"a\u0007b"}`, 422, "title"},
		{"a control character in a body", `{"title":"fine","body":"a\u001bb"}`, 422, "body"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := h.send("POST", "/posts", "198.51.100.9", []byte(tt.body), "Content-Type", "application/json", "X-API-Key", "process-key")
			if a.status != tt.status || !bytes.Contains(a.body, []byte(`"error"`)) || !bytes.Contains(a.body, []byte(tt.want)) {
				t.Errorf("got %d %s; want %d naming %s", a.status, a.body, tt.status, tt.want)
			}
		})
	}
	if after := h.send("GET", "/posts?limit=100", "198.51.100.9", nil).body; !bytes.Equal(before, after) {
		t.Errorf("refused bodies changed the posts")
	}

	for _, path := range []string{"/posts/0123456789abcdef01234567/", "/posts/a/b", "/posts/"} {
		t.Run("GET "+path, func(t *testing.T) {
			if a := h.send("GET", path, "198.51.100.9", nil); a.status != http.StatusNotFound || !bytes.Contains(a.body, []byte(`"error"`)) {
				t.Errorf("got %d %s; want 404 with an error", a.status, a.body)
			}
		})
	}

	for _, tt := range []struct{ name, query string }{
		{"an object literal for an ID", `{post(id:{a:1}){id}}`},
		{"an object literal for a String", `{posts(after:{a:1}){id}}`},
		{"an out-of-range Int in a list literal", `{posts(limit:[99999999999]){id}}`},
		{"an out-of-range Int", `{posts(limit:99999999999){id}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := h.graphql("198.51.100.9", tt.query)
			refusedWith(t, a, "GRAPHQL_VALIDATION_FAILED")
			if bytes.Contains(a.body, []byte("map[")) || bytes.Contains(a.body, []byte("float64")) || bytes.Contains(a.body, []byte("int32")) {
				t.Errorf("the message speaks Go: %s", a.body)
			}
		})
	}

	wsClose := func(t *testing.T, frames ...[]byte) websocket.StatusCode {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, strings.Replace(h.url, "http", "ws", 1)+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		for _, f := range frames {
			if err := c.Write(ctx, websocket.MessageText, f); err != nil {
				t.Fatal(err)
			}
		}
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return websocket.CloseStatus(err)
			}
		}
	}
	t.Run("a connection_init that names Authorization twice closes with 4403", func(t *testing.T) {
		if code := wsClose(t, []byte(`{"type":"connection_init","payload":{"authorization":"ApiKey process-key","Authorization":"ApiKey other"}}`)); code != 4403 {
			t.Errorf("closed with %d", code)
		}
	})
	t.Run("a text frame that is not UTF-8 closes with 1007", func(t *testing.T) {
		if code := wsClose(t, []byte("{\"type\":\"connection_init\",\"payload\":{\"x\":\"\xff\"}}")); code != websocket.StatusInvalidFramePayloadData {
			t.Errorf("closed with %d", code)
		}
	})
}
