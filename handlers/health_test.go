package handlers

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// gatedPing is a real store whose pings wait for the gate, so that a test can hold probes in
// flight together.
type gatedPing struct {
	store.Store
	gate  chan struct{}
	pings atomic.Int32
}

func (g *gatedPing) Ping(ctx context.Context) error {
	g.pings.Add(1)
	<-g.gate
	return g.Store.Ping(ctx)
}

// healthServer is the API with health_path /healthz over st, with authn's key sets.
func healthServer(t *testing.T, st store.Store, authn *auth.Authenticator) string {
	t.Helper()
	svc := posts.NewService(posts.Config{Store: st, Timeout: time.Second, MaxLimit: 100, Logger: zap.NewNop()})
	a := New(Config{Posts: svc, Auth: authn, Logger: zap.NewNop(), HealthPath: "/healthz"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := a.Route(r); h != nil {
			h.ServeHTTP(w, r)
			return
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/healthz"
}

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// probe GETs url and decodes the answer.
func probe(t *testing.T, method, url string) (*http.Response, health) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var h health
	if method == http.MethodGet && res.StatusCode != http.StatusMethodNotAllowed {
		if err := json.NewDecoder(res.Body).Decode(&h); err != nil {
			t.Fatalf("the answer is not JSON: %v", err)
		}
	}
	return res, h
}

func TestHealthSaysWhetherTheStoreAnswers(t *testing.T) {
	st := openSQLite(t)
	url := healthServer(t, st, &auth.Authenticator{})

	t.Run("a store that answers is ok, and a probe is never cached", func(t *testing.T) {
		res, h := probe(t, http.MethodGet, url)
		if res.StatusCode != http.StatusOK || h.Status != "ok" || h.Store.Status != "ok" || h.KeySets != nil {
			t.Errorf("got %d %+v, want 200 ok without key_sets", res.StatusCode, h)
		}
		if got := res.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("Cache-Control %q, want no-store", got)
		}
	})
	t.Run("HEAD answers the same status without a body", func(t *testing.T) {
		res, err := http.Head(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || len(body) > 0 {
			t.Errorf("got %d with %q", res.StatusCode, body)
		}
	})
	t.Run("other methods are refused with the ones allowed", func(t *testing.T) {
		if res, _ := probe(t, http.MethodPost, url); res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("got %d, Allow %q", res.StatusCode, res.Header.Get("Allow"))
		}
	})
	t.Run("a store that does not answer is 503, naming the store", func(t *testing.T) {
		st.Close()
		res, h := probe(t, http.MethodGet, url)
		if res.StatusCode != http.StatusServiceUnavailable || h.Status != "unavailable" || h.Store.Status != "unavailable" ||
			h.Store.Error != posts.ErrUnavailable.Error() || res.Header.Get("Retry-After") == "" {
			t.Errorf("got %d %+v, Retry-After %q", res.StatusCode, h, res.Header.Get("Retry-After"))
		}
	})
}

func TestHealthSaysWhenTheStoresBreakerIsOpen(t *testing.T) {
	st := openSQLite(t)
	breaker := store.NewBreaker(st, store.BreakerConfig{})
	t.Cleanup(breaker.Stop)
	url := healthServer(t, breaker.Guard(st), &auth.Authenticator{})
	if _, h := probe(t, http.MethodGet, url); h.Status != "ok" || h.Store.Breaker != "" {
		t.Fatalf("before: %+v", h)
	}
	st.Close()
	for range store.DefaultBreakerThreshold {
		if _, h := probe(t, http.MethodGet, url); h.Store.Status != "unavailable" || h.Store.Breaker != "" {
			t.Fatalf("a failed ping: %+v; want unavailable, the breaker not open yet", h)
		}
	}
	res, h := probe(t, http.MethodGet, url)
	if res.StatusCode != http.StatusServiceUnavailable || h.Store.Status != "unavailable" || h.Store.Breaker != "open" ||
		h.Store.Error != posts.ErrNotTried.Error() || res.Header.Get("Retry-After") != "1" {
		t.Errorf("got %d %+v, Retry-After %q; want 503, the breaker open, Retry-After 1", res.StatusCode, h, res.Header.Get("Retry-After"))
	}
}

func TestProbesThatArriveTogetherShareOnePing(t *testing.T) {
	st := &gatedPing{Store: openSQLite(t), gate: make(chan struct{})}
	url := healthServer(t, st, &auth.Authenticator{})
	const probes = 20
	var wg sync.WaitGroup
	statuses := make(chan int, probes)
	for range probes {
		wg.Go(func() {
			res, _ := probe(t, http.MethodGet, url)
			statuses <- res.StatusCode
		})
	}
	for st.pings.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the others reach the probe under way
	close(st.gate)
	wg.Wait()
	close(statuses)
	for status := range statuses {
		if status != http.StatusOK {
			t.Errorf("a probe got %d", status)
		}
	}
	if got := st.pings.Load(); got >= probes {
		t.Errorf("%d probes at once pinged the store %d times", probes, got)
	}
}

// jwksServer serves a key set with one Ed25519 key when serving is set, and 503 otherwise.
func jwksServer(t *testing.T, serving *atomic.Bool) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	set := fmt.Sprintf(`{"keys":[{"kty":"OKP","crv":"Ed25519","alg":"EdDSA","use":"sig","kid":"k1","x":%q}]}`,
		base64.RawURLEncoding.EncodeToString(pub))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !serving.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, set)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestHealthWaitsForEveryKeySet(t *testing.T) {
	var up, down atomic.Bool
	up.Store(true)
	var sets []*auth.JWKS
	for _, serving := range []*atomic.Bool{&up, &down} {
		set := auth.NewJWKS(jwksServer(t, serving), time.Hour, nil, zap.NewNop())
		t.Cleanup(set.Close)
		sets = append(sets, set)
	}
	tokens, err := auth.NewTokens(auth.TokenConfig{Keys: sets, UserClaim: "sub", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	url := healthServer(t, openSQLite(t), &auth.Authenticator{Tokens: tokens})

	// The first probe starts the fetches; the set that answers is fetched soon after.
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, h := probe(t, http.MethodGet, url)
		if res.StatusCode != http.StatusServiceUnavailable || h.KeySets == nil || h.KeySets.Total != 2 || h.Store.Status != "ok" {
			t.Fatalf("with one of two key sets answering: %d %+v", res.StatusCode, h)
		}
		if h.KeySets.Fetched == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key set that answers was not fetched in 5s: %+v", h.KeySets)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !sets[0].Fetched() || sets[1].Fetched() {
		t.Fatalf("fetched: %v and %v, want the first only", sets[0].Fetched(), sets[1].Fetched())
	}
}
