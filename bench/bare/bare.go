// Package bare is the hand-written baseline of the benchmarks: what a user would write without
// the module, plain net/http and mongo-driver v2 with the same store calls and the same JSON as
// the posts API, and nothing else (no GraphQL, no events, no profile writes, one API key).
// bench/run serves it in its own process next to Caddy, on the same embedded store.
package bare

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// timeFormat is the module's: RFC 3339 in UTC with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// timeout bounds every store call, as the module's default timeout does.
const timeout = 5 * time.Second

// maxBody is the largest POST body read, the module's default.
const maxBody = 1 << 20

// Post is a post as stored (bench/run seeds the store with it).
type Post struct {
	ID        bson.ObjectID `bson:"_id"`
	UserID    string        `bson:"userId"`
	Title     string        `bson:"title"`
	Body      *string       `bson:"body,omitempty"`
	CreatedAt time.Time     `bson:"createdAt"`
	UpdatedAt time.Time     `bson:"updatedAt"`
}

// postJSON is a post as the API writes it.
type postJSON struct {
	ID        string  `json:"id"`
	UserID    string  `json:"userId"`
	Title     string  `json:"title"`
	Body      *string `json:"body,omitempty"`
	CreatedAt string  `json:"createdAt"`
	UpdatedAt string  `json:"updatedAt"`
}

func toJSON(p Post) postJSON {
	return postJSON{
		ID: p.ID.Hex(), UserID: p.UserID, Title: p.Title, Body: p.Body,
		CreatedAt: p.CreatedAt.UTC().Format(timeFormat), UpdatedAt: p.UpdatedAt.UTC().Format(timeFormat),
	}
}

// Server serves GET /posts/{id}, GET /posts?userId=&limit= and POST /posts from one posts collection.
type Server struct {
	posts *mongo.Collection
	keys  map[string]string // API key → user id
	mux   *http.ServeMux
}

// New returns a Server on the posts collection that accepts the API keys (key → user id) for POST.
func New(posts *mongo.Collection, keys map[string]string) *Server {
	s := &Server{posts: posts, keys: keys, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /posts/{id}", s.get)
	s.mux.HandleFunc("GET /posts", s.list)
	s.mux.HandleFunc("POST /posts", s.create)
	return s
}

// ServeHTTP routes the request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id, err := bson.ObjectIDFromHex(r.PathValue("id"))
	if err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	var p Post
	if err := s.posts.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&p); err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toJSON(p))
}

var newestFirst = bson.D{{Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			http.Error(w, "limit must be from 1 to 100", http.StatusBadRequest)
			return
		}
		limit = n
	}
	filter := bson.D{}
	if user := q.Get("userId"); user != "" {
		filter = append(filter, bson.E{Key: "userId", Value: user})
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	cursor, err := s.posts.Find(ctx, filter, options.Find().SetSort(newestFirst).SetLimit(int64(limit)))
	if err != nil {
		storeError(w, err)
		return
	}
	found := make([]Post, 0, limit)
	if err := cursor.All(ctx, &found); err != nil {
		storeError(w, err)
		return
	}
	out := make([]postJSON, 0, len(found))
	for _, p := range found {
		out = append(out, toJSON(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	user, ok := s.keys[r.Header.Get("X-API-Key")]
	if !ok {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	var in struct {
		Title string  `json:"title"`
		Body  *string `json:"body"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&in); err != nil {
		http.Error(w, "the body is not a JSON post", http.StatusBadRequest)
		return
	}
	in.Title = strings.TrimSpace(in.Title)
	if in.Title == "" {
		http.Error(w, "title is required", http.StatusUnprocessableEntity)
		return
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	p := Post{ID: bson.NewObjectID(), UserID: user, Title: in.Title, Body: in.Body, CreatedAt: now, UpdatedAt: now}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	if _, err := s.posts.InsertOne(ctx, p); err != nil {
		storeError(w, err)
		return
	}
	w.Header().Set("Location", "/posts/"+p.ID.Hex())
	writeJSON(w, http.StatusCreated, toJSON(p))
}

func storeError(w http.ResponseWriter, err error) {
	if errors.Is(err, mongo.ErrNoDocuments) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	http.Error(w, "store unavailable", http.StatusServiceUnavailable)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = encode(w, v)
}

func encode(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// EncodePost returns the body of GET /posts/{id} for p: the bytes the module answers too.
func EncodePost(p Post) ([]byte, error) {
	var b bytes.Buffer
	err := encode(&b, toJSON(p))
	return b.Bytes(), err
}
