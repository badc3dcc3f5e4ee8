// Idempotent creates through Caddy: a retry with the same Idempotency-Key, the same key with
// another request, bad keys, other writes with a key, the GraphQL createPost; on both stores.
package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestIdempotentCreatesThroughCaddy(t *testing.T) {
	inProcess(t)
	caddy := startCaddy(t)
	for _, s := range []struct{ name, url string }{{"the embedded store", site}, {"MongoDB", stalledSite}} {
		t.Run("on "+s.name, func(t *testing.T) {
			c := &client{t: t, http: caddy.http}
			events := subscribeCreated(t, c, s.url)
			run := fmt.Sprint(time.Now().UnixNano())
			key := "Idempotency-Key: " + run
			title := "keyed " + run
			before := stored(t)
			first := c.do("POST", s.url+"/posts", fmt.Sprintf(`{"title": %q}`, title), asAlice, jsonBody, key)
			if first.status != http.StatusCreated || first.header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("the first: %d %v %s", first.status, first.header, first.body)
			}
			t.Run("a retry gets the same status, headers and body, and says it is replayed", func(t *testing.T) {
				again := c.do("POST", s.url+"/posts", fmt.Sprintf(`{ "title" : %q }`, title), asAlice, jsonBody, `Idempotency-Key: "`+run+`"`)
				if again.status != first.status || !bytes.Equal(again.body, first.body) || again.header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("the retry: %d %v %s; want %d %s, replayed", again.status, again.header, again.body, first.status, first.body)
				}
				for _, name := range []string{"Location", "Content-Type", "X-Content-Type-Options"} {
					if again.header.Get(name) != first.header.Get(name) || first.header.Get(name) == "" {
						t.Errorf("%s: %q, first %q", name, again.header.Get(name), first.header.Get(name))
					}
				}
			})
			t.Run("the same key with another body is 422 and stores nothing", func(t *testing.T) {
				c.do("POST", s.url+"/posts", fmt.Sprintf(`{"title": %q, "body": "more"}`, title), asAlice, jsonBody, key).
					wantError(t, http.StatusUnprocessableEntity, "sent before with another request")
			})
			for _, bad := range []struct{ name, value string }{
				{"an empty key", `""`},
				{"a key of 256 characters", strings.Repeat("k", 256)},
				{"a key with a space", "a b"},
				{"a key that is not ASCII", "clé"},
				{"two keys", `"a", "b"`},
			} {
				t.Run(bad.name+" is 400 and stores nothing", func(t *testing.T) {
					c.do("POST", s.url+"/posts", `{"title": "bad key"}`, asAlice, jsonBody, "Idempotency-Key: "+bad.value).
						wantError(t, http.StatusBadRequest, "Idempotency-Key must be 1 to 255 printable ASCII characters")
				})
			}
			t.Run("a PATCH with a key is 400 and changes nothing", func(t *testing.T) {
				c.do("PATCH", s.url+first.header.Get("Location"), `{"title": "changed"}`, asAlice, jsonBody, key).
					wantError(t, http.StatusBadRequest, "PATCH /posts/{id} does not take one")
			})
			after := stored(t)
			if added := addedLines(before, after); len(added) != 1 || !strings.Contains(added[0], title) {
				t.Errorf("the requests stored %v; want the one post %q", added, title)
			}

			const create = `mutation($t: String!) { createPost(input: {title: $t}) { id title author { id } } }`
			t.Run("a GraphQL createPost with a key is answered once, and its retry gets that answer", func(t *testing.T) {
				gqlTitle := "graphql " + run
				firstGQL := c.graphql(s.url, create, map[string]any{"t": gqlTitle}, asAlice, "Idempotency-Key: g"+run)
				againGQL := c.graphql(s.url, create, map[string]any{"t": gqlTitle}, asAlice, "Idempotency-Key: g"+run)
				if firstGQL.status != http.StatusOK || !bytes.Contains(firstGQL.body, []byte(gqlTitle)) ||
					againGQL.status != firstGQL.status || !bytes.Equal(againGQL.body, firstGQL.body) || againGQL.header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("first %d %s; retry %d %v %s", firstGQL.status, firstGQL.body, againGQL.status, againGQL.header, againGQL.body)
				}
				if added := addedLines(after, stored(t)); len(added) != 1 || !strings.Contains(added[0], gqlTitle) {
					t.Errorf("stored %v; want the one post %q", added, gqlTitle)
				}
				other := c.graphql(s.url, create, map[string]any{"t": "another"}, asAlice, "Idempotency-Key: g"+run)
				var res gqlResponse
				if err := json.Unmarshal(other.body, &res); err != nil || other.status != http.StatusUnprocessableEntity ||
					len(res.Errors) != 1 || res.Errors[0].Extensions["code"] != "IDEMPOTENCY_KEY_REUSED" {
					t.Errorf("the same key with other variables: %d %s", other.status, other.body)
				}
			})
			t.Run("another mutation with a key is 400 and runs not", func(t *testing.T) {
				before := stored(t)
				res := c.graphql(s.url, `mutation { a: createPost(input: {title: "a"}) { id } b: createPost(input: {title: "b"}) { id } }`, nil, asAlice, "Idempotency-Key: two"+run)
				if res.status != http.StatusBadRequest || !bytes.Contains(res.body, []byte("a mutation other than one createPost field")) {
					t.Errorf("got %d %s", res.status, res.body)
				}
				unchanged(t, before)
			})
			t.Run("each post created is published once", func(t *testing.T) {
				created := events()
				for _, want := range []string{title, "graphql " + run} {
					if n := strings.Count(strings.Join(created, "\n")+"\n", want+"\n"); n != 1 {
						t.Errorf("%q published %d times (events %q); want once", want, n, created)
					}
				}
			})
		})
	}
}

