// Command run is the benchmark harness of `make bench`: it starts ./caddy with
// bench/Caddyfile.bench on a fresh embedded store, seeds it, serves the bare baseline (bench/bare)
// in this process on the same store, and runs each pair of pairs.go with hey, the two sides
// alternating (A B, B A, …) for a number of rounds after a warm-up. It prints one table, each
// pair's median comparison over the rounds with its range and the medians behind it, and writes
// it to bench/RESULTS.md with the machine, the Go version and the commit.
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
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/postsedge/caddy-posts/bench/wsload"
)

type config struct {
	caddy, caddyfile, results, profile string
	only                               *regexp.Regexp
	conc, rounds                       int
	duration, warmup                   time.Duration
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == wsBareArg {
		if err := serveWSBare(os.Args[2]); err != nil {
			log.Fatal(err)
		}
		return
	}
	var cfg config
	var only string
	flag.StringVar(&cfg.caddy, "caddy", "./caddy", "the Caddy binary with the posts module")
	flag.StringVar(&cfg.caddyfile, "caddyfile", "bench/Caddyfile.bench", "the bench Caddyfile")
	flag.StringVar(&cfg.results, "results", "bench/RESULTS.md", "where the table is written; empty: nowhere")
	flag.StringVar(&cfg.profile, "profile", "", "if set, a directory for a CPU profile of each side of each pair, taken in one extra run after the rounds")
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
	if _, err := exec.LookPath("hey"); err != nil {
		return fmt.Errorf("the load tool: %w (apt-get install -y hey)", err)
	}
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
	e, err := start(ctx, cfg.caddy, cfg.caddyfile, dir)
	if err != nil {
		return err
	}
	defer e.close()
	log.Printf("Caddy and the bare baseline are up and answer alike; %d posts seeded", 1+seedUsers*postsPerUser)

	var done []*pair
	for _, p := range pairs(e) {
		if !cfg.only.MatchString(p.id) {
			continue
		}
		if err := measure(ctx, cfg, e, p); err != nil {
			return fmt.Errorf("pair %s: %w", p.id, err)
		}
		done = append(done, p)
	}
	table := render(done)
	fmt.Print("\n" + table)
	log.Printf("the run took %s", time.Since(began).Round(time.Second))
	if cfg.results == "" {
		return nil
	}
	report := fmt.Sprintf("# Benchmark results\n\nWritten by `make bench` (bench/run); every line compares two sides measured "+
		"alternately in one run (%d rounds of %s after a %s warm-up of each, hey at %d connections, closed loop unless a fixed rate is named). "+
		"The comparison is the median over the rounds, then its range; the medians behind it follow.\n\n%s\n%s",
		cfg.rounds, cfg.duration, cfg.warmup, cfg.conc, describe(), table)
	return os.WriteFile(cfg.results, []byte(report), 0o644)
}

// measure runs the warm-up and the rounds of p, and then, with -profile, one profiled run of each side.
func measure(ctx context.Context, cfg config, e *env, p *pair) error {
	if p.of != nil {
		if len(p.of.out.runsA) == 0 {
			if err := measure(ctx, cfg, e, p.of); err != nil {
				return err
			}
		}
		for i := range p.of.out.runsA {
			p.record(p.of.out.runsA[i], p.of.out.runsB[i])
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
			return fanOut(ctx, s.ws, wsload.Init(e.apiKey))
		}
		return load(ctx, s.req, cmp.Or(p.conc, cfg.conc), d, p.requests, rate)
	}
	for _, s := range []side{p.a, p.b} {
		if s.ws != nil {
			continue // every run starts a fresh server and warms it
		}
		if _, err := run(s, cfg.warmup); err != nil {
			return fmt.Errorf("%s warm-up: %w", s.name, err)
		}
	}
	for round := range cfg.rounds {
		sides := []side{p.a, p.b}
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
		p.record(runs[p.a.name], runs[p.b.name])
	}
	if cfg.profile == "" {
		return nil
	}
	for _, s := range []side{p.a, p.b} {
		if s.ws != nil {
			continue
		}
		name := filepath.Join(cfg.profile, fmt.Sprintf("pair%s-%s.pprof", p.id, s.name))
		if err := profiled(ctx, cfg, e, p, s, rate, name); err != nil {
			return fmt.Errorf("profiling %s: %w", s.name, err)
		}
		log.Printf("pair %s: profile of %s in %s", p.id, s.name, name)
	}
	return nil
}

// profiled makes one run of s while taking a CPU profile of the process that serves it: this
// one for the bare baseline, Caddy (with the embedded store in it) through its admin endpoint
// for the rest.
func profiled(ctx context.Context, cfg config, e *env, p *pair, s side, rate float64, name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if s.bare {
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		_, err := load(ctx, s.req, cmp.Or(p.conc, cfg.conc), cfg.duration, p.requests, rate)
		pprof.StopCPUProfile()
		return err
	}
	secs := int(cfg.duration.Seconds())
	got := make(chan error, 1)
	go func() {
		res, err := http.Get(e.admin + "/debug/pprof/profile?seconds=" + strconv.Itoa(secs))
		if err == nil {
			_, err = io.Copy(f, res.Body)
			res.Body.Close()
		}
		got <- err
	}()
	_, err = load(ctx, s.req, cmp.Or(p.conc, cfg.conc), cfg.duration+500*time.Millisecond, p.requests, rate)
	return errors.Join(err, <-got)
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
	}
	return fmt.Sprintf("- date: %s\n- machine: %s, %d cores, %s memory (%s/%s)\n- Go: %s\n- commit: %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), cpu, cores, mem, runtime.GOOS, runtime.GOARCH, runtime.Version(), commit)
}
