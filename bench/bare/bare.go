// Package bare is the hand-written baseline of the benchmarks: what a user would write without
// the module, plain net/http and database/sql on the module's SQLite file, through the same
// driver (modernc.org/sqlite) with the same settings (WAL, synchronous NORMAL, one writer
// connection and a pool of read-only ones, prepared statements, the keyset list query), answering
// the same JSON as the posts API with the same validators (ETag, Last-Modified), and nothing else
// (no GraphQL, no events, no profile writes, no bearer tokens). bench/run serves it in a process of its own next to Caddy, on the file of one
// of Caddy's sites (WAL lets a second process open it). OpenWithEvents makes the one exception:
// its POST /posts logs the post's event in the module's events table, in the post's transaction,
// as the module's store does, so that the two sides of a comparison of writes do the same work.
// Every POST /posts puts the post's words into the search's index in its transaction, as the
// module's store does: the file's triggers keep them for it, and on a file written by both, the
// module's next write would otherwise index what bare left.
package bare

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/postsedge/caddy-posts/store"
)

// The module's defaults: its time format (RFC 3339 in UTC with milliseconds), its store
// timeout, its largest body and its page sizes.
const (
	timeFormat   = "2006-01-02T15:04:05.000Z07:00"
	timeout      = 5 * time.Second
	maxBody      = 1 << 20
	defaultLimit = 20
	maxLimit     = 100
)

// The queries: the module's table, and its two keyset orders, each served by an index.
const (
	columns       = `id, user_id, title, body, created_at, updated_at, version`
	getSQL        = `SELECT ` + columns + ` FROM posts WHERE id = ?`
	listSQL       = `SELECT ` + columns + ` FROM posts WHERE (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?`
	listByUserSQL = `SELECT ` + columns + ` FROM posts WHERE user_id = ? AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?`
	insertSQL     = `INSERT INTO posts (` + columns + `) VALUES (?, ?, ?, ?, ?, ?, ?)`
	// indexWordsSQL puts the words that the file's triggers keep for the search's index into it,
	// in the insert's transaction, as the module's store does (store/sqlite, indexWords); on a
	// file whose triggers were dropped it finds nothing to put.
	indexWordsSQL = `DELETE FROM post_words_due`
	// The event of a created post, in the module's log, at the position after the last the log
	// gave (the module's rule, store/sqlite/events.go): its position comes back.
	logEventSQL = `INSERT INTO events (position, at, kind, post_id, user_id, title, body, created_at, updated_at, version)
		VALUES ((SELECT max(coalesce((SELECT max(position) FROM events), 0), event_log.floor) FROM event_log) + 1,
		?, 'created', ?, ?, ?, ?, ?, ?, ?) RETURNING position`
)

// Post is a post as stored.
type Post struct {
	ID, UserID, Title    string
	Body                 *string
	CreatedAt, UpdatedAt time.Time
	Version              int64
}

// postJSON is a post as the API writes it.
type postJSON struct {
	ID        string  `json:"id"`
	UserID    string  `json:"userId"`
	Title     string  `json:"title"`
	Body      *string `json:"body,omitempty"`
	CreatedAt string  `json:"createdAt"`
	UpdatedAt string  `json:"updatedAt"`
	Version   int64   `json:"version"`
}

func toJSON(p Post) postJSON {
	return postJSON{
		ID: p.ID, UserID: p.UserID, Title: p.Title, Body: p.Body,
		CreatedAt: p.CreatedAt.UTC().Format(timeFormat), UpdatedAt: p.UpdatedAt.UTC().Format(timeFormat), Version: p.Version,
	}
}

// Server serves GET /posts/{id}, GET /posts?userId=&limit=&after= and POST /posts from one
// posts.db.
type Server struct {
	read, write                *sql.DB
	get, list, listByUser, ins *sql.Stmt
	indexWords                 *sql.Stmt
	logEvent                   *sql.Stmt         // OpenWithEvents only
	keys                       map[string]string // API key → user id
	mux                        *http.ServeMux
}

// Open returns a Server on the SQLite file at path, whose schema the module made, that accepts
// the API keys (key → user id) for POST.
func Open(path string, keys map[string]string) (*Server, error) { return open(path, keys, false) }

