package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/postsedge/caddy-posts/bench/wsload"
)

// resumeRows are the ids of the resume figures' rows, measured when -only matches one.
var resumeRows = []string{"Ra", "Rb", "Rc"}

// The resume figures (rows R): on a fresh ./caddy (bench/Caddyfile.bench, its large store's
// site, empty) each round, one subscriber (graphql-transport-ws) takes the cursor of an event
// (extensions.cursor), resumeBehind posts are created after it through REST, and a new
// subscriber resumes from it (extensions.resumeFrom): the server replays the resumeBehind events
// from its log, then goes live. Right after the first replayed event arrives, one post is
// created (the live write), whose event must come after the last replayed one. Timed from the
// subscribe message: the first replayed event, and the live event; and the server's resident
// memory (VmRSS) right before the subscribe message and right after the live event (its peak
// in between, read every 5 ms in a trial, was never higher).
const (
	resumeBehind   = 1000
	resumeQuery    = `subscription { postCreated { id title } }`
	resumeTimeout  = 30 * time.Second // from the subscribe message to the live event, at most
	resumeLiveName = "live"
)

// resumeFigures are what measureResume found, a value per round.
type resumeFigures struct {
	first, live []time.Duration
	rss         []int64 // the memory right after the live event, less right before the subscribe
}

// measureResume runs cfg.rounds rounds, each on a fresh server in a directory of dir.
func measureResume(ctx context.Context, cfg config, dir string) (fig resumeFigures, err error) {
	e := &env{caddyBin: cfg.caddy, caddyfile: cfg.caddyfile, dir: dir, conc: cfg.conc, apiKey: "bench-" + rand.Text()}
	defer e.close()
	if err := e.startIDP(); err != nil {
		return fig, err
	}
	for round := range cfg.rounds {
		first, live, rss, err := e.resumeRound(ctx, filepath.Join(dir, fmt.Sprintf("resume-%d", round)))
		if err != nil {
			return fig, fmt.Errorf("round %d: %w", round+1, err)
		}
		log.Printf("resume round %d: the first replayed event %s, the live one %s after the subscribe message; VmRSS %+d KiB",
			round+1, first.Round(time.Microsecond), live.Round(time.Microsecond), rss>>10)
		fig.first, fig.live, fig.rss = append(fig.first, first), append(fig.live, live), append(fig.rss, rss)
	}
	return fig, nil
}

// resumeRound is one round on a fresh server in dir.
func (e *env) resumeRound(ctx context.Context, dir string) (first, live time.Duration, rss int64, err error) {
	p, err := e.startCaddy(ctx, dir)
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() { p.stop(); _ = os.RemoveAll(dir) }()
	base := p.sites["READ"]
	url := strings.Replace(base, "http://", "ws://", 1) + "/graphql"
	create := func(ctx context.Context, title string) error {
		status, body, err := do(ctx, "POST", base+"/posts", fmt.Sprintf(`{"title": %q}`, title), "Authorization: ApiKey "+e.apiKey)
		if err == nil && status != http.StatusCreated {
			err = fmt.Errorf("POST /posts: %d %s", status, body)
		}
		return err
	}

	cursor, err := e.anchorCursor(ctx, url, create)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("the cursor to resume from: %w", err)
	}
	if _, _, err := postAll(ctx, e.conc, base+"/posts", slices.Repeat([]seedPost{{title: "behind", body: "lorem ipsum"}}, resumeBehind),
		http.StatusCreated, func(p seedPost) (string, []string) {
			body, _ := json.Marshal(newPostJSON{Title: p.title, Body: p.body})
			return string(body), []string{"Authorization: ApiKey " + e.apiKey}
		}); err != nil {
		return 0, 0, 0, err
	}

	c, err := dialGraphQL(ctx, url, wsload.Init(e.apiKey))
	if err != nil {
		return 0, 0, 0, err
	}
	defer c.CloseNow()
	time.Sleep(wsIdle) // the writes' garbage collected, as in the memory pairs
	pid := p.proc.cmd.Process.Pid
	before, err := wsload.ResidentMemory(pid)
	if err != nil {
		return 0, 0, 0, err
	}
	subscribe, _ := json.Marshal(map[string]any{"id": "1", "type": "subscribe",
		"payload": map[string]any{"query": resumeQuery, "extensions": map[string]any{"resumeFrom": cursor}}})
	rctx, cancel := context.WithTimeout(ctx, resumeTimeout)
	defer cancel()
	began := time.Now()
	if err := c.Write(rctx, websocket.MessageText, subscribe); err != nil {
		return 0, 0, 0, err
	}
	var wrote sync.WaitGroup
	var writeErr error
	defer wrote.Wait()
	for replayed := 0; ; {
		title, _, err := nextEvent(rctx, c)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("after %d replayed events: %w", replayed, err)
		}
		if title == resumeLiveName {
			live = time.Since(began)
			if replayed != resumeBehind {
				return 0, 0, 0, fmt.Errorf("the live event came after %d replayed events; want %d", replayed, resumeBehind)
			}
			break
		}
		if title != "behind" || replayed == resumeBehind {
			return 0, 0, 0, fmt.Errorf("event %d of the replay is %q; want %d events of posts titled behind, then %q", replayed+1, title, resumeBehind, resumeLiveName)
		}
		if replayed++; replayed == 1 {
			first = time.Since(began)
			wrote.Go(func() { writeErr = create(rctx, resumeLiveName) })
		}
	}
	after, err := wsload.ResidentMemory(pid)
	if err != nil {
		return 0, 0, 0, err
	}
	wrote.Wait()
	if writeErr != nil {
		return 0, 0, 0, fmt.Errorf("the live write: %w", writeErr)
	}
	return first, live, after - before, c.Close(websocket.StatusNormalClosure, "")
}

