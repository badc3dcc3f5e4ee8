package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/postsedge/caddy-posts/store/sqlite"
)

// startGQLGen builds the gqlgen server of bench/gqlbare in src (its own module, built as
// PocketBase's is: GOTOOLCHAIN=auto, should its go.mod name a newer Go than the machine's), and
// serves it on the file of Caddy's read site, where Caddy's reverse_proxy to it forwards.
func (e *env) startGQLGen(ctx context.Context, src string) error {
	bin := filepath.Join(e.dir, "gqlbare")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "GOTOOLCHAIN=auto")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in %s: %v\n%s", src, err, out)
	}
	e.gqlgenVersion = "unknown"
	if info, err := buildinfo.ReadFile(bin); err == nil {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/99designs/gqlgen" {
				e.gqlgenVersion = dep.Version
			}
		}
	}
	addr := e.caddy.upstreams["GQLGEN"]
	profiles, err := freeAddrs(1)
	if err != nil {
		return err
	}
	file := filepath.Join(e.caddy.dir, "read", sqlite.DatabaseFile)
	p, err := spawn(bin, []string{"-db", file, "-addr", addr, "-pprof", profiles[0]}, nil, filepath.Join(e.dir, "gqlbare.log"))
	if err != nil {
		return err
	}
	e.closers = append(e.closers, p.stop)
	if err := p.listening(ctx, addr); err != nil {
		return err
	}
	e.gqlgen, e.gqlgenProfile = "http://"+addr+"/graphql", "http://"+profiles[0]+"/debug/pprof"
	return nil
}

// checkGQLGen fails unless the gqlgen server, directly and through Caddy's reverse_proxy,
// answers the G rows' queries with the module's bytes (but for the newline the module ends its
// answer with, and gqlgen does not), and notes the sizes.
func (e *env) checkGQLGen(ctx context.Context) error {
	var sizes []string
	for _, q := range []struct {
		what, query, id string
		want            []byte
	}{
		{"post(id)", postQuery, e.large.ids[2], []byte(`{"data":{"post":{"id":"` + e.large.ids[2] + `","userId":"`)},
		{"a user's 10 posts", userPostsQuery, listUser, []byte(`{"data":{"user":{"posts":[{"title":"`)},
	} {
		body := graphQLBody(q.query, map[string]string{"id": q.id})
		var answers [3][]byte
		for i, url := range []string{e.read + "/graphql", e.gqlgen, e.proxyGQLGen + "/graphql"} {
			status, answer, err := do(ctx, "POST", url, body)
			if err != nil || status != http.StatusOK || !bytes.HasPrefix(answer, q.want) {
				return fmt.Errorf("POST %s %s: %d %.300s, %v; want 200 %s…", url, body, status, answer, err, q.want)
			}
			answers[i] = answer
		}
		if q.query == userPostsQuery && bytes.Count(answers[0], []byte(`"createdAt"`)) != 10 {
			return fmt.Errorf("POST %s/graphql %s: %.300s; want 10 posts", e.read, body, answers[0])
		}
		module := readCursor.ReplaceAll(bytes.TrimSuffix(answers[0], []byte("\n")), nil)
		for i, name := range []string{"the gqlgen server", "Caddy's reverse_proxy to it"} {
			if !bytes.Equal(module, bytes.TrimSuffix(answers[i+1], []byte("\n"))) {
				return fmt.Errorf("%s: the module and %s differ:\n%.500s\n%.500s", q.what, name, answers[0], answers[i+1])
			}
		}
		sizes = append(sizes, fmt.Sprintf("%s %d and %d bytes", q.what, len(answers[0]), len(answers[1])))
	}
	e.notes = append(e.notes, fmt.Sprintf("The answers of the G rows, caddy-posts and gqlgen %s (bench/gqlbare): %s "+
		"(the same JSON, but for the cursor of the read that caddy-posts adds in its extensions, and the newline it ends it with).", e.gqlgenVersion, strings.Join(sizes, "; ")))
	return nil
}

// readCursor is the extensions of a query's answer of the module, the cursor of its read
// (schema.CursorExtension), which gqlgen's answer has no counterpart of.
var readCursor = regexp.MustCompile(`,"extensions":\{"cursor":"[A-Za-z0-9_-]{23}"\}`)