// OpenWithEvents is Open whose POST /posts inserts the post and its event in one transaction:
// BEGIN, INSERT the post, INSERT its event RETURNING its position, COMMIT, one request at a time
// on the writer, as a user who logs events would write it.
func OpenWithEvents(path string, keys map[string]string) (*Server, error) {
	return open(path, keys, true)
}

func open(path string, keys map[string]string, events bool) (s *Server, err error) {
	s = &Server{keys: keys, mux: http.NewServeMux()}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	// One writer, as SQLite has one writer at a time anyway; BEGIN IMMEDIATE so a write never
	// upgrades a read lock and fails busy.
	if s.write, err = sql.Open("sqlite", dsn(path, "immediate", "synchronous(NORMAL)", "journal_mode(WAL)")); err != nil {
		return s, err
	}
	s.write.SetMaxOpenConns(1)
	s.read, err = sql.Open("sqlite", dsn(path, "deferred", "query_only(1)"))
	if err != nil {
		return s, err
	}
	readers := max(4, 2*runtime.GOMAXPROCS(0))
	s.read.SetMaxOpenConns(readers)
	s.read.SetMaxIdleConns(readers)
	for _, p := range []struct {
		db    *sql.DB
		stmt  **sql.Stmt
		query string
	}{
		{s.read, &s.get, getSQL}, {s.read, &s.list, listSQL}, {s.read, &s.listByUser, listByUserSQL}, {s.write, &s.ins, insertSQL},
		{s.write, &s.indexWords, indexWordsSQL},
	} {
		if *p.stmt, err = p.db.Prepare(p.query); err != nil {
			return s, fmt.Errorf("preparing %q: %w", p.query, err)
		}
	}
	if events {
		if s.logEvent, err = s.write.Prepare(logEventSQL); err != nil {
			return s, fmt.Errorf("preparing %q: %w", logEventSQL, err)
		}
	}
	s.mux.HandleFunc("GET /posts/{id}", s.getPost)
	s.mux.HandleFunc("GET /posts", s.listPosts)
	s.mux.HandleFunc("POST /posts", s.create)
	return s, nil
}

// dsn names the file at path for the driver, with the pragmas each connection runs.
func dsn(path, txlock string, pragmas ...string) string {
	q := url.Values{"_txlock": {txlock}}
	for _, p := range append([]string{"busy_timeout(5000)", "cache_size(-16000)", "foreign_keys(1)", "temp_store(MEMORY)"}, pragmas...) {
		q.Add("_pragma", p)
	}
	return (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String()
}

// Close closes the statements and the connections.
func (s *Server) Close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.get, s.list, s.listByUser, s.ins, s.indexWords, s.logEvent} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	for _, db := range []*sql.DB{s.read, s.write} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}

// ServeHTTP routes the request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// row is a *sql.Row or *sql.Rows.
type row interface{ Scan(dest ...any) error }

func scan(r row) (p Post, err error) {
	var created, updated int64
	err = r.Scan(&p.ID, &p.UserID, &p.Title, &p.Body, &created, &updated, &p.Version)
	p.CreatedAt, p.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	return p, err
}

func (s *Server) getPost(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	p, err := scan(s.get.QueryRowContext(ctx, r.PathValue("id")))
	if err != nil {
		storeError(w, err)
		return
	}
	setValidators(w.Header(), p)
	writeJSON(w, http.StatusOK, toJSON(p))
}

// A cursor is the module's (posts/cursor.go): a post's createdAt in Unix milliseconds (8
// bytes), its id (the 12 bytes of its 24 hex characters) and the digest of its list (8 bytes:
// the first of the SHA-256 of the list's user id and the four zero bytes that end the
// module's digest of a list with no search, no time range, newest first), base64url without
// padding.
const (
	keySize    = 8 + 12
	digestSize = 8
	cursorSize = keySize + digestSize
)

// digest is the digest of the list of user's posts (every post's, for "").
func digest(user string) []byte {
	sum := sha256.Sum256(append([]byte(user), 0, 0, 0, 0))
	return sum[:digestSize]
}