// anchorCursor subscribes and creates posts until one reaches the subscriber (its subscription
// is in place once the server has read it), and returns the cursor of the last one that came:
// the events after it are the ones created from then on.
func (e *env) anchorCursor(ctx context.Context, url string, create func(context.Context, string) error) (string, error) {
	c, err := dialGraphQL(ctx, url, wsload.Init(e.apiKey))
	if err != nil {
		return "", err
	}
	defer c.CloseNow()
	subscribe, _ := json.Marshal(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": resumeQuery}})
	if err := c.Write(ctx, websocket.MessageText, subscribe); err != nil {
		return "", err
	}
	// A read whose context ends closes the connection (coder/websocket): one goroutine reads,
	// the waits are on its channel.
	type event struct {
		title, cursor string
		err           error
	}
	events := make(chan event, 16)
	go func() {
		for {
			title, cursor, err := nextEvent(ctx, c)
			events <- event{title, cursor, err}
			if err != nil {
				return
			}
		}
	}()
	cursor := ""
	for try := 0; try < 5 && cursor == ""; try++ {
		if err := create(ctx, "anchor"); err != nil {
			return "", err
		}
		// Every anchor that comes, until none has for a while: the last one's cursor.
	wait:
		for wait := 2 * time.Second; ; wait = 200 * time.Millisecond {
			select {
			case <-time.After(wait):
				break wait
			case ev := <-events:
				if ev.err != nil {
					return "", ev.err
				}
				switch {
				case ev.cursor == "":
					return "", fmt.Errorf("an event of %q without a cursor", ev.title)
				case ev.title == "anchor":
					cursor = ev.cursor
				} // else the post of startCaddy's first write, whose event may come late
			}
		}
	}
	if cursor == "" {
		return "", errors.New("no anchor reached the subscriber in 5 tries")
	}
	return cursor, c.Close(websocket.StatusNormalClosure, "")
}

// dialGraphQL opens a graphql-transport-ws connection to url and initialises it with init.
func dialGraphQL(ctx context.Context, url string, init []byte) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{wsload.Subprotocol}})
	if err != nil {
		return nil, err
	}
	if err := c.Write(ctx, websocket.MessageText, init); err != nil {
		c.CloseNow()
		return nil, err
	}
	_, data, err := c.Read(ctx)
	var ack struct{ Type string }
	if err == nil && (json.Unmarshal(data, &ack) != nil || ack.Type != "connection_ack") {
		err = fmt.Errorf("got %s; want connection_ack", data)
	}
	if err != nil {
		c.CloseNow()
		return nil, err
	}
	return c, nil
}

// nextEvent reads the next event of operation 1, skipping pings, and returns its post's title
// and its cursor; any other message is an error.
func nextEvent(ctx context.Context, c *websocket.Conn) (title, cursor string, err error) {
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return "", "", err
		}
		var m struct {
			ID, Type string
			Payload  struct {
				Data struct {
					PostCreated struct{ Title string }
				}
				Extensions struct{ Cursor string }
			}
		}
		if err := json.Unmarshal(data, &m); err != nil {
			return "", "", fmt.Errorf("a message that is not JSON: %.200s", data)
		}
		switch {
		case m.Type == "ping":
			if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"pong"}`)); err != nil {
				return "", "", err
			}
		case m.Type == "pong":
		case m.Type != "next" || m.ID != "1":
			return "", "", fmt.Errorf("got %.300s; want an event of operation 1", data)
		default:
			return m.Payload.Data.PostCreated.Title, m.Payload.Extensions.Cursor, nil
		}
	}
}

// renderResume writes the resume figures' table, in Markdown.
func renderResume(fig resumeFigures, cfg config) string {
	ms := func(ds []time.Duration) []float64 {
		out := make([]float64, len(ds))
		for i, d := range ds {
			out[i] = float64(d.Microseconds()) / 1e3
		}
		return out
	}
	kib := func(bs []int64) []float64 {
		out := make([]float64, len(bs))
		for i, b := range bs {
			out[i] = float64(b) / 1024
		}
		return out
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Resuming a subscription\n\nOne subscriber (graphql-transport-ws) resumes with `extensions.resumeFrom` from the cursor of an event "+
		"%s events behind (%s posts created after it through REST, %d connections), on a fresh ./caddy each round (%d rounds); right after the "+
		"first replayed event has come, one post is created (the live write), whose event comes after the %s replayed. "+
		"Times from the subscribe message. "+
		"The median over the rounds, then its range.\n\n", thousands(resumeBehind), thousands(resumeBehind), cfg.conc, cfg.rounds, thousands(resumeBehind))
	b.WriteString("| # | measured | target | median | min–max | met |\n|---|---|---|---|---|---|\n")
	row := func(id, what, unit, format string, v []float64) {
		f := func(x float64) string { return fmt.Sprintf(format, x) + " " + unit }
		fmt.Fprintf(&b, "| %s | %s | — | %s | %s – %s | info |\n", id, what, f(median(v)), f(slices.Min(v)), f(slices.Max(v)))
	}
	row("Ra", "resume from a cursor 1,000 events behind: the first replayed event", "ms", "%.1f", ms(fig.first))
	row("Rb", "the same: the first live event, after the 1,000 replayed", "ms", "%.1f", ms(fig.live))
	row("Rc", "the same: the server's resident memory right after the live event, less right before the subscribe message", "KiB", "%+.0f", kib(fig.rss))
	return b.String()
}
