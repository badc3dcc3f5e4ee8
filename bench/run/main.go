// Command run is the benchmark harness of `make bench`: it starts ./caddy with
// bench/Caddyfile.bench on fresh embedded stores and seeds them through the API, serves the bare
// baseline (bench/bare) in processes of its own on the same SQLite files, starts a second
// ./caddy (bench/Caddyfile.search) on two copies of the large store's file for row 39e, one
// without the triggers that write its search index, builds and serves the gqlgen server (bench/gqlbare) on the file of the large store, with
// Caddy's reverse_proxy in front of each (the deployment a user would otherwise run), builds,
// serves and seeds the PocketBase peer (bench/pocketbase) the same way, and runs each pair of
// pairs.go with its closed-loop load generator (load.go), the two sides alternating (A B, B A,
// …; with the further sides a pair runs for others to read, such as row 8's SSE subscribers,
// A B C D, D C B A) for a number of rounds after a warm-up. It prints one table, each pair's median
// comparison over the rounds with its range and the medians behind it, then the figures that
// are not pairs (the relay's, relay.go; resuming a subscription, resume.go), and writes them to
// bench/RESULTS.md with the machine, the Go version, the commit, and notes on the seeding. With
// -only, it runs only the rows it names, and writes only those (an empty -results writes
// nothing); rows whose every side starts a fresh server of its own each run (the WebSocket and
// stream rows: 8, 9, S…) seed nothing.
//
// Ratios, not absolute numbers, are the result: the machines are shared and noisy, and runs
// side by side drift alike.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/postsedge/caddy-posts/bench/wsload"
)

type config struct {
	caddy, caddyfile, pocketBase, gqlgen, results, profile string
	only                                                   *regexp.Regexp
	conc, rounds                                           int
	duration, warmup                                       time.Duration
}

