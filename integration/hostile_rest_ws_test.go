//go:build integration

// Hostile clients: WebSocket shares taken, credentials and input bent, all refused.
package integration

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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
)

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
			a := h.send("POST", "/posts", "198.51.100.9", []byte(tt.body), "Content-Type", "application/json", "Authorization", "ApiKey process-key")
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
