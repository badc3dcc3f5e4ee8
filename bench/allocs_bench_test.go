package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/bench/bare"
	"github.com/postsedge/caddy-posts/caddymodule"
	"github.com/postsedge/caddy-posts/events"
	"github.com/postsedge/caddy-posts/handlers"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
	"github.com/postsedge/caddy-posts/store"
)

// storeEnv, set to a data directory, makes the test binary serve the embedded store there
// instead of running benchmarks: BenchmarkGetPostAllocs runs it so as a child process, so that
// FerretDB's allocations are not counted in the benchmark's allocs/op.
const storeEnv = "POSTS_BENCH_STORE"

func TestMain(m *testing.M) {
	if dir := os.Getenv(storeEnv); dir != "" {
		os.Exit(serveStore(dir))
	}
	os.Exit(m.Run())
}

// serveStore runs the embedded store as the module does (store.Embedded: FerretDB on SQLite on
// the unix socket <dir>/mongodb.sock), says "ready" on stdout once it answers, and stops when
// stdin closes, which it does when the parent closes it or dies.
func serveStore(dir string) int {
	c := store.Embedded(dir, zap.NewNop())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The first call starts the server and creates the indexes; there is no such post.
	_, err := store.NewPosts(c, caddymodule.DefaultDatabase, time.Minute).FindByID(ctx, bson.NilObjectID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		fmt.Fprintln(os.Stderr, "embedded store:", err)
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := c.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "embedded store:", err)
		return 1
	}
	return 0
}

// startStore starts the embedded store in a child process and returns its MongoDB URI.
func startStore(b *testing.B) string {
	b.Helper()
	// Not b.TempDir(): the socket's path must fit in the 103 bytes of a unix socket address.
	dir, err := os.MkdirTemp("", "posts-allocs-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), storeEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			if err != nil {
				b.Errorf("the store process: %v", err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			b.Error("the store process did not stop in 10s; killed")
		}
	})
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("it said %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			b.Fatalf("starting the store process: %v", err)
		}
	case <-time.After(time.Minute):
		b.Fatal("the store process was not ready in a minute")
	}
	// The socket is store.Embedded's, named as FerretDB names it in its URI.
	return (&url.URL{Scheme: "mongodb", Host: filepath.Join(dir, "mongodb.sock"), Path: "/"}).String()
}

// BenchmarkGetPostAllocs reports the heap allocations of one anonymous GET /posts/{id}, client
// and server together (both are in this process), for each kind of server:
//
//   - net_http: a plain net/http handler writing the same header fields and JSON bytes, so
//     net/http's own allocations, server and client;
//   - bare: bench/bare's handler, plain net/http and mongo-driver doing the same store call;
//   - module: the module's API (package handlers, wired as caddymodule wires it) behind the
//     same net/http server as the other two;
//   - caddy: the module in a real Caddy, whose own server adds its allocations.
//
// The store runs in a child process (see startStore), so its allocations are not counted;
// mongo-driver's, in this process, are. Every answer is checked to be the same JSON bytes.
//
// module-minus-net_http-allocs/op is what the API and the store call add to net/http's own,
// module-minus-bare-allocs/op what the module adds to the hand-written server, and
// caddy-minus-module-allocs/op what Caddy adds. They are differences of the kinds' own
// allocs/op, each counted from runtime.MemStats over that kind's loop alone, in the same run:
// kinds are not alternated within one loop, because allocations that finish a request after
// its response was read (the server's and the transport's goroutines) would be counted against
// whichever kind comes next.
func BenchmarkGetPostAllocs(b *testing.B) {
	uri := startStore(b)
	mc, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = mc.Disconnect(context.Background()) })
	coll := mc.Database(caddymodule.DefaultDatabase).Collection(store.CollectionName)
	body := "a post read over and over"
	created := time.Now().UTC().Truncate(time.Millisecond)
	post := bare.Post{ID: bson.NewObjectID(), UserID: user, Title: "benchmark", Body: &body, CreatedAt: created, UpdatedAt: created}
	if _, err := coll.InsertOne(b.Context(), post); err != nil {
		b.Fatal(err)
	}
	want, err := bare.EncodePost(post)
	if err != nil {
		b.Fatal(err)
	}
	path := "/posts/" + post.ID.Hex()

	plain := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(want)
	})
	caddyPort, caddyDir := freePort(b), b.TempDir()
	// As startServer does: whatever Caddy writes for its data and config folders stays in caddyDir.
	b.Setenv("HOME", filepath.Join(caddyDir, "home"))
	b.Setenv("XDG_DATA_HOME", filepath.Join(caddyDir, "home", ".local", "share"))
	b.Setenv("XDG_CONFIG_HOME", filepath.Join(caddyDir, "home", ".config"))
	b.Setenv("XDG_CACHE_HOME", filepath.Join(caddyDir, "home", ".cache"))
	// Each server starts when its sub-benchmark first runs (so that -bench GetPostAllocs/module
	// profiles no Caddy start), and stops when this benchmark ends.
	servers := []struct {
		name  string
		start func() (base string, err error)
	}{
		{"net_http", func() (string, error) { return serve(b, plain), nil }},
		{"bare", func() (string, error) { return serve(b, bare.New(coll, nil)), nil }},
		{"module", func() (string, error) {
			h, err := moduleHandler(b, uri)
			if err != nil {
				return "", err
			}
			return serve(b, h), nil
		}},
		{"caddy", func() (string, error) { return startCaddy(b, uri, caddyPort, caddyDir) }},
	}
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	b.Cleanup(client.CloseIdleConnections)
	bases := map[string]string{}
	allocs := map[string]float64{} // per GET, by kind
	for _, s := range servers {
		b.Run(s.name, func(b *testing.B) {
			if bases[s.name] == "" {
				base, err := s.start()
				if err != nil {
					b.Fatal(err)
				}
				bases[s.name] = base
			}
			allocs[s.name] = getAllocs(b, client, bases[s.name]+path, want)
			diff := func(metric, of string) {
				if base, ok := allocs[of]; ok {
					b.ReportMetric(allocs[s.name]-base, metric)
				}
			}
			switch s.name {
			case "module":
				diff("module-minus-net_http-allocs/op", "net_http")
				diff("module-minus-bare-allocs/op", "bare")
			case "caddy":
				diff("caddy-minus-module-allocs/op", "module")
			}
		})
	}
}

