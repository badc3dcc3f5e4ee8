//go:build integration

// posts-copy between the embedded store and MongoDB (FerretDB), run as users run it.
package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// copyPosts is how many posts the copy tests seed: past two batches of the default 1000.
const copyPosts = 2500

func sptr(s string) *string { return &s }

// copySeedPost is post n of the seeded store: ids ascend with n; bodies none, empty, in
// several scripts, or long; versions from 1 to 7.
func copySeedPost(n int) store.Post {
	at := time.Date(2025, 3, 14, 15, 9, 26, 535_000_000, time.UTC).Add(time.Duration(n) * 1234 * time.Millisecond)
	p := store.Post{ID: fmt.Sprintf("67d44600%016x", n), UserID: []string{"alice", "bob", "carol", "dave", "émile"}[n%5],
		Title: fmt.Sprint("post ", n), CreatedAt: at, UpdatedAt: at, Version: int64(1 + n%7)}
	switch n % 6 {
	case 1:
		p.Body = sptr("")
	case 2:
		p.Title, p.Body = fmt.Sprint("Grüße 🙂 ", n), sptr("ünïcødé — 日本語 — \"quoted\" \\ <b>\n")
	case 3:
		p.Body, p.UpdatedAt = sptr(strings.Repeat("long ", 1000)), at.Add(time.Hour)
	case 4:
		p.Body = sptr(fmt.Sprint("body ", n))
	}
	return p
}

// copySeedUsers are profiles with and without a name and an email; carol has none at all.
var copySeedUsers = []store.User{
	{ID: "alice", Name: sptr("Alice"), Email: sptr("alice@example.com"), UpdatedAt: time.Date(2025, 1, 2, 3, 4, 5, 6_000_000, time.UTC)},
	{ID: "bob", UpdatedAt: time.Date(2025, 1, 3, 0, 0, 0, 0, time.UTC)},
	{ID: "dave", Name: sptr(""), UpdatedAt: time.Date(2025, 1, 4, 0, 0, 0, 0, time.UTC)},
	{ID: "émile", Name: sptr("Émile Zola"), UpdatedAt: time.Date(2025, 1, 5, 0, 0, 0, 0, time.UTC)},
}

// seedPosts are posts from to n.
func seedPosts(from, n int) []store.Post {
	var posts []store.Post
	for i := from; i <= n; i++ {
		posts = append(posts, copySeedPost(i))
	}
	return posts
}