// addedLines is what after holds and before does not, in order.
func addedLines(before, after []string) []string {
	had := map[string]bool{}
	for _, line := range before {
		had[line] = true
	}
	var added []string
	for _, line := range after {
		if !had[line] {
			added = append(added, line)
		}
	}
	return added
}

// subscribeCreated subscribes through siteURL to the posts alice creates, and returns the
// function that reads the titles created since: it ends each reading with a post of its own,
// created without a key, and reads up to it, so that every event before it has come.
func subscribeCreated(t *testing.T, c *client, siteURL string) (titles func() []string) {
	t.Helper()
	host := strings.TrimPrefix(siteURL, "http://")
	_, port, _ := strings.Cut(host, ":")
	ws, res, err := websocket.Dial(t.Context(), "ws://127.0.0.1:"+port+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, Host: host,
	})
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, res)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	wsSend(t, ws, `{"type": "connection_init", "payload": {"Authorization": "ApiKey `+aliceKey+`"}}`)
	if m := wsRecv(t, ws); m.Type != "connection_ack" {
		t.Fatalf("got %+v", m)
	}
	wsSend(t, ws, `{"id": "c", "type": "subscribe", "payload": {"query": "subscription { postCreated(userId: \"alice\") { title } }"}}`)
	// A read that ends on a deadline closes the connection, so one goroutine reads them all.
	created := make(chan string, 1000)
	go func() {
		defer close(created)
		for {
			_, data, err := ws.Read(t.Context())
			if err != nil {
				return
			}
			var m struct {
				Type    string
				Payload struct {
					Data struct{ PostCreated struct{ Title string } }
				}
			}
			if json.Unmarshal(data, &m) == nil && m.Type == "next" {
				created <- m.Payload.Data.PostCreated.Title
			}
		}
	}()
	marks := 0
	read := func() []string {
		t.Helper()
		marks++
		mark := fmt.Sprintf("mark %d of %s", marks, t.Name())
		var titles []string
		// The subscription may start after the first mark is created: its event then never
		// comes, and the mark is made again.
		for range 5 {
			c.createOn(siteURL, asAlice, mark)
			timeout := time.After(time.Second)
			for waiting := true; waiting; {
				select {
				case title, ok := <-created:
					switch {
					case !ok:
						t.Fatal("the subscription ended")
					case title == mark:
						return titles
					case !strings.HasPrefix(title, "mark "):
						titles = append(titles, title)
					}
				case <-timeout:
					waiting = false
				}
			}
		}
		t.Fatalf("the subscription did not publish %q", mark)
		return nil
	}
	read() // once the subscription runs
	return read
}
