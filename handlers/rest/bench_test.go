package rest

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/handlers/request"
	"github.com/postsedge/caddy-posts/store"

	"github.com/postsedge/caddy-posts/posts"
)

// The benchmarks of the REST shapes and of the WebSocket message: each runs the handler's own
// function on a request or a post built once, with no store and no network, so allocs/op are
// the shape's alone.

// discard is a ResponseWriter that keeps only its header map, emptied for each response.
type discard struct{ header http.Header }

func (w *discard) Header() http.Header         { return w.header }
func (w *discard) Write(b []byte) (int, error) { return len(b), nil }
func (w *discard) WriteHeader(int)             {}

// rewindable is a request body that can be read again.
type rewindable struct{ bytes.Reader }

func (*rewindable) Close() error { return nil }

// BenchmarkDecode reads a request body as POST /posts (create) and PATCH /posts/{id} (update)
// do: request.Object (media type, size limit, members) and then the members.
func BenchmarkDecode(b *testing.B) {
	tests := []struct {
		name, contentType, body string
		read                    func([]request.Member) error
	}{
		{"post", "application/json", `{"title": "Hello, world", "body": "A first post, as short as most of them are."}`,
			func(ms []request.Member) error { _, err := newPost(ms); return err }},
		{"patch", "application/merge-patch+json", `{"title": "Hello again", "body": null}`,
			func(ms []request.Member) error { _, err := changes(ms); return err }},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			body := &rewindable{}
			r := httptest.NewRequest(http.MethodPost, "/posts", body)
			r.Header.Set("Content-Type", tt.contentType)
			r.ContentLength = int64(len(tt.body))
			w := &discard{header: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				body.Reset([]byte(tt.body))
				members, err := request.Object(w, r, 1<<20, "application/json", "application/merge-patch+json")
				if err == nil {
					err = tt.read(members)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncode writes a post as GET /posts/{id} does, and a page of 20 as GET /posts does.
func BenchmarkEncode(b *testing.B) {
	page := make([]posts.Post, 20)
	for i := range page {
		created := time.Date(2026, 11, 21, 4, 35, 44, 36_000_000, time.UTC).Add(-time.Duration(i) * time.Minute)
		body := fmt.Sprintf("The body of post %d, a few sentences long as a post's body often is. It says what it says.", i)
		page[i] = posts.Post{ID: store.NewID(created), UserID: "alice", Title: fmt.Sprintf("Post number %d", i), Body: &body, CreatedAt: created, UpdatedAt: created}
	}
	tests := []struct {
		name  string
		write func(http.ResponseWriter)
	}{
		{"post", func(w http.ResponseWriter) { writePost(w, http.StatusOK, page[0]) }},
		{"page_of_20", func(w http.ResponseWriter) { writePage(w, http.StatusOK, page) }},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			w := &discard{header: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.header)
				tt.write(w)
			}
		})
	}
}
