// The T rows (issue 42): what the module's spans cost. Rows 1, 4 and 5's requests (a read by
// id, a create, GraphQL's post(id)), to ./caddy ÷ to the module built as it was before its spans
// (tracingBefore), side by side, each on a store of its own seeded alike, both in the same mode:
// tracing off, Caddy's tracing directive at a sampling ratio of 0, and every request sampled (its
// traceparent says so, and the sampler follows its parent), the spans exported over OTLP to a
// receiver of the harness that reads and drops them.

package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// tracingBefore is the last commit of the module without spans.
const tracingBefore = "d543f47"

// tracingPosts are the posts of each store of the T rows: reads by id come from the post cache
// either way, so the store need not be the large one.
const tracingPosts = 20_000

// tracingPairs are the ids of the T rows, which build and start what they need only when one
// of them runs.
var tracingPairs = []string{"T1", "T4", "T5", "T1z", "T4z", "T5z", "T1s", "T4s", "T5s"}

// sampled is the traceparent of the T rows' sampled requests: one trace, its flag sampled.
const sampled = "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// tracingSite is one of the T rows' processes: its untraced and traced sites, and the ids of
// the posts seeded there.
type tracingSite struct {
	plain, traced, profile string
	ids                    []string
}

// startTracing builds the module of tracingBefore, starts it and ./caddy on bench/Caddyfile.tracing
// with a store each, seeded alike, and the OTLP receiver they export to.
func (e *env) startTracing(ctx context.Context) error {
	before, err := buildBefore(ctx, e.dir)
	if err != nil {
		return fmt.Errorf("building the module of %s: %w", tracingBefore, err)
	}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	e.closers = append(e.closers, sink.Close)
	for _, s := range []struct {
		name, bin string
		site      *tracingSite
	}{{"before", before, &e.tracingBefore}, {"now", e.caddyBin, &e.tracingNow}} {
		addrs, err := freeAddrs(3)
		if err != nil {
			return err
		}
		dir := filepath.Join(e.dir, "tracing-"+s.name)
		home := filepath.Join(dir, "home")
		port := func(addr string) string { _, p, _ := strings.Cut(addr, ":"); return p }
		vars := []string{"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
			"BENCH_DIR=" + dir, "BENCH_API_KEY=" + e.apiKey, "BENCH_JWKS_URL=" + e.jwksURL,
			"BENCH_PLAIN_PORT=" + port(addrs[0]), "BENCH_TRACED_PORT=" + port(addrs[1]), "BENCH_ADMIN_PORT=" + port(addrs[2]),
			"OTEL_EXPORTER_OTLP_ENDPOINT=" + sink.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_TRACES_EXPORTER=otlp",
			"OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=0"}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		p, err := spawn(s.bin, []string{"run", "--config", "bench/Caddyfile.tracing", "--adapter", "caddyfile"}, vars, filepath.Join(dir, "caddy.log"))
		if err != nil {
			return err
		}
		e.closers = append(e.closers, p.stop)
		if err := p.listening(ctx, addrs[0]); err != nil {
			return err
		}
		*s.site = tracingSite{plain: "http://" + addrs[0], traced: "http://" + addrs[1], profile: "http://" + addrs[2] + "/debug/pprof"}
		seeded, err := e.seedCaddy(ctx, s.site.plain, tracingPosts)
		if err != nil {
			return err
		}
		s.site.ids = seeded.ids
	}
	return nil
}

// buildBefore builds ./caddy as it was at tracingBefore, in a worktree of the repository that
// it removes after, as `make caddy` builds (build/, xcaddy.json), and returns the binary's path.
func buildBefore(ctx context.Context, dir string) (string, error) {
	tree, bin := filepath.Join(dir, "before-src"), filepath.Join(dir, "caddy-before")
	run := func(dir string, args ...string) error {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run(".", "git", "worktree", "add", "--detach", tree, tracingBefore); err != nil {
		return "", err
	}
	defer run(".", "git", "worktree", "remove", "--force", tree)
	log.Printf("building the module of %s, before its spans", tracingBefore)
	if err := run(filepath.Join(tree, "build"), "go", "run", ".", "-recipe", "../xcaddy.json", "-o", bin); err != nil {
		return "", err
	}
	return bin, nil
}

// tracingRows are the T rows.
func tracingRows(e *env) []*pair {
	get := func(s tracingSite, base string, headers ...string) request {
		return request{url: base + "/posts/{id}", ids: random(s.ids), headers: headers, status: 200}
	}
	create := func(base string, headers ...string) request {
		return request{method: "POST", url: base + "/posts", body: createBody(""), headers: append([]string{"Authorization: ApiKey " + e.apiKey}, headers...), status: 201}
	}
	graphQL := func(s tracingSite, base string, headers ...string) request {
		return request{method: "POST", url: base + "/graphql", body: graphQLBody(postQuery, map[string]string{"id": "{id}"}), ids: random(s.ids),
			headers: headers, status: 200, want: `{"data":{"post":{"id":"`}
	}
	now, before := e.tracingNow, e.tracingBefore
	side := func(name string, s tracingSite, req request) side {
		return side{name: name, req: req, profile: s.profile}
	}
	row := func(id, what, mode string, a, b request, target string, met func(float64) bool) *pair {
		return &pair{id: id, what: fmt.Sprintf("%s throughput, %s, ÷ the module before its spans (%s), the same", what, mode, tracingBefore),
			a: side("now", now, a), b: side("before", before, b), metric: throughput, target: target, met: met}
	}
	// Caddy's tracing costs a request something with any handler behind it (its span, even one
	// left out by the sampler): both sides of a row have it or neither, so that a row is the
	// module's own cost.
	const off, zero, all = "tracing off", "Caddy's `tracing` at sampling ratio 0", "Caddy's `tracing`, every request sampled and exported"
	return []*pair{
		row(tracingPairs[0], "`GET /posts/{id}`", off, get(now, now.plain), get(before, before.plain), "≥ 0.98", atLeast(0.98)),
		row(tracingPairs[1], "`POST /posts`", off, create(now.plain), create(before.plain), "≥ 0.98", atLeast(0.98)),
		row(tracingPairs[2], "GraphQL `post(id)`", off, graphQL(now, now.plain), graphQL(before, before.plain), "≥ 0.98", atLeast(0.98)),
		row(tracingPairs[3], "`GET /posts/{id}`", zero, get(now, now.traced), get(before, before.traced), "≥ 0.95", atLeast(0.95)),
		row(tracingPairs[4], "`POST /posts`", zero, create(now.traced), create(before.traced), "≥ 0.95", atLeast(0.95)),
		row(tracingPairs[5], "GraphQL `post(id)`", zero, graphQL(now, now.traced), graphQL(before, before.traced), "≥ 0.95", atLeast(0.95)),
		row(tracingPairs[6], "`GET /posts/{id}`", all, get(now, now.traced, sampled), get(before, before.traced, sampled), "", nil),
		row(tracingPairs[7], "`POST /posts`", all, create(now.traced, sampled), create(before.traced, sampled), "", nil),
		row(tracingPairs[8], "GraphQL `post(id)`", all, graphQL(now, now.traced, sampled), graphQL(before, before.traced, sampled), "", nil),
	}
}