// serve serves h on a loopback port until b ends, and returns its base URL.
func serve(b *testing.B, h http.Handler) string {
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return srv.URL
}

// moduleHandler is the module's API on the store at uri, wired as caddymodule wires it with its
// defaults (one API key, no JWKS), serving what it routes and 404 for the rest. Its resources
// are released when b ends.
func moduleHandler(b *testing.B, uri string) (http.Handler, error) {
	client, err := store.Connect(uri)
	if err != nil {
		return nil, err
	}
	b.Cleanup(func() { _ = client.Close(context.Background()) })
	timeout := time.Duration(caddymodule.DefaultTimeout)
	broker := events.NewBroker[posts.Event](caddymodule.EventQueue)
	b.Cleanup(broker.Close)
	svc := posts.NewService(posts.Config{
		Posts:    store.NewPosts(client, caddymodule.DefaultDatabase, timeout),
		Users:    store.NewUsers(client, caddymodule.DefaultDatabase, timeout),
		MaxLimit: caddymodule.DefaultMaxLimit,
		Logger:   zap.NewNop(),
		Events:   broker,
	})
	graph, err := schema.New(svc, zap.NewNop(), schema.Limits{})
	if err != nil {
		return nil, err
	}
	key, err := auth.ParseAPIKey(apiKey, user)
	if err != nil {
		return nil, err
	}
	api := handlers.New(handlers.Config{
		Posts:       svc,
		GraphQL:     graph,
		Auth:        &auth.Authenticator{APIKeyHeader: http.CanonicalHeaderKey(caddymodule.DefaultAPIKeyHeader), APIKeys: []auth.APIKey{key}},
		MaxBodySize: caddymodule.DefaultMaxBodySize,
		Logger:      zap.NewNop(),
	})
	b.Cleanup(api.Close)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := api.Route(r); h != nil {
			h.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	}), nil
}

// startCaddy runs a Caddy with the posts module on the store at uri, on port, with its files in
// tmp, until b ends, and returns its base URL.
func startCaddy(b *testing.B, uri string, port int, tmp string) (string, error) {
	caddyfile := caddyGlobals(tmp) + fmt.Sprintf(`
http://127.0.0.1:%d {
	bind 127.0.0.1
	posts {
		mongodb_uri %s
	}
}
`, port, uri)
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		return "", fmt.Errorf("adapting the Caddyfile: %w", err)
	}
	if err := caddy.Load(cfg, true); err != nil {
		return "", fmt.Errorf("starting Caddy: %w", err)
	}
	b.Cleanup(func() {
		if err := caddy.Stop(); err != nil {
			b.Errorf("stopping Caddy: %v", err)
		}
	})
	return fmt.Sprintf("http://127.0.0.1:%d", port), nil
}

// getAllocs GETs url over one keep-alive connection b.N times, checking each answer is want,
// and returns the heap allocations per GET.
func getAllocs(b *testing.B, client *http.Client, url string, want []byte) float64 {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	var answer bytes.Buffer
	get := func() {
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		answer.Reset()
		_, err = answer.ReadFrom(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK || !bytes.Equal(answer.Bytes(), want) {
			b.Fatalf("GET %s: %d %q, %v; want 200 %q", url, res.StatusCode, answer.Bytes(), err, want)
		}
	}
	get() // the connection, the buffers and the store's first answer are not what is measured
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n := 0
	for b.Loop() {
		get()
		n++
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(n)
}
