//go:build integration

// posts-copy run again: after a part was copied, after Ctrl-C, onto a post that differs.
package integration

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
	"github.com/postsedge/caddy-posts/store/sqlite"
)

// seededAndEmpty is a data_dir of copyPosts posts, and a FerretDB whose database posts, the
// target, is empty.
func seededAndEmpty(t *testing.T) (source string, ferret *mongotest.Server, target *mongo.Store) {
	source = t.TempDir()
	seedDataDir(t, source, copyPosts)
	ferret = mongotest.FerretDB(t)
	return source, ferret, mongoStore(t, ferret.URI, "posts")
}

func TestPostsCopyCompletesWhatWasCopiedInPart(t *testing.T) {
	ownProcesses(t)
	source, ferret, target := seededAndEmpty(t)
	seedTarget(t, target, 1, 1000)    // as a copy stopped after its first batch left it
	seedTarget(t, target, 1500, 1549) // and a few further on
	allPosts, users := fmt.Sprint(copyPosts), fmt.Sprint(len(copySeedUsers))

	for _, run := range []struct {
		name string
		want [2][4]string
	}{
		{"the first run copies what is missing", [2][4]string{{allPosts, allPosts, fmt.Sprint(copyPosts - 1050), "1050"}, {users, users, users, "0"}}},
		{"a second run copies nothing, and the counts and checksums still agree", [2][4]string{{allPosts, allPosts, "0", allPosts}, {users, users, "0", users}}},
	} {
		t.Run(run.name, func(t *testing.T) {
			out, code := postsCopy(t, "--from", source, "--to", ferret.URI)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			if got := copied(t, out); got != run.want {
				t.Errorf("summary %v; want %v:\n%s", got, run.want, out)
			}
			sums := regexp1(t, `(?m)^posts: sha256 of the ids ([0-9a-f]{64}) in the source, ([0-9a-f]{64}) on the target$`, out)
			if want := idsSHA256(t, source); sums[0] != want || sums[1] != want {
				t.Errorf("the checksums are not %s, that of the ids one a line:\n%s", want, out)
			}
		})
	}
	posts, _ := contents(t, target)
	if len(posts) != copyPosts {
		t.Errorf("MongoDB holds %d posts; want %d", len(posts), copyPosts)
	}
}

// idsSHA256 is what `sqlite3 <dir>/posts.db 'SELECT id FROM posts ORDER BY id' | sha256sum`
// prints, as the help text of posts-copy says.
func idsSHA256(t *testing.T, dir string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.DatabaseFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT id FROM posts ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	sum := sha256.New()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(sum, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(sum.Sum(nil))
}

func TestPostsCopyInterruptedCompletesWhenRunAgain(t *testing.T) {
	ownProcesses(t)
	source, ferret, target := seededAndEmpty(t)

	var out lockedBuffer
	// Batches of one post: slow enough to be interrupted in the middle.
	cmd := caddyCommand(t, &out, "posts-copy", "--from", source, "--to", ferret.URI, "--batch_size", "1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n := countPosts(t, target); n >= 100 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the copy stored under 100 posts in 20s:\n%s", &out)
		}
	}
	cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the interrupted copy exited 0:\n%s", &out)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the copy went on after Ctrl-C:\n%s", &out)
	}
	if !strings.Contains(out.String(), "interrupted; what was copied stays, and the same command completes the copy") {
		t.Errorf("the output does not say it was interrupted:\n%s", &out)
	}
	stored := countPosts(t, target)
	if stored == 0 || stored >= copyPosts {
		t.Fatalf("the interrupted copy stored %d posts; want some, not all", stored)
	}

	again, code := postsCopy(t, "--from", source, "--to", ferret.URI)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, again)
	}
	// An insert the interrupted copy had sent may still commit on the server after the
	// count above, so what the second run finds is at least what was counted.
	got := copied(t, again)[0]
	now, errNow := strconv.Atoi(got[2])
	there, errThere := strconv.Atoi(got[3])
	all := fmt.Sprint(copyPosts)
	if errNow != nil || errThere != nil || got[0] != all || got[1] != all || now+there != copyPosts || there < stored || there >= copyPosts {
		t.Errorf("posts %v after %d were stored:\n%s", got, stored, again)
	}
}

func TestPostsCopyReportsAPostThatDiffersAndLeavesIt(t *testing.T) {
	ownProcesses(t)
	source, target := t.TempDir(), t.TempDir()
	seedDataDir(t, source, 30)
	changed := copySeedPost(7)
	changed.Title = "changed on the target"
	s := openDataDir(t, target)
	if _, err := s.InsertPosts(t.Context(), append(seedPosts(1, 6), changed)); err != nil {
		t.Fatal(err)
	}
	s.Close()

	out, code := postsCopy(t, "--from", source, "--to", target)
	if code == 0 {
		t.Fatalf("exit 0:\n%s", out)
	}
	for _, want := range []string{"1 posts are on the target with other content than in the source, and were left as they are (" + changed.ID + ")"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output does not say %q:\n%s", want, out)
		}
	}
	if got := copied(t, out)[0]; got != [4]string{"30", "30", "23", "7"} {
		t.Errorf("posts %v:\n%s", got, out)
	}
	posts, _ := dataDirContents(t, target)
	if len(posts) != 30 || !strings.Contains(posts[6], `"changed on the target"`) {
		t.Errorf("the target's post is now %s", posts[6])
	}
}