func main() {
	if ok, err := child(os.Args[1:]); ok {
		if err != nil {
			log.Fatal(err)
		}
		return
	}
	var cfg config
	var only string
	flag.StringVar(&cfg.caddy, "caddy", "./caddy", "the Caddy binary with the posts module")
	flag.StringVar(&cfg.caddyfile, "caddyfile", "bench/Caddyfile.bench", "the bench Caddyfile")
	flag.StringVar(&cfg.pocketBase, "pocketbase", "bench/pocketbase", "the PocketBase peer's module, built when a P pair runs")
	flag.StringVar(&cfg.gqlgen, "gqlgen", "bench/gqlbare", "the gqlgen server's module, built when a G or Rg pair runs")
	flag.StringVar(&cfg.results, "results", "bench/RESULTS.md", "where the table is written; empty: nowhere")
	flag.StringVar(&cfg.profile, "profile", "", "if set, a directory for a CPU profile of each side of each pair, taken in one extra run after the rounds "+
		"(of a WebSocket or stream side served by Caddy: its heap and goroutines with its subscribers idle, in each round, the last kept)")
	flag.StringVar(&only, "only", "", "run only the pairs whose id matches this regular expression")
	flag.IntVar(&cfg.conc, "c", 16, "concurrent connections of every run")
	flag.IntVar(&cfg.rounds, "rounds", 5, "measured rounds of each pair")
	flag.DurationVar(&cfg.duration, "d", 3*time.Second, "duration of each measured run")
	flag.DurationVar(&cfg.warmup, "warmup", time.Second, "duration of each side's warm-up run")
	flag.Parse()
	cfg.only = regexp.MustCompile("^(?:" + only + ")$")
	if only == "" {
		cfg.only = regexp.MustCompile("")
	}
	log.SetFlags(log.Ltime)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, cfg config) error {
	dir, err := os.MkdirTemp("", "caddy-posts-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if cfg.profile != "" {
		if err := os.MkdirAll(cfg.profile, 0o755); err != nil {
			return err
		}
	}

	began := time.Now()
	var notes []string
	var done []*pair
	chosen := slices.DeleteFunc(pairs(&env{}), func(p *pair) bool { return !cfg.only.MatchString(p.id) })
	if len(chosen) > 0 {
		var e *env
		if slices.ContainsFunc(chosen, func(p *pair) bool { return !p.fresh() }) {
			e, err = start(ctx, cfg, dir, slices.ContainsFunc(peerPairs, cfg.only.MatchString), slices.ContainsFunc(gqlgenPairs, cfg.only.MatchString),
				slices.ContainsFunc(tracingPairs, cfg.only.MatchString))
			if err == nil {
				log.Printf("every server is up and seeded, and the sides of each pair answer alike")
			}
		} else {
			// Every side starts a server of its own: nothing to seed.
			e, err = startFresh(cfg, dir)
		}
		if err != nil {
			return err
		}
		defer e.close()
		for _, p := range pairs(e) {
			if !cfg.only.MatchString(p.id) {
				continue
			}
			if err := measure(ctx, cfg, e, p); err != nil {
				return fmt.Errorf("pair %s: %w", p.id, err)
			}
			done = append(done, p)
		}
		notes = e.notes
	}
	table := ""
	if len(done) > 0 {
		table = render(done)
	}
	if cfg.only.MatchString("18a") || cfg.only.MatchString("18b") {
		log.Printf("the relay's figures: two instances on one FerretDB")
		fig, err := measureRelay(ctx, cfg, filepath.Join(dir, "relay"))
		if err != nil {
			return fmt.Errorf("the relay's figures: %w", err)
		}
		table += renderRelay(fig)
	}
	if slices.ContainsFunc(resumeRows, cfg.only.MatchString) {
		log.Printf("the resume figures: a subscriber resumes %s events behind", thousands(resumeBehind))
		fig, err := measureResume(ctx, cfg, filepath.Join(dir, "resume"))
		if err != nil {
			return fmt.Errorf("the resume figures: %w", err)
		}
		table += renderResume(fig, cfg)
	}
	fmt.Print("\n" + table)
	log.Printf("the run took %s", time.Since(began).Round(time.Second))
	if cfg.results == "" {
		return nil
	}
	report := fmt.Sprintf("# Benchmark results\n\nWritten by `make bench` (bench/run); every line compares two sides measured "+
		"alternately in one run (%d rounds of %s after a %s warm-up of each, at %d connections of bench/run's load generator, closed loop, "+
		"unless a line names a fixed rate, one client or a number of requests). "+
		"The comparison is the median over the rounds, then its range; the medians behind it follow. "+
		"The machine is shared with other work: the ratios, measured side by side, are the result, more than the absolute numbers.\n\n%s\n%s",
		cfg.rounds, cfg.duration, cfg.warmup, cfg.conc, describe(), table)
	for _, n := range notes {
		report += "\n- " + n
	}
	report += fmt.Sprintf("\n- The run took %s.\n", time.Since(began).Round(time.Second))
	return os.WriteFile(cfg.results, []byte(report), 0o644)
}

// measure runs the warm-up and the rounds of p, and then, with -profile, one profiled run of each side.
func measure(ctx context.Context, cfg config, e *env, p *pair) error {
	if p.of != nil {
		if len(p.of.out.runs) == 0 {
			if err := measure(ctx, cfg, e, p.of); err != nil {
				return err
			}
		}
		ra, rb := p.of.out.runs[p.a.name], p.of.out.runs[p.b.name]
		for i := range ra {
			p.record(ra[i], rb[i])
		}
		return nil
	}
	rate := 0.0
	if p.rate != nil {
		if rate = p.rate(); !(rate > 0) {
			return errors.New("its fixed rate comes from a pair that has not run (see -only)")
		}
		log.Printf("pair %s: fixed rate %.0f req/s", p.id, rate)
	}
	run := func(s side, d time.Duration) (result, error) {
		if s.ws != nil {
			profile := ""
			if cfg.profile != "" {
				profile = filepath.Join(cfg.profile, fmt.Sprintf("pair%s-%s", p.id, s.name))
			}
			if p.wsRun != nil {
				return p.wsRun(ctx, s.ws, profile)
			}
			open := s.open
			if open == nil {
				open = openWS(wsload.Init(e.apiKey))
			}
			return fanOut(ctx, s.ws, open, profile)
		}
		if p.settle != nil {
			if err := p.settle(ctx); err != nil {
				return result{}, err
			}
		}
		return load(ctx, s.req, cmp.Or(p.conc, cfg.conc), d, p.requests, rate)
	}
	all := append([]side{p.a, p.b}, p.also...)
	for _, s := range all {
		if s.ws != nil {
			continue // every run starts a fresh server and warms it
		}
		if _, err := run(s, cfg.warmup); err != nil {
			return fmt.Errorf("%s warm-up: %w", s.name, err)
		}
	}
	for round := range cfg.rounds {
		sides := slices.Clone(all)
		if round%2 == 1 {
			slices.Reverse(sides)
		}
		runs := map[string]result{}
		for _, s := range sides {
			r, err := run(s, cfg.duration)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			runs[s.name] = r
		}
		for _, s := range p.also {
			p.keep(s.name, runs[s.name])
			log.Printf("pair %s round %d: %s %s", p.id, round+1, s.name, p.metric.format(p.metric.of(runs[s.name])))
		}
		p.record(runs[p.a.name], runs[p.b.name])
	}
	if cfg.profile == "" {
		return nil
	}
	for _, s := range []side{p.a, p.b} {
		if s.profile == "" {
			continue
		}
		name := filepath.Join(cfg.profile, fmt.Sprintf("pair%s-%s.pprof", p.id, s.name))
		if err := profiled(ctx, cfg, p, s, rate, name); err != nil {
			return fmt.Errorf("profiling %s: %w", s.name, err)
		}
		log.Printf("pair %s: profile of %s in %s", p.id, s.name, name)
	}
	return nil
}

