package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/postsedge/caddy-posts/bench/wsload"
)

// The requests of PocketBase's record API that the P pairs send (see bench/pocketbase).
const (
	pbRecords = "/api/collections/posts/records"
	pbNewest  = "?perPage=20&sort=-created,-id&skipTotal=1" // skipTotal: no COUNT of the whole table
)

// startPocketBase builds the PocketBase peer of bench/pocketbase in src (its own module, whose
// newer Go the go command fetches as a toolchain: GOTOOLCHAIN=auto), serves it on a fresh data
// directory, and seeds it through its API with the posts of the large store.
func (e *env) startPocketBase(ctx context.Context, src string) error {
	bin := filepath.Join(e.dir, "pbbench")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "GOTOOLCHAIN=auto")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in %s: %v\n%s", src, err, out)
	}
	addrs, err := freeAddrs(2)
	if err != nil {
		return err
	}
	p, err := spawn(bin, []string{"serve", "-dir", filepath.Join(e.dir, "pocketbase"), "-addr", addrs[0], "-pprof", addrs[1]},
		nil, filepath.Join(e.dir, "pocketbase.log"))
	if err != nil {
		return err
	}
	e.closers = append(e.closers, p.stop)
	if err := p.listening(ctx, addrs[0]); err != nil {
		return err
	}
	e.pb, e.pbProfile = "http://"+addrs[0]+pbRecords, "http://"+addrs[1]+"/debug/pprof"

	// Anyone may create a post there: the author is in the body.
	ps := seedPosts(largePosts)
	out, run, err := postAll(ctx, e.conc, e.pb, ps, http.StatusOK, func(p seedPost) (string, []string) {
		body, _ := json.Marshal(newPostJSON{UserID: p.user, Title: p.title, Body: p.body})
		return string(body), nil
	})
	if err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	e.pbStore = seededFrom(ps, out, run)
	// Newest first as PocketBase lists them: -created,-id.
	e.pbStore.newest = slices.SortedFunc(slices.Values(out), func(a, b created) int {
		return -cmp.Or(strings.Compare(a.Created, b.Created), strings.Compare(a.ID, b.ID))
	})
	log.Printf("%d posts seeded through %s in %.1fs (%.0f posts/s)", largePosts, e.pb, run.seconds, run.throughput())
	rss, err := wsload.ResidentMemory(p.cmd.Process.Pid)
	if err != nil {
		return err
	}
	e.note("PocketBase", run, rss, "its one store")
	return nil
}

// checkPocketBase fails unless PocketBase answers the P pairs' requests as they expect, and
// notes the sizes of the answers on both sides.
func (e *env) checkPocketBase(ctx context.Context) error {
	var sizes []string
	for _, c := range []struct {
		what                 string
		ours, theirs         string // URLs
		oursBody, theirsBody string // a POST's, if set
	}{
		{what: "get by id", ours: e.read + "/posts/" + e.large.ids[7], theirs: e.pb + "/" + e.pbStore.ids[7]},
		{what: "newest 20", ours: e.read + "/posts?limit=20", theirs: e.pb + pbNewest},
		{what: "create", ours: e.read + "/posts", theirs: e.pb, oursBody: createBody(""), theirsBody: createBody(author)},
	} {
		var got [2]int
		for i, url := range []string{c.ours, c.theirs} {
			method, body, want, headers := "GET", "", http.StatusOK, []string(nil)
			if c.oursBody != "" {
				method, body, want = "POST", c.theirsBody, http.StatusOK
				if i == 0 {
					body, want, headers = c.oursBody, http.StatusCreated, []string{"Authorization: ApiKey " + e.apiKey}
				}
			}
			status, answer, err := do(ctx, method, url, body, headers...)
			if err != nil || status != want {
				return fmt.Errorf("%s %s: %d %.300s, %v; want %d", method, url, status, answer, err, want)
			}
			if c.what == "newest 20" && strings.Count(string(answer), `"title"`) != 20 {
				return fmt.Errorf("GET %s: %.300s; want 20 posts", url, answer)
			}
			got[i] = len(answer)
		}
		sizes = append(sizes, fmt.Sprintf("%s %d and %d bytes", c.what, got[0], got[1]))
	}
	e.notes = append(e.notes, "The answers of the P pairs, caddy-posts and PocketBase: "+strings.Join(sizes, "; ")+
		" (PocketBase adds collectionId and collectionName to every post).")
	return nil
}

// createBody is the body of the POST that the create pairs send; user, when set, is its author,
// for PocketBase, where the author is in the body.
func createBody(user string) string {
	body, _ := json.Marshal(newPostJSON{UserID: user, Title: "benchmark", Body: "a post written over and over"})
	return string(body)
}
