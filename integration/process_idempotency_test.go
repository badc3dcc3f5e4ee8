//go:build integration

// Idempotency keys across the life of a Caddy process: a kept answer after a restart, a key
// after its TTL, and a SIGKILL between a post and its answer on MongoDB.
package integration

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/postsedge/caddy-posts/caddymodule"
	storemongo "github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// response is an answer of a process, read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

// keyedCreate POSTs body to the process's /posts with the API key of the process sites and the
// Idempotency-Key key.
func (p *caddyProcess) keyedCreate(t *testing.T, key, body string) response {
	t.Helper()
	req, err := http.NewRequest("POST", p.url+"/posts", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := keyed().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{res.StatusCode, res.Header, data}
}

// wantReplay fails unless again is first sent again, and says so.
func wantReplay(t *testing.T, again, first response) {
	t.Helper()
	if again.status != first.status || !bytes.Equal(again.body, first.body) || again.header.Get("Idempotent-Replayed") != "true" ||
		again.header.Get("Location") != first.header.Get("Location") {
		t.Errorf("the retry got %d %v %s; want %d %s, replayed", again.status, again.header, again.body, first.status, first.body)
	}
}

func TestAKeptAnswerSurvivesASIGKILL(t *testing.T) {
	ownProcesses(t)
	dir := t.TempDir()
	port := freePort(t)
	config := processConfig("off", port, "\t\tdata_dir "+dir)
	p := startProcess(t, config, port)
	first := p.keyedCreate(t, "survives", `{"title": "kept"}`)
	if first.status != http.StatusCreated {
		t.Fatalf("the first: %d %s", first.status, first.body)
	}
	p.kill()
	again := startProcess(t, config, port)
	wantReplay(t, again.keyedCreate(t, "survives", `{"title": "kept"}`), first)
	again.stop()
	if n := integrity(t, dir); n != 1 {
		t.Errorf("%d posts stored; want 1", n)
	}
}

func TestAKeyIsFreeAgainAfterIdempotencyTTL(t *testing.T) {
	ownProcesses(t)
	dir := t.TempDir()
	port := freePort(t)
	const ttl = 3 * time.Second
	p := startProcess(t, processConfig("off", port, fmt.Sprintf("\t\tdata_dir %s\n\t\tidempotency_ttl %s", dir, ttl)), port)
	sent := time.Now()
	first := p.keyedCreate(t, "short-lived", `{"title": "once"}`)
	if first.status != http.StatusCreated {
		t.Fatalf("the first: %d %s", first.status, first.body)
	}
	t.Run("a retry within the TTL gets the first answer", func(t *testing.T) {
		wantReplay(t, p.keyedCreate(t, "short-lived", `{"title": "once"}`), first)
	})
	t.Run("a retry after the TTL creates again", func(t *testing.T) {
		time.Sleep(time.Until(sent.Add(ttl + 100*time.Millisecond)))
		again := p.keyedCreate(t, "short-lived", `{"title": "once"}`)
		if again.status != http.StatusCreated || again.header.Get("Idempotent-Replayed") != "" || bytes.Equal(again.body, first.body) {
			t.Errorf("got %d %v %s; want a new post", again.status, again.header, again.body)
		}
	})
	p.stop()
	if n := integrity(t, dir); n != 2 {
		t.Errorf("%d posts stored; want 2", n)
	}
}

// holdProxy forwards TCP connections to a FerretDB's unix socket. Once armed, it swallows the
// writes to a record of the idempotency collection that are not reservations (upserts), so that
// a create's post is stored and its answer never is, as a process killed in between leaves them.
type holdProxy struct {
	addr  string
	armed atomic.Bool
	held  chan struct{} // gets a value for each write swallowed
}

func startHoldProxy(socket string) *holdProxy {
	p := &holdProxy{held: make(chan struct{}, 100)}
	p.addr = mongotest.ServeTCP(socket, func(_ net.Conn, msg []byte) bool {
		if p.armed.Load() && mongotest.CommandName(msg) == "update" && bytes.Contains(msg, []byte(storemongo.KeysCollection+"\x00")) &&
			!bytes.Contains(msg, []byte("\x08upsert\x00\x01")) {
			p.held <- struct{}{}
			return false
		}
		return true
	})
	return p
}

func TestASIGKILLBetweenAPostAndItsAnswerOnMongoDB(t *testing.T) {
	ownProcesses(t)
	ferret, err := mongotest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	client, err := storemongo.Connect(ferret.URI)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		storemongo.Disconnect(client)
		ferret.Close()
	})
	proxy := startHoldProxy(ferret.Socket)
	port := freePort(t)
	// timeout 1s: a key is held for 4 × timeout.
	config := processConfig("off", port, fmt.Sprintf("\t\tmongodb_uri mongodb://%s/?directConnection=true\n\t\ttimeout 1s", proxy.addr))
	p := startProcess(t, config, port)
	const body = `{"title": "written once"}`

	proxy.armed.Store(true)
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		req, _ := http.NewRequest("POST", p.url+"/posts", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "killed")
		if res, err := keyed().Do(req); err == nil {
			res.Body.Close() // answered before the kill or not: either way its answer was never kept
		}
	}()
	select {
	case <-proxy.held:
	case <-time.After(20 * time.Second):
		t.Fatal("the answer of the first create was never written")
	}
	t.Run("a retry while the first holds the key is 409 with Retry-After", func(t *testing.T) {
		res := p.keyedCreate(t, "killed", body)
		after, _ := strconv.Atoi(res.header.Get("Retry-After"))
		if res.status != http.StatusConflict || after < 1 || after > 4 || !bytes.Contains(res.body, []byte("still under way")) {
			t.Errorf("got %d, Retry-After %q, %s; want 409 with Retry-After from 1 to 4", res.status, res.header.Get("Retry-After"), res.body)
		}
	})
	p.kill()
	<-firstDone
	proxy.armed.Store(false)
	posts := ferretPosts(t, client, "written once")
	if len(posts) != 1 {
		t.Fatalf("%d posts stored before the restart; want 1", len(posts))
	}
	if status := keyStatus(t, client, "killed"); status != 0 {
		t.Fatalf("the key's record has status %d before the restart; want 0, under way", status)
	}

	again := startProcess(t, config, port)
	var retry response
	t.Run("a retry once the hold has ended gets a 201 of the post stored, replayed", func(t *testing.T) {
		for deadline := time.Now().Add(20 * time.Second); ; {
			retry = again.keyedCreate(t, "killed", body)
			if retry.status != http.StatusConflict || time.Now().After(deadline) {
				break
			}
			after, err := strconv.Atoi(retry.header.Get("Retry-After"))
			if err != nil || after < 1 || after > 4 {
				t.Fatalf("a 409 with Retry-After %q", retry.header.Get("Retry-After"))
			}
			time.Sleep(time.Duration(after) * time.Second)
		}
		if retry.status != http.StatusCreated || retry.header.Get("Idempotent-Replayed") != "true" ||
			!bytes.Contains(retry.body, []byte(`"id":"`+posts[0]+`"`)) || retry.header.Get("Location") != "/posts/"+posts[0] {
			t.Errorf("got %d %v %s; want a 201 of %s, replayed", retry.status, retry.header, retry.body, posts[0])
		}
	})
	t.Run("the post is stored once", func(t *testing.T) {
		if after := ferretPosts(t, client, "written once"); len(after) != 1 || after[0] != posts[0] {
			t.Errorf("stored %v; want only %s", after, posts[0])
		}
	})
	t.Run("the answer is kept now", func(t *testing.T) {
		if status := keyStatus(t, client, "killed"); status != http.StatusCreated {
			t.Errorf("the key's record has status %d; want 201", status)
		}
		wantReplay(t, again.keyedCreate(t, "killed", body), retry)
	})
	again.stop()
}

// ferretPosts lists the ids of the posts with title in the posts database of client.
func ferretPosts(t *testing.T, client *mongo.Client, title string) []string {
	t.Helper()
	cursor, err := client.Database(caddymodule.DefaultDatabase).Collection("posts").Find(t.Context(), bson.D{{Key: "title", Value: title}})
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		ID bson.ObjectID `bson:"_id"`
	}
	if err := cursor.All(t.Context(), &docs); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID.Hex()
	}
	return ids
}

// keyStatus is the status of the record of alice's key in the idempotency collection of
// client: 0 while its create is under way.
func keyStatus(t *testing.T, client *mongo.Client, key string) int {
	t.Helper()
	var doc struct {
		Status int `bson:"status"`
	}
	err := client.Database(caddymodule.DefaultDatabase).Collection(storemongo.KeysCollection).
		FindOne(t.Context(), bson.D{{Key: "_id", Value: bson.D{{Key: "userId", Value: "alice"}, {Key: "key", Value: key}}}}).Decode(&doc)
	if err != nil {
		t.Fatalf("the record of %q: %v", key, err)
	}
	return doc.Status
}