func cursor(p Post, user string) string {
	var b [cursorSize]byte
	binary.BigEndian.PutUint64(b[:8], uint64(p.CreatedAt.UnixMilli()))
	hex.Decode(b[8:keySize], []byte(p.ID))
	copy(b[keySize:], digest(user))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// after returns the place the cursor of the list of user's posts names: its createdAt in Unix
// milliseconds and its id.
func after(c, user string) (int64, string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) != cursorSize || !bytes.Equal(b[keySize:], digest(user)) {
		return 0, "", false
	}
	return int64(binary.BigEndian.Uint64(b[:8])), hex.EncodeToString(b[8:keySize]), true
}

func (s *Server) listPosts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			http.Error(w, "limit must be from 1 to 100", http.StatusBadRequest)
			return
		}
		limit = n
	}
	// The first page starts after a key that every post comes after.
	afterMs, afterID := int64(math.MaxInt64), ""
	user := q.Get("userId")
	if c := q.Get("after"); c != "" {
		var ok bool
		if afterMs, afterID, ok = after(c, user); !ok {
			http.Error(w, "after is not a cursor", http.StatusBadRequest)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	// One more post than the page tells whether there is a next page.
	var rows *sql.Rows
	var err error
	if user == "" {
		rows, err = s.list.QueryContext(ctx, afterMs, afterID, limit+1)
	} else {
		rows, err = s.listByUser.QueryContext(ctx, user, afterMs, afterID, limit+1)
	}
	if err != nil {
		storeError(w, err)
		return
	}
	defer rows.Close()
	found := make([]Post, 0, limit+1)
	for rows.Next() {
		p, err := scan(rows)
		if err != nil {
			storeError(w, err)
			return
		}
		found = append(found, p)
	}
	if err := rows.Err(); err != nil {
		storeError(w, err)
		return
	}
	if len(found) > limit {
		found = found[:limit]
		next := url.Values{"after": {cursor(found[limit-1], user)}}
		if q.Has("limit") {
			next.Set("limit", strconv.Itoa(limit))
		}
		if user != "" {
			next.Set("userId", user)
		}
		w.Header().Set("Link", fmt.Sprintf(`</posts?%s>; rel="next"`, next.Encode()))
	}
	out := make([]postJSON, 0, len(found))
	for _, p := range found {
		out = append(out, toJSON(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "ApiKey ")
	user, ok := s.keys[key]
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
	// The API's id format (ObjectID layout) is taken from the module rather than copied.
	p := Post{ID: store.NewID(now), UserID: user, Title: in.Title, Body: in.Body, CreatedAt: now, UpdatedAt: now, Version: 1}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	if err := s.insert(ctx, p); err != nil {
		storeError(w, err)
		return
	}
	w.Header().Set("Location", "/posts/"+p.ID)
	setValidators(w.Header(), p)
	writeJSON(w, http.StatusCreated, toJSON(p))
}

// insert stores p, with its event if the server logs events, and its words in the search's
// index, in one transaction.
func (s *Server) insert(ctx context.Context, p Post) error {
	args := []any{p.ID, p.UserID, p.Title, p.Body, p.CreatedAt.UnixMilli(), p.UpdatedAt.UnixMilli(), p.Version}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.StmtContext(ctx, s.ins).ExecContext(ctx, args...); err != nil {
		return err
	}
	if s.logEvent != nil {
		var position int64
		if err := tx.StmtContext(ctx, s.logEvent).QueryRowContext(ctx, time.Now().UnixMilli(), p.ID, p.UserID, p.Title, p.Body,
			p.CreatedAt.UnixMilli(), p.UpdatedAt.UnixMilli(), p.Version).Scan(&position); err != nil {
			return err
		}
	}
	if _, err := tx.StmtContext(ctx, s.indexWords).ExecContext(ctx); err != nil {
		return err
	}
	return tx.Commit()
}

// setValidators sets the ETag and Last-Modified the module sends with a post: its version in
// quotes, and updatedAt.
func setValidators(h http.Header, p Post) {
	h.Set("ETag", `"`+strconv.FormatInt(p.Version, 10)+`"`)
	h.Set("Last-Modified", p.UpdatedAt.UTC().Format(http.TimeFormat))
}

func storeError(w http.ResponseWriter, err error) {
	if errors.Is(err, sql.ErrNoRows) {
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
