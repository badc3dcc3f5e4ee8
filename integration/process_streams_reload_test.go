//go:build integration

// Subscriptions streamed over HTTP across the life of a Caddy process: reloads that keep the
// site, reloads that remove it or change its keys, and the process's exit.
package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/internal/race"
)

// reloadSubscriber follows a stream as its client would: an SSE client reconnects with the id of
// the last event it got (as EventSource does), a multipart client has no such thing (Apollo
// Client does not resume).
type reloadSubscriber struct {
	kind string

	mu         sync.Mutex
	titles     []string // of the events it got, in order
	lastID     string
	reconnects int   // SSE: how often its stream was cut and it came back
	cut        error // multipart: how its stream ended before the test ended it
}

// follow reads stream until ctx ends.
func (s *reloadSubscriber) follow(ctx context.Context, client *http.Client, base string, stream *streamedSub) {
	for {
		ev, err := stream.next()
		if err == nil && ev.result != nil {
			title, terr := titleOf(ev.result)
			s.mu.Lock()
			s.titles = append(s.titles, title)
			if ev.id != "" {
				s.lastID = ev.id
			}
			s.mu.Unlock()
			if terr == nil {
				continue
			}
			err = terr
		}
		stream.close()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = fmt.Errorf("the stream ended with %+v", ev)
		}
		s.mu.Lock()
		if s.kind == overMultipart {
			s.cut = err
			s.mu.Unlock()
			return
		}
		s.reconnects++
		lastID := s.lastID
		s.mu.Unlock()
		for {
			stream, err = openStreamed(ctx, client, overSSE, base, postCreatedTitles, "Last-Event-ID", lastID)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			time.Sleep(100 * time.Millisecond) // EventSource waits its retry, seconds by default
		}
	}
}

func (s *reloadSubscriber) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.titles)
}

// TestStreamsAcrossTenReloadsUnderLoadMissNoEvent reloads a process ten times, changing only
// max_limit, while 20 SSE and 20 multipart subscribers listen and two writers post without a
// pause: every subscriber gets every post once, in the one order of the event log, and the
// streams are held across the reloads (an SSE stream that were cut would come back with
// Last-Event-ID and still miss nothing; a multipart stream cut would lose events).
func TestStreamsAcrossTenReloadsUnderLoadMissNoEvent(t *testing.T) {
	ownProcesses(t)
	const perKind, reloads, writers = 20, 10, 2
	dir := t.TempDir()
	port, admin := freePort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	config := func(maxLimit int) string {
		return processConfig(admin, port, fmt.Sprintf("\t\tdata_dir %s\n\t\tmax_limit %d", dir, maxLimit))
	}
	p := startProcess(t, config(100), port)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	client := streamClient()
	var subscribers []*reloadSubscriber
	var readers sync.WaitGroup
	for i := range 2 * perKind {
		kind := []string{overSSE, overMultipart}[i%2]
		stream, err := openStreamed(ctx, client, kind, p.url, postCreatedTitles)
		if err != nil {
			t.Fatal(err)
		}
		s := &reloadSubscriber{kind: kind}
		subscribers = append(subscribers, s)
		readers.Go(func() { s.follow(ctx, client, p.url, stream) })
	}

	// The writers: each its posts one after the other, so that their order is known; a POST that
	// failed on its connection may or may not be stored, and is not counted either way.
	stop := make(chan struct{})
	var load sync.WaitGroup
	var mu sync.Mutex
	var written []string
	uncertain := map[string]bool{}
	for w := range writers {
		load.Go(func() {
			client := &http.Client{Timeout: 10 * time.Second, Transport: keyTransport{&http.Transport{DisableKeepAlives: true}}}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				title := fmt.Sprintf("w%d %d", w, i)
				id, err := p.create(client, title)
				mu.Lock()
				switch {
				case err != nil:
					uncertain[title] = true
				case id != "":
					written = append(written, title)
				default:
					t.Errorf("POST %q was not answered 201", title)
				}
				mu.Unlock()
			}
		})
	}

	var took []time.Duration
	for i := range reloads {
		time.Sleep(time.Second)
		start := time.Now()
		adminLoad(t, admin, config(50+i))
		took = append(took, time.Since(start))
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	load.Wait()

	missing := 0
	waitUntil(t, "every subscriber has every post written", func() bool {
		missing = 0
		for _, s := range subscribers {
			got := s.got()
			for _, title := range written {
				if !slices.Contains(got, title) {
					missing++
				}
			}
		}
		return missing == 0
	})
	cancel()
	readers.Wait()

	// One order: the log's, the same for each; in it each writer's posts in the order it wrote
	// them; each post once.
	var reference []string
	reconnected, cut := 0, 0
	for i, s := range subscribers {
		got := s.got()
		if reference == nil {
			reference = got
		} else if !slices.Equal(got, reference) {
			t.Errorf("subscriber %d (%s) got its %d events in another order or set than subscriber 0's %d", i, s.kind, len(got), len(reference))
		}
		seen := map[string]bool{}
		last := make([]int, writers)
		for w := range last {
			last[w] = -1
		}
		for _, title := range got {
			if seen[title] {
				t.Errorf("subscriber %d (%s) got %q twice", i, s.kind, title)
			}
			seen[title] = true
			var w, n int
			if _, err := fmt.Sscanf(title, "w%d %d", &w, &n); err != nil || w >= writers {
				t.Errorf("subscriber %d (%s) got an event of no writer: %q", i, s.kind, title)
				continue
			}
			if n <= last[w] {
				t.Errorf("subscriber %d (%s) got %q after post %d of the same writer", i, s.kind, title, last[w])
			}
			last[w] = n
		}
		mu.Lock()
		for title := range seen {
			if !slices.Contains(written, title) && !uncertain[title] {
				t.Errorf("subscriber %d (%s) got %q, which was never written", i, s.kind, title)
			}
		}
		mu.Unlock()
		reconnected += s.reconnects
		if s.cut != nil {
			cut++
			t.Errorf("a multipart stream ended during the reloads: %v", s.cut)
		}
	}
	slices.Sort(took)
	t.Logf("%d reloads, each took %v to %v (median %v); %d posts written (%d failed on their connection), %d deliveries to %d subscribers, 0 missed",
		reloads, took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), took[len(took)/2].Round(time.Millisecond),
		len(written), len(uncertain), len(written)*len(subscribers), len(subscribers))
	t.Logf("held across the reloads: SSE streams reconnected %d times, multipart streams cut %d times", reconnected, cut)
	if len(written) < 10*reloads {
		t.Errorf("%d posts written in %d s; the load was too light to show anything", len(written), reloads)
	}
	p.stop()
}

