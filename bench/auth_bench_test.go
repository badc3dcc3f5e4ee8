//go:build !race

// Benchmarks only, which go test -race does not run: left out of its build rather than linked
// with the race detector for nothing.

// Benchmarks of authenticated reads against anonymous ones: BenchmarkGetPost and BenchmarkVerify.

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
)

// The benchmarks answer the issue "an authenticated GET with a reused RS256 token runs at ≥ 0.9×
// the throughput of the same GET without credentials". They report that ratio
// (bearer/anon-throughput), measured side by side in one run: every iteration makes one request
// of each kind, alternating which goes first, so drift of a noisy machine hits both alike. They
// never fail on a number.

// kind is a way of making the GET: its credentials.
type kind struct {
	name   string // the sub-benchmark's name
	metric string // the prefix of its metrics
}

var (
	anonymous = kind{"anonymous", "anon"}
	bearer    = kind{"bearer_rs256", "bearer"}
	withKey   = kind{"api_key", "apikey"}
	// The same post read anonymously through GraphQL: POST /graphql of post(id) with every field.
	graphQL = kind{"graphql", "graphql"}
	// anonymous against anonymous: the ratio the method measures where there is no difference,
	// which shows its bias and noise.
	anonymousAgain = kind{"anonymous", "anon2"}

	kinds = []kind{bearer, withKey, graphQL, anonymousAgain}
)

// postQuery reads what GET /posts/{id} answers, through GraphQL.
const postQuery = `query($id: ID!) { post(id: $id) { id userId title body createdAt updatedAt } }`

// request builds one read of the post, of kind k. A request is reused, one use at a time.
func (s *server) request(k kind) (*http.Request, error) {
	if k == graphQL {
		body, err := json.Marshal(map[string]any{"query": postQuery, "variables": map[string]string{"id": s.postID}})
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequest(http.MethodPost, s.base+"/graphql", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		return req, nil
	}
	req, err := http.NewRequest(http.MethodGet, s.base+"/posts/"+s.postID, nil)
	if err != nil {
		return nil, err
	}
	switch k {
	case bearer:
		req.Header.Set("Authorization", "Bearer "+s.idp.token)
	case withKey:
		req.Header.Set("Authorization", "ApiKey "+apiKey)
	}
	return req, nil
}

// get makes the request and reads its whole answer; it returns the time that took.
func (s *server) get(req *http.Request) (time.Duration, error) {
	if req.GetBody != nil { // a POST: its body again
		var err error
		if req.Body, err = req.GetBody(); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	res, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	elapsed := time.Since(start)
	if err != nil {
		return 0, err
	}
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s %s with %v: status %d; want 200", req.Method, req.URL.Path, headerNames(req), res.StatusCode)
	}
	return elapsed, nil
}

func headerNames(req *http.Request) []string {
	var names []string
	for name := range req.Header {
		names = append(names, name)
	}
	if names == nil {
		return []string{"no credentials"}
	}
	return names
}

// pair makes one anonymous GET and one of the other kind, in the order that turn picks, and
// adds their times.
func (s *server) pair(anonReq, otherReq *http.Request, turn int, anon, other *time.Duration) error {
	first, second := anonReq, otherReq
	firstSum, secondSum := anon, other
	if turn%2 == 1 {
		first, second = second, first
		firstSum, secondSum = secondSum, firstSum
	}
	d, err := s.get(first)
	if err != nil {
		return err
	}
	*firstSum += d
	d, err = s.get(second)
	if err != nil {
		return err
	}
	*secondSum += d
	return nil
}

// report writes the per-request times of both kinds and the throughput of the other kind
// relative to anonymous (anonymous time / other time: 1 is as fast, 0.9 is 10% slower).
func report(b *testing.B, k kind, anon, other time.Duration, n int64) {
	if n == 0 || other == 0 {
		return
	}
	b.ReportMetric(float64(anon)/float64(n), "anon-ns/req")
	b.ReportMetric(float64(other)/float64(n), k.metric+"-ns/req")
	b.ReportMetric(float64(anon)/float64(other), k.metric+"/anon-throughput")
}

// BenchmarkGetPost measures GET /posts/{id} of one post through a real Caddy, anonymous against
// each way of authenticating, and against the same read through GraphQL, side by side:
//
//   - interleaved/<kind>: one client, one keep-alive connection; each iteration (ns/op) is one
//     anonymous GET and one GET of the kind, alternately first.
//   - parallel/<kind>: b.RunParallel, 4×GOMAXPROCS goroutines each alternating the two kinds over
//     the client's pool of keep-alive connections, as concurrent users would.
//
// bearer_rs256 sends the same RS256 token every time, so after the first request it is verified
// from the token cache; graphql is the anonymous POST /graphql of post(id) with every field of
// the REST answer; anonymous against anonymous shows the noise floor of the ratio.
func BenchmarkGetPost(b *testing.B) {
	s := startServer(b)
	s.checkGraphQL(b)
	for _, k := range kinds {
		b.Run("interleaved/"+k.name, func(b *testing.B) { interleaved(b, s, k) })
	}
	for _, k := range kinds {
		b.Run("parallel/"+k.name, func(b *testing.B) { parallel(b, s, k) })
	}
}

func interleaved(b *testing.B, s *server, k kind) {
	anonReq, err := s.request(anonymous)
	if err != nil {
		b.Fatal(err)
	}
	otherReq, err := s.request(k)
	if err != nil {
		b.Fatal(err)
	}
	// One untimed pair, so that both kinds start warm.
	var anon, other time.Duration
	if err := s.pair(anonReq, otherReq, 0, &anon, &other); err != nil {
		b.Fatal(err)
	}
	anon, other = 0, 0
	var n int64
	b.ReportAllocs()
	for b.Loop() {
		if err := s.pair(anonReq, otherReq, int(n), &anon, &other); err != nil {
			b.Fatal(err)
		}
		n++
	}
	report(b, k, anon, other, n)
}

func parallel(b *testing.B, s *server, k kind) {
	var anonNs, otherNs, anonN, otherN, workers atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		anonReq, err := s.request(anonymous)
		if err != nil {
			b.Error(err)
			return
		}
		otherReq, err := s.request(k)
		if err != nil {
			b.Error(err)
			return
		}
		// Half of the goroutines start with anonymous, half with the other kind.
		turn := int(workers.Add(1))
		var anon, other time.Duration
		var n int64
		for pb.Next() {
			if err := s.pair(anonReq, otherReq, turn, &anon, &other); err != nil {
				b.Error(err)
				return
			}
			turn++
			n++
		}
		anonNs.Add(int64(anon))
		otherNs.Add(int64(other))
		anonN.Add(n)
		otherN.Add(n)
	})
	if b.Failed() {
		b.FailNow()
	}
	// Each goroutine made as many requests of both kinds, so the ratio of the summed times is
	// the ratio of the throughputs.
	report(b, k, time.Duration(anonNs.Load()), time.Duration(otherNs.Load()), anonN.Load())
}

