package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // the profiles of the baselines this program serves as a child (-profile)
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/postsedge/caddy-posts/bench/bare"
	"github.com/postsedge/caddy-posts/bench/wsbare"
)

// The flags that make this program serve a baseline as a child process of the harness, so that
// a baseline, like Caddy and PocketBase, has a process of its own and the load generator's
// work is never counted against it:
//
//	run -bare <posts.db> <addr> <pprof addr>          bench/bare on the file; the API key in $BENCH_API_KEY
//	run -bare-events <posts.db> <addr> <pprof addr>   the same, logging each post's event (bare.OpenWithEvents)
//	run -ws-bare <addr>                               bench/wsbare
const (
	bareArg       = "-bare"
	bareEventsArg = "-bare-events"
	wsBareArg     = "-ws-bare"
)

// child serves the baseline that args name (as above) and says whether they named one.
func child(args []string) (bool, error) {
	switch {
	case len(args) == 4 && (args[0] == bareArg || args[0] == bareEventsArg):
		open := bare.Open
		if args[0] == bareEventsArg {
			open = bare.OpenWithEvents
		}
		s, err := open(args[1], map[string]string{os.Getenv("BENCH_API_KEY"): author})
		if err != nil {
			return true, err
		}
		defer s.Close()
		// The profiles are on an address of their own: the baseline serves only what a user's
		// server would.
		return true, serveUntilStopped(map[string]http.Handler{args[2]: s, args[3]: http.DefaultServeMux})
	case len(args) == 2 && args[0] == wsBareArg:
		return true, serveUntilStopped(map[string]http.Handler{args[1]: wsbare.New()})
	}
	return false, nil
}

// serveUntilStopped serves each handler on its address until SIGTERM or an interrupt.
func serveUntilStopped(handlers map[string]http.Handler) error {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	failed := make(chan error, len(handlers))
	var servers []*http.Server
	for addr, h := range handlers {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, srv)
		go func() { failed <- srv.Serve(ln) }()
	}
	var err error
	select {
	case <-stop:
	case err = <-failed:
	}
	for _, srv := range servers {
		_ = srv.Close()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// process is a server process the harness started.
type process struct {
	cmd  *exec.Cmd
	log  string        // the file of its output; "" for the harness's stderr
	done chan struct{} // closed once it has exited
}

// spawn starts bin with args, and env added to the harness's environment, writing its output
// to logPath ("" for the harness's stderr).
func spawn(bin string, args, env []string, logPath string) (*process, error) {
	p := &process{cmd: exec.Command(bin, args...), log: logPath, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	out := os.Stderr
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			return nil, err
		}
		defer f.Close() // the child has its own descriptor
		out = f
	}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop ends p with SIGTERM, or SIGKILL if it has not exited 15s later, and waits for it.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited says whether p has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// failure describes p's failure to start: why, and its output.
func (p *process) failure(why error) error {
	if p.log == "" {
		return why
	}
	out, _ := os.ReadFile(p.log)
	return fmt.Errorf("%w; its output:\n%s", why, out)
}

// listening waits until p accepts connections on addr, for at most a minute, and not once it
// has exited.
func (p *process) listening(ctx context.Context, addr string) error {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		switch {
		case p.exited():
			return p.failure(fmt.Errorf("%s exited before listening on %s", p.cmd.Path, addr))
		case time.Now().After(deadline):
			return p.failure(fmt.Errorf("%s is not listening on %s after a minute", p.cmd.Path, addr))
		case ctx.Err() != nil:
			return ctx.Err()
		}
	}
}

// serveChild starts this program again as the baseline that args name (see child), with env,
// and waits until it listens on addr.
func serveChild(ctx context.Context, addr string, env []string, args ...string) (*process, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p, err := spawn(self, args, env, "")
	if err != nil {
		return nil, err
	}
	if err := p.listening(ctx, addr); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// given are the addresses freeAddrs has returned in this run.
var given = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// freeAddrs returns n free addresses of 127.0.0.1 that it has not returned before in this run:
// a port just freed may come again, and each server needs its own, including one that listens
// only later (the upstream that Caddy's config names before the server behind it starts).
func freeAddrs(n int) ([]string, error) {
	given.Lock()
	defer given.Unlock()
	var addrs []string
	for len(addrs) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		addr := l.Addr().String()
		l.Close()
		if !given.addrs[addr] {
			given.addrs[addr] = true
			addrs = append(addrs, addr)
		}
	}
	return addrs, nil
}

// idle waits until p has used no more than a tick of CPU time (clockTick) in a third of a
// second, for at most limit.
func (p *process) idle(ctx context.Context, limit time.Duration) error {
	pid := p.cmd.Process.Pid
	last, err := cpuTime(pid)
	for deadline := time.Now().Add(limit); err == nil && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(300 * time.Millisecond)
		now, cerr := cpuTime(pid)
		if cerr != nil {
			return cerr
		}
		if now-last <= clockTick {
			return nil
		}
		last = now
	}
	return cmp.Or(err, ctx.Err(), fmt.Errorf("%s still busy after %s", p.cmd.Path, limit))
}

// clockTick is the unit of the CPU times of /proc/<pid>/stat: USER_HZ, 100 a second on every
// architecture Linux and Go share.
const clockTick = 10 * time.Millisecond

// cpuTime is the CPU time process pid has used, in user and system mode (utime and stime of
// /proc/<pid>/stat), to a clockTick.
func cpuTime(pid int) (time.Duration, error) {
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	b, err := os.ReadFile(stat)
	if err != nil {
		return 0, err
	}
	after := string(b)[strings.LastIndex(string(b), ") ")+2:] // past the command, which may hold spaces and parentheses
	f := strings.Fields(after)
	if len(f) < 13 {
		return 0, fmt.Errorf("%s: %d fields", stat, len(f))
	}
	var user, system int64
	_, err = fmt.Sscan(f[11]+" "+f[12], &user, &system) // utime and stime, fields 14 and 15
	return time.Duration(user+system) * clockTick, err
}