// checkEnded checks that stream ends as a transport's end tells each framing's client: SSE's
// response ends with no complete, for EventSource to reconnect; multipart's with a part of
// errors of code, then the closing boundary. It returns when the stream ended.
func checkEnded(stream *streamedSub, code string) (time.Time, error) {
	for {
		ev, err := stream.next()
		at := time.Now()
		switch {
		case stream.kind == overSSE && errors.Is(err, errStreamCut):
			return at, nil
		case err != nil:
			return at, err
		case ev.result != nil:
			continue // an event written before the end
		case stream.kind == overSSE:
			return at, fmt.Errorf("the SSE stream ended with %+v; want the response's end alone, for EventSource to reconnect", ev)
		case ev.errors == nil:
			return at, fmt.Errorf("the multipart stream ended with %+v; want a part of errors first", ev)
		}
		if codes := errorCodes(ev.errors); !slices.Equal(codes, []string{code}) {
			return at, fmt.Errorf("the multipart stream ended with the errors %s; want one of code %s", ev.errors, code)
		}
		if last, err := stream.next(); err != nil || !last.complete {
			return at, fmt.Errorf("after its errors, the multipart stream: %+v %v; want the closing boundary", last, err)
		}
		return at, nil
	}
}

// TestAReloadThatRemovesTheSiteOrChangesItsKeysEndsTheStreams: the streams of a site whose keys
// change, or that a reload removes, end within the 5 s over which a reload spreads the closes
// (SSE with no complete, so that EventSource reconnects and resumes under the new keys; multipart
// with SERVICE_RESTART); until then they went on.
func TestAReloadThatRemovesTheSiteOrChangesItsKeysEndsTheStreams(t *testing.T) {
	ownProcesses(t)
	const perKind = 5
	dir := t.TempDir()
	port, admin := freePort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	config := func(key string) string {
		return fmt.Sprintf("{\n\tadmin %s\n\tpersist_config off\n\tgrace_period 5s\n}\nhttp://:%d {\n\tposts {\n\t\tdata_dir %s\n\t\tapi_key %s alice\n\t}\n}\n", admin, port, dir, key)
	}
	p := startProcess(t, config("first-key"), port)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	client := streamClient()
	post := func(key, title string) {
		t.Helper()
		req, _ := http.NewRequest("POST", p.url+"/posts", strings.NewReader(fmt.Sprintf(`{"title": %q}`, title)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "ApiKey "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("POST %q: %d", title, res.StatusCode)
		}
	}
	// endAll opens the streams with key, has reload end them, and checks how and when.
	endAll := func(t *testing.T, key, reloadTo string) (lastID string) {
		var streams []*streamedSub
		for i := range 2 * perKind {
			s, err := openStreamed(ctx, client, []string{overSSE, overMultipart}[i%2], p.url, postCreatedTitles, "Authorization", "ApiKey "+key)
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			streams = append(streams, s)
		}
		post(key, "before the reload")
		for _, s := range streams {
			for {
				ev, err := s.next()
				if err != nil {
					t.Fatalf("a %s stream before the reload: %v", s.kind, err)
				}
				if title, _ := titleOf(ev.result); title == "before the reload" {
					if s.kind == overSSE {
						lastID = ev.id
					}
					break
				}
			}
		}
		start := time.Now()
		adminLoad(t, admin, reloadTo)
		loaded := time.Since(start)
		var first, last time.Duration
		for i, s := range streams {
			at, err := checkEnded(s, "SERVICE_RESTART")
			if err != nil {
				t.Errorf("stream %d: %v", i, err)
			}
			after := at.Sub(start)
			if i == 0 || after < first {
				first = after
			}
			last = max(last, after)
		}
		t.Logf("the reload took %v; the %d streams ended from %v to %v after it began",
			loaded.Round(time.Millisecond), len(streams), first.Round(time.Millisecond), last.Round(time.Millisecond))
		if !race.Enabled && last > 8*time.Second {
			t.Errorf("the last stream ended %v after the reload began; want within 5s and a margin of 3", last)
		}
		return lastID
	}

	t.Run("a reload that changes the site's API keys ends its streams; an SSE client resumes under the new key", func(t *testing.T) {
		lastID := endAll(t, "first-key", config("second-key"))
		post("second-key", "while away")
		s, err := openStreamed(ctx, client, overSSE, p.url, postCreatedTitles, "Authorization", "ApiKey second-key", "Last-Event-ID", lastID)
		if err != nil {
			t.Fatal(err)
		}
		defer s.close()
		if ev, err := s.next(); err != nil {
			t.Fatal(err)
		} else if title, err := titleOf(ev.result); err != nil || title != "while away" {
			t.Errorf("the SSE client back with Last-Event-ID got first %s %v; want the post written while it was away", ev.result, err)
		}
	})
	t.Run("a reload that removes the site ends its streams", func(t *testing.T) {
		endAll(t, "second-key", fmt.Sprintf("{\n\tadmin %s\n\tpersist_config off\n\tgrace_period 5s\n}\nhttp://:%d {\n\trespond \"no posts here\"\n}\n", admin, port))
	})
	p.stop()
}

// TestStoppingCaddyEndsTheStreamsAtOnce: Caddy's grace period is forever by default, and a stream
// is a request that never ends by itself; yet a process told to stop, with open SSE and multipart
// streams over HTTP/1.1 and HTTP/2, exits at once, and its streams end as an exit tells their
// clients (SSE with no complete, multipart with SHUTTING_DOWN).
func TestStoppingCaddyEndsTheStreamsAtOnce(t *testing.T) {
	ownProcesses(t)
	const perKind = 10 // per protocol
	for _, how := range []string{"SIGINT", "SIGTERM", "caddy stop"} {
		t.Run("told by "+how, func(t *testing.T) {
			port, admin := freePort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t))
			p := startProcess(t, fmt.Sprintf("{\n\tadmin %s\n\tpersist_config off\n\tservers {\n\t\tprotocols h1 h2c\n\t}\n}\nhttp://:%d {\n\tposts {\n\t\tdata_dir %s\n\t\tapi_key process-key alice\n\t}\n}\n",
				admin, port, t.TempDir()), port)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var streams []*streamedSub
			for _, client := range []*http.Client{streamClient(), h2cClient()} {
				for i := range 2 * perKind {
					s, err := openStreamed(ctx, client, []string{overSSE, overMultipart}[i%2], p.url, postCreatedTitles)
					if err != nil {
						t.Fatal(err)
					}
					defer s.close()
					streams = append(streams, s)
				}
			}
			start := time.Now()
			switch how {
			case "SIGINT":
				p.cmd.Process.Signal(os.Interrupt)
			case "SIGTERM":
				p.cmd.Process.Signal(syscall.SIGTERM)
			case "caddy stop":
				if out, err := caddyCommand(t, nil, "stop", "--address", admin).CombinedOutput(); err != nil {
					t.Fatalf("caddy stop: %v\n%s", err, out)
				}
			}
			var ends sync.WaitGroup
			for _, s := range streams {
				ends.Go(func() {
					if _, err := checkEnded(s, "SHUTTING_DOWN"); err != nil {
						t.Errorf("a %s stream over %s: %v", s.kind, s.res.Proto, err)
					}
				})
			}
			ends.Wait()
			streamsEnded := time.Since(start)
			select {
			case err := <-p.done:
				if err != nil {
					t.Errorf("caddy run ended with %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("caddy run did not exit in 30s")
			}
			exited := time.Since(start)
			t.Logf("with %d streams open (SSE and multipart, HTTP/1.1 and h2c), they ended within %v, and the process exited %v after it was told",
				len(streams), streamsEnded.Round(time.Millisecond), exited.Round(time.Millisecond))
			if !race.Enabled && exited > 3*time.Second {
				t.Errorf("the process took %v to exit; want within 3s", exited)
			}
		})
	}
}