// profiled takes a CPU profile of the process that serves s (Caddy through its admin endpoint,
// the others through the /debug/pprof of their own) for the duration of a run, while it runs
// s's requests: again and again, if a run is shorter.
func profiled(ctx context.Context, cfg config, p *pair, s side, rate float64, name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer f.Close()
	got := make(chan error, 1)
	go func() {
		res, err := http.Get(s.profile + "/profile?seconds=" + strconv.Itoa(int(cfg.duration.Seconds())))
		if err == nil {
			_, err = io.Copy(f, res.Body)
			res.Body.Close()
		}
		got <- err
	}()
	// The requests are logged with the profile, so its samples can be read per request.
	requests, seconds := 0, 0.0
	for {
		r, err := load(ctx, s.req, cmp.Or(p.conc, cfg.conc), cfg.duration+500*time.Millisecond, p.requests, rate)
		if err != nil {
			return errors.Join(err, <-got)
		}
		requests, seconds = requests+len(r.latencies), seconds+r.seconds
		select {
		case err := <-got:
			log.Printf("pair %s: profiled %s over %d requests at %.0f req/s", p.id, s.name, requests, float64(requests)/seconds)
			return err
		default:
		}
	}
}

// render writes the table, in Markdown.
func render(done []*pair) string {
	var b strings.Builder
	b.WriteString("| # | measured | target | median | min–max | A: median | B: median | met |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, p := range done {
		met := "info"
		target := "—"
		if p.met != nil {
			target = p.target
			met = "**no**"
			if p.met(median(p.out.cmp)) {
				met = "yes"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s – %s | %s %s | %s %s | %s |\n",
			p.id, p.what, target, p.formatCmp(median(p.out.cmp)),
			p.formatCmp(slices.Min(p.out.cmp)), p.formatCmp(slices.Max(p.out.cmp)),
			p.a.name, p.metric.format(median(p.out.a)), p.b.name, p.metric.format(median(p.out.b)), met)
	}
	return b.String()
}

// describe names when and where the run was: date, machine, Go, commit.
func describe() string {
	cpu, cores := "unknown CPU", 0
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			name, value, _ := strings.Cut(line, ":")
			switch strings.TrimSpace(name) {
			case "model name":
				cpu = strings.TrimSpace(value)
			case "processor":
				cores++
			}
		}
	}
	mem := "unknown memory"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					mem = fmt.Sprintf("%.1f GiB", kb/(1<<20))
				}
			}
		}
	}
	commit := "unknown"
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
		// What was measured is the working tree: say when it is not the commit.
		if out, err := exec.Command("git", "status", "--porcelain").Output(); err == nil && len(out) > 0 {
			commit += " with uncommitted changes"
		}
	}
	return fmt.Sprintf("- date: %s\n- machine: %s, %d cores, %s memory (%s/%s)\n- Go: %s\n- commit: %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), cpu, cores, mem, runtime.GOOS, runtime.GOARCH, runtime.Version(), commit)
}