// openDataDir opens the embedded store of dir, closed when the test ends if not before.
func openDataDir(t *testing.T, dir string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(dir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// seedDataDir stores posts 1 to n and the profiles in the embedded store of dir.
func seedDataDir(t *testing.T, dir string, n int) {
	t.Helper()
	s := openDataDir(t, dir)
	seedTarget(t, s, 1, n)
	if _, err := s.InsertUsers(t.Context(), copySeedUsers); err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// seedTarget stores posts from to n in s.
func seedTarget(t *testing.T, s store.CopyTarget, from, n int) {
	t.Helper()
	if _, err := s.InsertPosts(t.Context(), seedPosts(from, n)); err != nil {
		t.Fatal(err)
	}
}

// countPosts counts the posts of s.
func countPosts(t *testing.T, s store.CopySource) int {
	t.Helper()
	n := 0
	for _, err := range s.AllPosts(t.Context(), 1000) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// regexp1 is the submatches of the first match of pattern in text.
func regexp1(t *testing.T, pattern, text string) []string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no %s in:\n%s", pattern, text)
	}
	return m[1:]
}

// contents is every post and profile of a store, each as one line of text.
func contents(t *testing.T, s store.CopySource) (posts, users []string) {
	t.Helper()
	text := func(s *string) string {
		if s == nil {
			return "<none>"
		}
		return fmt.Sprintf("%q", *s)
	}
	for p, err := range s.AllPosts(t.Context(), 700) {
		if err != nil {
			t.Fatal(err)
		}
		posts = append(posts, fmt.Sprintf("%s %q %q %s %s %s v%d", p.ID, p.UserID, p.Title, text(p.Body),
			p.CreatedAt.Format(time.RFC3339Nano), p.UpdatedAt.Format(time.RFC3339Nano), p.Version))
	}
	for u, err := range s.AllUsers(t.Context(), 700) {
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, fmt.Sprintf("%q %s %s %s", u.ID, text(u.Name), text(u.Email), u.UpdatedAt.Format(time.RFC3339Nano)))
	}
	return posts, users
}

func dataDirContents(t *testing.T, dir string) (posts, users []string) {
	t.Helper()
	snap, err := sqlite.OpenSnapshot(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	return contents(t, snap)
}

func mongoStore(t *testing.T, uri, database string) *mongo.Store {
	t.Helper()
	s, err := mongo.Open(uri, database)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// postsCopy runs caddy posts-copy with args and returns its output and exit code.
func postsCopy(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	err := caddyCommand(t, &out, append([]string{"posts-copy"}, args...)...).Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	}
	t.Fatalf("posts-copy: %v", err)
	return "", 0
}

// copyLine matches the summary's line on posts or profiles.
var copyLine = regexp.MustCompile(`(?m)^(posts|profiles): (\d+) in the source, (\d+) on the target; (\d+) copied now, (\d+) there already$`)

// copied reads the summary: for posts and then profiles, how many the source and the target
// hold, how many were copied now and how many were there already.
func copied(t *testing.T, out string) [2][4]string {
	t.Helper()
	lines := copyLine.FindAllStringSubmatch(out, -1)
	if len(lines) != 2 {
		t.Fatalf("no summary in the output:\n%s", out)
	}
	return [2][4]string{[4]string(lines[0][2:]), [4]string(lines[1][2:])}
}

func TestPostsCopyFromSQLiteToMongoDBAndBack(t *testing.T) {
	ownProcesses(t)
	source, back := t.TempDir(), t.TempDir()+"/back"
	seedDataDir(t, source, copyPosts)
	ferret := mongotest.FerretDB(t)

	// The source is served meanwhile: the copy reads a snapshot beside it.
	port := freePort(t)
	p := startProcess(t, processConfig("off", port, "\t\tdata_dir "+source), port)
	if id, err := p.create(keyed(), "written through the API"); err != nil || id == "" {
		t.Fatalf("create: %q, %v", id, err)
	}
	wantPosts, wantUsers := copyPosts+1, len(copySeedUsers)

	t.Run("from the data_dir of a running Caddy into MongoDB", func(t *testing.T) {
		out, code := postsCopy(t, "--from", source, "--to", ferret.URI, "--to_database", "copied")
		t.Logf("posts-copy said:\n%s", out)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		want := [2][4]string{{fmt.Sprint(wantPosts), fmt.Sprint(wantPosts), fmt.Sprint(wantPosts), "0"}, {fmt.Sprint(wantUsers), fmt.Sprint(wantUsers), fmt.Sprint(wantUsers), "0"}}
		if got := copied(t, out); got != want {
			t.Errorf("summary %v; want %v:\n%s", got, want, out)
		}
		if !strings.Contains(out, "the target holds every post and profile of the source, unchanged\n") {
			t.Errorf("no verdict:\n%s", out)
		}
	})
	p.stop()

	t.Run("from MongoDB into a new data_dir", func(t *testing.T) {
		out, code := postsCopy(t, "--from", ferret.URI, "--from_database", "copied", "--to", back, "--batch_size", "333")
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		if got := copied(t, out); got[0][2] != fmt.Sprint(wantPosts) || got[1][2] != fmt.Sprint(wantUsers) {
			t.Errorf("summary %v:\n%s", got, out)
		}
	})

	t.Run("every post and profile is as it was, field by field", func(t *testing.T) {
		posts, users := dataDirContents(t, source)
		if len(posts) != wantPosts || len(users) != wantUsers {
			t.Fatalf("the source holds %d posts and %d profiles; want %d and %d", len(posts), len(users), wantPosts, wantUsers)
		}
		for name, s := range map[string]store.CopySource{"MongoDB": mongoStore(t, ferret.URI, "copied")} {
			gotPosts, gotUsers := contents(t, s)
			if !slices.Equal(gotPosts, posts) || !slices.Equal(gotUsers, users) {
				t.Errorf("%s holds other posts or profiles than the source", name)
			}
		}
		gotPosts, gotUsers := dataDirContents(t, back)
		for i := range max(len(gotPosts), len(posts)) {
			if i >= len(gotPosts) || i >= len(posts) || gotPosts[i] != posts[i] {
				t.Fatalf("post %d after the round trip differs:\n%s", i, diffLines(gotPosts, posts, i))
			}
		}
		if !slices.Equal(gotUsers, users) {
			t.Errorf("profiles after the round trip:\n%s\nwant\n%s", strings.Join(gotUsers, "\n"), strings.Join(users, "\n"))
		}
	})

	t.Run("Caddy serves the copies, on MongoDB and on the new data_dir", func(t *testing.T) {
		want := copySeedPost(2)
		for _, posts := range []string{fmt.Sprintf("\t\tmongodb_uri %s\n\t\tdatabase copied", ferret.URI), "\t\tdata_dir " + back} {
			port := freePort(t)
			p := startProcess(t, processConfig("off", port, posts), port)
			res, err := http.Get(p.url + "/posts/" + want.ID)
			if err != nil {
				t.Fatal(err)
			}
			var got struct{ Title, Body, UserID, CreatedAt string }
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if err := json.Unmarshal(body, &got); err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d %s", want.ID, res.StatusCode, body)
			}
			if got.Title != want.Title || got.Body != *want.Body || got.UserID != want.UserID || got.CreatedAt != "2025-03-14T15:09:29.003Z" {
				t.Errorf("with %q, GET serves %+v", posts, got)
			}
			p.stop()
		}
	})
}

// diffLines shows line i of got and want.
func diffLines(got, want []string, i int) string {
	line := func(lines []string) string {
		if i < len(lines) {
			return lines[i]
		}
		return "(none)"
	}
	return "got  " + line(got) + "\nwant " + line(want)
}