// checkGraphQL fails b unless the GraphQL read answers the post itself, not errors.
func (s *server) checkGraphQL(b *testing.B) {
	req, err := s.request(graphQL)
	if err != nil {
		b.Fatal(err)
	}
	res, err := s.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Data   struct{ Post struct{ ID, Title string } }
		Errors []any
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || out.Errors != nil || out.Data.Post.ID != s.postID {
		b.Fatalf("the GraphQL read: %+v, %v; want post %s", out, err, s.postID)
	}
}

// BenchmarkVerify measures the check of a bearer token alone, without HTTP:
//
//   - cached: auth.Tokens.Verify of the token it verified before, as every request after the
//     first one of a client that reuses its token (a SHA-256 of the token and a map lookup);
//   - uncached_jwt_parse: jwt.Parse with a fresh parser and the public key at hand (the RS256
//     signature check and the claims), what every request would pay without the cache;
//   - uncached_verify: a new auth.Tokens (so an empty cache) and its first Verify: the whole
//     uncached path of the module, key lookup in the JWKS included.
func BenchmarkVerify(b *testing.B) {
	p := newIDP(b)
	jwks := auth.NewJWKS(p.jwksURL, time.Hour, nil, zap.NewNop())
	b.Cleanup(jwks.Close)
	jwks.Start()
	for deadline := time.Now().Add(30 * time.Second); !jwks.Fetched(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the JWKS was not fetched in 30s")
		}
	}
	cfg := auth.TokenConfig{
		Keys:       []*auth.JWKS{jwks},
		Algorithms: auth.DefaultAlgorithms,
		UserClaim:  "sub",
		NameClaim:  "name",
		EmailClaim: "email",
		Leeway:     30 * time.Second,
		Timeout:    5 * time.Second,
	}
	tokens, err := auth.NewTokens(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	check := func(b *testing.B, id auth.Identity, err error) {
		if err != nil || id.UserID != user {
			b.Fatalf("Verify = %+v, %v; want %s", id, err, user)
		}
	}
	id, err := tokens.Verify(ctx, p.token) // fills the cache
	check(b, id, err)

	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			id, err := tokens.Verify(ctx, p.token)
			check(b, id, err)
		}
	})
	b.Run("uncached_jwt_parse", func(b *testing.B) {
		keyfunc := func(*jwt.Token) (any, error) { return p.public, nil }
		b.ReportAllocs()
		for b.Loop() {
			tok, err := jwt.Parse(p.token, keyfunc,
				jwt.WithValidMethods([]string{"RS256"}), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
			if err != nil || !tok.Valid {
				b.Fatalf("jwt.Parse: %v", err)
			}
			if sub, _ := tok.Claims.GetSubject(); sub != user {
				b.Fatalf("sub = %q; want %q", sub, user)
			}
		}
	})
	b.Run("uncached_verify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fresh, err := auth.NewTokens(cfg)
			if err != nil {
				b.Fatal(err)
			}
			id, err := fresh.Verify(ctx, p.token)
			check(b, id, err)
		}
	})
}
