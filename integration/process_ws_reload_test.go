//go:build integration

// Reloads of a Caddy process under subscribers and requests: the measurement.
package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestReloadsUnderLoadCloseNoSubscriberAndMissNoEvent reloads a process ten times, changing only
// max_limit, while 20 graphql-ws subscribers listen, posts are written at 5 a second and GETs
// run: no subscriber is closed, none misses a post, and the GETs fail on their connection no
// more often than those of a `respond` site of the same process under the same reloads.
func TestReloadsUnderLoadCloseNoSubscriberAndMissNoEvent(t *testing.T) {
	ownProcesses(t)
	const subscribers, reloads, getters = 20, 10, 3
	dir := t.TempDir()
	port, plainPort, admin := freePort(t), freePort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	config := func(maxLimit int) string {
		return fmt.Sprintf("{\n\tadmin %s\n\tpersist_config off\n\tgrace_period 5s\n}\n"+
			"http://:%d {\n\tposts {\n\t\tdata_dir %s\n\t\tmax_limit %d\n\t\tapi_key process-key alice\n\t}\n}\n"+
			"http://:%d {\n\trespond \"plain\"\n}\n", admin, port, dir, maxLimit, plainPort)
	}
	p := startProcess(t, config(100), port)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	// The subscribers: what each got, and whether it was closed before the test closed it.
	got := make([]map[string]bool, subscribers)
	var gotMu sync.Mutex
	var closedEarly atomic.Int64
	var readers sync.WaitGroup
	for i := range subscribers {
		got[i] = map[string]bool{}
		ws := p.subscribe(ctx, t, `{}`)
		readers.Go(func() {
			for {
				_, data, err := ws.Read(ctx)
				if err != nil {
					if ctx.Err() == nil {
						closedEarly.Add(1)
						t.Errorf("subscriber %d closed: %v", i, err)
					}
					return
				}
				var m struct {
					Type    string
					Payload struct {
						Data struct{ PostCreated struct{ Title string } }
					}
				}
				if json.Unmarshal(data, &m) == nil && m.Type == "next" {
					gotMu.Lock()
					got[i][m.Payload.Data.PostCreated.Title] = true
					gotMu.Unlock()
				}
			}
		})
	}
	// A first post reaches all of them: every subscription runs before the load starts. A
	// subscribe may still be on its way under a loaded machine: first posts are written until
	// every subscriber has one.
	everyoneHasAFirst := func() bool {
		gotMu.Lock()
		defer gotMu.Unlock()
	next:
		for _, g := range got {
			for title := range g {
				if strings.HasPrefix(title, "first") {
					continue next
				}
			}
			return false
		}
		return true
	}
	for i, deadline := 0, time.Now().Add(20*time.Second); !everyoneHasAFirst(); i++ {
		if time.Now().After(deadline) {
			t.Fatal("after 20s, not every subscriber has a first post")
		}
		if _, err := p.create(keyed(), fmt.Sprint("first ", i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
	}

	stop := make(chan struct{})
	var load sync.WaitGroup
	var written []string // the titles answered 201
	// And as many POSTs to the respond site: unlike GETs, which Go's client sends again when the
	// server closed their connection before answering, a POST fails on it.
	var writeErrors, plainWriteErrors int
	plainURL := fmt.Sprintf("http://127.0.0.1:%d/", plainPort)
	load.Go(func() {
		client := keyed()
		tick := time.NewTicker(200 * time.Millisecond) // 5 posts a second
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			title := fmt.Sprint("post ", i)
			switch id, err := p.create(client, title); {
			case err != nil:
				writeErrors++
			case id != "":
				written = append(written, title)
			}
			if res, err := client.Post(plainURL, "application/json", strings.NewReader(`{"title": "plain"}`)); err != nil {
				plainWriteErrors++
			} else {
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}
	})
	type tally struct{ requests, connErrors, badAnswers atomic.Int64 }
	var posts, plain tally
	for _, side := range []struct {
		url string
		t   *tally
	}{{p.url + "/posts?limit=20", &posts}, {plainURL, &plain}} {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: getters}}
		for range getters {
			load.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					side.t.requests.Add(1)
					res, err := client.Get(side.url)
					if err != nil {
						side.t.connErrors.Add(1)
						continue
					}
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						side.t.badAnswers.Add(1)
					}
				}
			})
		}
	}

	for i := range reloads {
		time.Sleep(time.Second)
		adminLoad(t, admin, config(50+i))
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	load.Wait()

	// Every post answered 201 reaches every subscriber.
	missed := 0
	waitUntil(t, "every subscriber has every post written", func() bool {
		gotMu.Lock()
		defer gotMu.Unlock()
		missed = 0
		for _, g := range got {
			for _, title := range written {
				if !g[title] {
					missed++
				}
			}
		}
		return missed == 0
	})
	cancel()
	readers.Wait()
	t.Logf("%d reloads: %d posts written, %d deliveries missed, %d subscribers closed",
		reloads, len(written), missed, closedEarly.Load())
	t.Logf("failed on their connection: posts site %d of %d GETs and %d of the POSTs; respond site %d of %d GETs and %d of as many POSTs",
		posts.connErrors.Load(), posts.requests.Load(), writeErrors, plain.connErrors.Load(), plain.requests.Load(), plainWriteErrors)
	if n := posts.badAnswers.Load() + plain.badAnswers.Load(); n > 0 {
		t.Errorf("%d GETs were answered with another status than 200", n)
	}
	// A request sent on a connection as the old server closes it fails whatever the handler:
	// the posts site may lose as many as the respond site, and a few more by chance.
	const margin = 3
	if mine, theirs := posts.connErrors.Load()+int64(writeErrors), plain.connErrors.Load()+int64(plainWriteErrors); mine > theirs+margin {
		t.Errorf("the posts site's requests failed %d times on their connection, the respond site's %d: more than %d apart", mine, theirs, margin)
	}
	if len(written) < 5*reloads*8/10 {
		t.Errorf("%d posts written in %d s; want about 5 a second", len(written), reloads)
	}
	p.stop()
}

// waitUntil waits up to 15 s for ok (a loaded machine is slow), and fails the test with what
// otherwise.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 15s, not yet: %s", what)
		}
	}
}

// TestStoppingCaddyClosesTheWebSocketsAtOnce: a process that exits does not spread the closes
// as a reload does; its clients are told with 1001 before it is gone.
func TestStoppingCaddyClosesTheWebSocketsAtOnce(t *testing.T) {
	ownProcesses(t)
	port, admin := freePort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := startProcess(t, processConfig(admin, port, "\t\tdata_dir "+t.TempDir()), port)
	ws := p.subscribe(t.Context(), t, `{}`)
	start := time.Now()
	p.stop()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, _, err := ws.Read(ctx)
	if code := websocket.CloseStatus(err); code != websocket.StatusGoingAway {
		t.Errorf("after the process stopped: %v; want a close with 1001", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the process took %v to stop", took)
	}
}
