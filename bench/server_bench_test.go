//go:build !race

// Benchmarks only, which go test -race does not run: left out of its build rather than linked
// with the race detector for nothing.

// The benchmarks' server: a real Caddy with the posts module, its identity provider, a seeded post.

package bench

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile" // registers the caddyfile adapter
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/golang-jwt/jwt/v5"

	_ "github.com/postsedge/caddy-posts/caddymodule"
)

// The server is a real Caddy in this process with the posts module and its embedded store,
// loaded from a Caddyfile with the admin endpoint off (so it never clashes with caddytest's
// localhost:2999 in the caddymodule tests), on a free port of 127.0.0.1, with every file it
// writes in temporary directories.

const (
	kid    = "bench-rs256"
	apiKey = "bench-api-key"
	user   = "alice"
)

// idp is a stand-in identity provider: an RSA-2048 key whose public half it serves as a JWKS,
// and one RS256 token signed with it, reused by every request.
type idp struct {
	jwksURL string
	public  *rsa.PublicKey
	token   string
}

func newIDP(b *testing.B) *idp {
	b.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	jwk, err := jwkset.NewJWKFromKey(&key.PublicKey, jwkset.JWKOptions{
		Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: jwkset.AlgRS256, USE: jwkset.UseSig},
	})
	if err != nil {
		b.Fatal(err)
	}
	set, err := json.Marshal(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{jwk.Marshal()}})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(set)
	}))
	b.Cleanup(srv.Close)

	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"sub": user,
		"iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	})
	tok.Header["kid"] = kid
	signed, err := tok.SignedString(key)
	if err != nil {
		b.Fatal(err)
	}
	return &idp{jwksURL: srv.URL, public: &key.PublicKey, token: signed}
}

// server is a running Caddy with the posts module, and one post in its store.
type server struct {
	base   string // http://127.0.0.1:<port>
	postID string
	client *http.Client
	idp    *idp
}

// startServer starts Caddy for the rest of b (caddy.Stop runs in b's cleanup).
func startServer(b *testing.B) *server {
	b.Helper()
	tmp := b.TempDir()
	// Caddy reads these for its data and config folders (instance.uuid, autosave.json): keep
	// anything it might write inside tmp.
	b.Setenv("HOME", filepath.Join(tmp, "home"))
	b.Setenv("XDG_DATA_HOME", filepath.Join(tmp, "home", ".local", "share"))
	b.Setenv("XDG_CONFIG_HOME", filepath.Join(tmp, "home", ".config"))
	b.Setenv("XDG_CACHE_HOME", filepath.Join(tmp, "home", ".cache"))

	p := newIDP(b)
	port := freePort(b)
	caddyfile := caddyGlobals(tmp) + fmt.Sprintf(`
http://127.0.0.1:%d {
	bind 127.0.0.1
	posts {
		data_dir %s
		jwks_url %s
		api_key %s %s
		health_path /healthz
		# The benchmarks' thousand connections are one client's.
		max_connections_per_user 10000
		max_distinct_subscriptions_per_client 1000
	}
}
`, port, filepath.Join(tmp, "posts"), p.jwksURL, apiKey, user)

	adapter := caddyconfig.GetAdapter("caddyfile")
	if adapter == nil {
		b.Fatal("the caddyfile config adapter is not registered")
	}
	cfgJSON, warnings, err := adapter.Adapt([]byte(caddyfile), nil)
	if err != nil {
		b.Fatalf("adapting the Caddyfile: %v", err)
	}
	for _, w := range warnings {
		b.Logf("Caddyfile warning: %s", w.String())
	}
	if err := caddy.Load(cfgJSON, true); err != nil {
		b.Fatalf("starting Caddy: %v", err)
	}
	b.Cleanup(func() {
		if err := caddy.Stop(); err != nil {
			b.Errorf("stopping Caddy: %v", err)
		}
	})

	s := &server{
		base: fmt.Sprintf("http://127.0.0.1:%d", port),
		client: &http.Client{
			Timeout: 30 * time.Second,
			Transport: &http.Transport{
				MaxIdleConns:        128,
				MaxIdleConnsPerHost: 128,
				DisableCompression:  true,
			},
		},
		idp: p,
	}
	b.Cleanup(s.client.CloseIdleConnections) // runs before caddy.Stop
	s.postID = s.seed(b)
	s.handedTheSeed(b)
	return s
}

// handedTheSeed waits until the event log's follower has handed the seed's event, the first of
// the fresh store (/healthz's event_log.handed_position): the follower starts reading the log
// after the server answers, and hands, once it starts, the writes made before to whichever
// subscriptions were accepted meanwhile, which a benchmark's subscribers would read as messages
// it did not publish.
func (s *server) handedTheSeed(b *testing.B) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var health struct {
			EventLog *struct {
				Handed int64 `json:"handed_position"`
			} `json:"event_log"`
		}
		var body []byte
		res, err := s.client.Get(s.base + "/healthz")
		if err == nil {
			body, err = io.ReadAll(res.Body)
			res.Body.Close()
		}
		if err == nil {
			err = json.Unmarshal(body, &health)
		}
		if err == nil && health.EventLog != nil && health.EventLog.Handed >= 1 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("/healthz: the event log's follower had not handed the seed's event 30 s after it was written: %s %v", body, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func freePort(b *testing.B) int {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// seed creates the post the benchmarks read, as alice with the token. It waits out the start:
// until the JWKS is fetched and the embedded store runs, the server answers 503.
func (s *server) seed(b *testing.B) string {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodPost, s.base+"/posts",
			strings.NewReader(`{"title": "benchmark", "body": "a post read over and over"}`))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+s.idp.token)
		res, err := s.client.Do(req)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(res.Body)
			res.Body.Close()
		}
		switch {
		case err == nil && res.StatusCode == http.StatusCreated:
			var p struct {
				ID     string `json:"id"`
				UserID string `json:"userId"`
			}
			if err := json.Unmarshal(body, &p); err != nil || p.ID == "" || p.UserID != user {
				b.Fatalf("the created post %s: want an id and userId %q (%v)", body, user, err)
			}
			return p.ID
		case time.Now().After(deadline):
			if err != nil {
				b.Fatalf("seeding a post: %v", err)
			}
			b.Fatalf("seeding a post: status %d, body %s", res.StatusCode, body)
		case err == nil && res.StatusCode != http.StatusServiceUnavailable:
			b.Fatalf("seeding a post: status %d, body %s", res.StatusCode, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// caddyGlobals is the global block of the benchmarks' Caddyfiles: no admin endpoint (so it never
// clashes with the caddymodule tests'), Caddy's files inside tmp, warnings only.
func caddyGlobals(tmp string) string {
	return fmt.Sprintf(`{
	admin off
	persist_config off
	storage file_system %s
	skip_install_trust
	grace_period 1ns
	log {
		level WARN
	}
}
`, filepath.Join(tmp, "caddy"))
}
