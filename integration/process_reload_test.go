//go:build integration

// Reloads of a Caddy process: no request fails, nothing is left after the last unload.
package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store/sqlite"
)

// TestAReloadUnderLoadFailsNoRequest reloads the config six times under reads and writes: the
// store is shared across the reloads, so no request is answered with an error.
//
// A reload also closes the old server's connections, and a request sent on one as it closes
// fails on the connection, whatever the handler: a `respond` site in place of the posts one
// loses as many requests (7 to 17 of ~6,000 over six reloads, measured with this test). Those
// are Caddy's, and counted, not failed on.
func TestAReloadUnderLoadFailsNoRequest(t *testing.T) {
	ownProcesses(t)
	dir := t.TempDir()
	port, admin := freePort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	config := func(maxLimit int) string {
		return processConfig(admin, port, fmt.Sprintf("\t\tdata_dir %s\n\t\tmax_limit %d", dir, maxLimit))
	}
	p := startProcess(t, config(100), port)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, writes, errorAnswers, lost atomic.Int64
	var firstFailure atomic.Value
	fail := func(what any) {
		errorAnswers.Add(1)
		firstFailure.CompareAndSwap(nil, fmt.Sprint(what))
	}
	for w := range 8 {
		wg.Go(func() {
			client := keyed()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if w%2 == 0 {
					writes.Add(1)
					switch id, err := p.create(client, fmt.Sprint("reload ", w, " ", i)); {
					case err != nil:
						lost.Add(1)
					case id == "":
						fail("a POST was not answered 201")
					}
					continue
				}
				reads.Add(1)
				res, err := client.Get(p.url + "/posts?limit=20")
				if err != nil {
					lost.Add(1)
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					fail(res.Status)
				}
			}
		})
	}
	for i := range 6 {
		time.Sleep(300 * time.Millisecond)
		adminLoad(t, admin, config(50+i))
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("%d reads and %d writes across 6 reloads; %d failed on their connection", reads.Load(), writes.Load(), lost.Load())
	if n := errorAnswers.Load(); n > 0 {
		t.Errorf("%d requests were answered with an error; the first: %v", n, firstFailure.Load())
	}
	if total := reads.Load() + writes.Load(); lost.Load() > total/20 {
		t.Errorf("%d of %d requests failed on their connection: more than reloads account for", lost.Load(), total)
	}
	p.stop()
}

// leakFrames are what the stack of a goroutine the posts handler left would hold. (The module's
// own package is in the main goroutine's stack in this test binary, so it is not among them.)
var leakFrames = []string{"database/sql", "modernc.org/sqlite", "caddy-posts/store", "caddy-posts/posts",
	"caddy-posts/events", "caddy-posts/handlers", "caddy-posts/schema", "caddy-posts/auth"}

// TestNothingIsLeftAfterTheLastConfigIsUnloaded loads a config without the posts handler into a
// process that served one, and looks at the process from outside: its open files and its
// goroutines.
func TestNothingIsLeftAfterTheLastConfigIsUnloaded(t *testing.T) {
	ownProcesses(t)
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc to list a process's open files")
	}
	dir := t.TempDir()
	port, admin := freePort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := startProcess(t, processConfig(admin, port, "\t\tdata_dir "+dir), port)
	for i := range 20 {
		if _, err := p.create(keyed(), fmt.Sprint("post ", i)); err != nil {
			t.Fatal(err)
		}
	}
	openFiles := func() []string {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
		var inDir []string
		for _, fd := range fds {
			if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.cmd.Process.Pid, fd.Name())); err == nil && strings.HasPrefix(target, dir) {
				inDir = append(inDir, target)
			}
		}
		return inDir
	}
	if len(openFiles()) == 0 {
		t.Fatal("the serving process has no file of the data_dir open: the check below could not fail")
	}

	adminLoad(t, admin, fmt.Sprintf("{\n\tadmin %s\n\tpersist_config off\n}\nhttp://:%d {\n\trespond \"no posts\"\n}\n", admin, port))
	var stacks string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res, err := http.Get("http://" + admin + "/debug/pprof/goroutine?debug=2")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		stacks = string(b)
		leaked := slices.ContainsFunc(leakFrames, func(f string) bool { return strings.Contains(stacks, f) })
		if (len(openFiles()) == 0 && !leaked) || time.Now().After(deadline) {
			break
		}
	}
	if files := openFiles(); len(files) > 0 {
		t.Errorf("the process still has these files open: %v", files)
	}
	for _, frame := range leakFrames {
		if strings.Contains(stacks, frame) {
			t.Errorf("a goroutine in %s is left:\n%s", frame, stacks)
		}
	}
	if s, err := sqlite.Open(dir, sqlite.Options{}); err != nil {
		t.Errorf("the data_dir is still locked: %v", err)
	} else {
		s.Close()
	}
	p.stop()
}
