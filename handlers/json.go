package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// postJSON is a post as clients see it: appendPost writes what encoding/json writes of it.
type postJSON struct {
	ID        string  `json:"id"`
	UserID    string  `json:"userId"`
	Title     string  `json:"title"`
	Body      *string `json:"body,omitempty"`
	CreatedAt string  `json:"createdAt"`
	UpdatedAt string  `json:"updatedAt"`
	Version   int64   `json:"version"`
}

func toJSON(p posts.Post) postJSON {
	return postJSON{
		ID:        p.ID,
		UserID:    p.UserID,
		Title:     p.Title,
		Body:      p.Body,
		CreatedAt: p.CreatedAt.UTC().Format(posts.TimeFormat),
		UpdatedAt: p.UpdatedAt.UTC().Format(posts.TimeFormat),
		Version:   p.Version,
	}
}

// appendPost appends p to dst as JSON, byte for byte as encoding/json writes toJSON(p) without
// HTML escaping (FuzzPostJSON holds it to that), with none of its reflection and allocations.
func appendPost(dst []byte, p posts.Post) []byte {
	dst = append(dst, `{"id":`...)
	dst = schema.AppendJSONString(dst, p.ID, false)
	dst = append(dst, `,"userId":`...)
	dst = schema.AppendJSONString(dst, p.UserID, false)
	dst = append(dst, `,"title":`...)
	dst = schema.AppendJSONString(dst, p.Title, false)
	if p.Body != nil {
		dst = append(dst, `,"body":`...)
		dst = schema.AppendJSONString(dst, *p.Body, false)
	}
	dst = append(dst, `,"createdAt":`...)
	dst = appendTime(dst, p.CreatedAt)
	dst = append(dst, `,"updatedAt":`...)
	dst = appendTime(dst, p.UpdatedAt)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, p.Version, 10)
	return append(dst, '}')
}

// appendTime appends t as a JSON string in posts.TimeFormat, in UTC: no character of the format
// needs escaping.
func appendTime(dst []byte, t time.Time) []byte {
	return append(t.UTC().AppendFormat(append(dst, '"'), posts.TimeFormat), '"')
}

// writePost writes p as the JSON answer with status, as answer.WriteJSON would write toJSON(p).
func writePost(w http.ResponseWriter, status int, p posts.Post) {
	b := answer.GetBuffer()
	*b = append(appendPost(*b, p), '\n')
	writeBytes(w, status, *b)
	answer.PutBuffer(b)
}

// writePage writes ps as the JSON array answer with status, as answer.WriteJSON would write the
// array of their toJSON.
func writePage(w http.ResponseWriter, status int, ps []posts.Post) {
	b := answer.GetBuffer()
	*b = append(*b, '[')
	for i, p := range ps {
		if i > 0 {
			*b = append(*b, ',')
		}
		*b = appendPost(*b, p)
	}
	*b = append(*b, ']', '\n')
	writeBytes(w, status, *b)
	answer.PutBuffer(b)
}

// writeBytes writes body, JSON, as the answer with status.
func writeBytes(w http.ResponseWriter, status int, body []byte) {
	answer.SetJSONHeaders(w)
	w.WriteHeader(status)
	_, _ = w.Write(body) // the status is sent; a client that went away is no one's fault
}

// pageFits is how many of the first posts of ps make a page of at most limit bytes as writePage
// writes it; the first post counts whatever its size, as a post is always sent whole. A page
// cut there is encoded whole: it is no larger than limit, or than one post.
func pageFits(ps []posts.Post, limit int64) int {
	size := int64(len("[]\n"))
	for i, p := range ps {
		size += int64(postSize(p))
		if i > 0 {
			size++ // the comma
		}
		if size > limit && i > 0 {
			return i
		}
	}
	return len(ps)
}

// emptyPostSize is the size of a postJSON whose strings are all empty and that has no body;
// bodyMemberSize is what a body adds besides its string's characters.
var emptyPostSize, bodyMemberSize = func() (int, int) {
	without, _ := json.Marshal(postJSON{})
	with, _ := json.Marshal(postJSON{Body: new(string)})
	return len(without), len(with) - len(without)
}()

// postSize is the size of p as appendPost writes it, found without encoding it: the page can
// then be cut before its headers (the Link) are sent, and each post encoded once.
func postSize(p posts.Post) int {
	n := emptyPostSize + stringSize(p.ID) + stringSize(p.UserID) + stringSize(p.Title) + schema.TimeSize(p.CreatedAt) + schema.TimeSize(p.UpdatedAt) +
		digits(p.Version) - len("0")
	if p.Body != nil {
		n += bodyMemberSize + stringSize(*p.Body)
	}
	return n
}

// digits is the length of n, at least 0, written in decimal.
func digits(n int64) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}

// stringSize is the size of s as appendPost writes it (no HTML escaping), quotes left out.
func stringSize(s string) int { return schema.JSONStringSize(s, false) - len(`""`) }

// member is one member of a JSON object, its value not yet decoded.
type member struct {
	name  string
	value json.RawMessage
}

// readObject reads the request body as one JSON object of a media type in types.
func (a *API) readObject(w http.ResponseWriter, r *http.Request, types ...string) ([]member, error) {
	mediaType := r.Header.Get("Content-Type")
	if !slices.Contains(types, mediaType) { // as sent, it needs no parsing
		mediaType, _, _ = mime.ParseMediaType(mediaType)
	}
	if !slices.Contains(types, mediaType) {
		return nil, errcode.New(errcode.UnsupportedMediaType, "Content-Type must be "+strings.Join(types, " or "))
	}
	tooLarge := func() error { // built only when needed: its message costs allocations
		metrics.LimitRefused("max_body_size")
		return errcode.New(errcode.PayloadTooLarge, "the body is larger than the limit of "+byteCount(a.cfg.MaxBodySize))
	}
	if r.ContentLength > a.cfg.MaxBodySize {
		return nil, tooLarge()
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodySize))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, tooLarge()
		}
		return nil, answer.BadRequest("the body could not be read")
	}
	return parseObject(data)
}

// parseObject splits a JSON object into its members, in order, refusing anything else: other
// JSON values, a member given twice, or data after the object.
func parseObject(data []byte) ([]member, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, answer.BadRequest("the body is empty; send a JSON object")
	}
	if err := checkJSONText("the body", data); err != nil {
		return nil, err // before decoding, which would turn it into U+FFFD unseen
	}
	if members, ok := splitObject(data); ok {
		return members, nil
	}
	return decodeObject(data)
}

// decodeObject is parseObject's reading of data with encoding/json's decoder, whose errors
// name what is wrong with a body that is not one JSON object of distinct members.
func decodeObject(data []byte) ([]member, error) {
	notJSON := func(err error) error {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return answer.BadRequest("the body is not valid JSON: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, notJSON(err)
	}
	if tok != json.Delim('{') {
		return nil, answer.BadRequest("the body must be a JSON object")
	}
	var members []member
	seen := map[string]bool{} // not a search of members: a body of many members must not cost their square
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, notJSON(err)
		}
		name, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, notJSON(err)
		}
		if seen[name] {
			return nil, answer.BadRequest("member %q is given more than once", name)
		}
		seen[name] = true
		members = append(members, member{name, value})
	}
	if _, err := dec.Token(); err != nil {
		return nil, notJSON(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, answer.BadRequest("the body must hold one JSON object and nothing after it")
	}
	return members, nil
}

// splitObject is parseObject for the bodies clients send: one valid JSON object whose member
// names have no escapes and are distinct. It splits them without a decoder (about 25
// allocations fewer), and gives up (ok false) on anything else, for decodeObject to read or
// refuse as it did before: what it returns is what decodeObject returns for the same data
// (FuzzSplitObject holds it to that).
func splitObject(data []byte) (members []member, ok bool) {
	if !json.Valid(data) {
		return nil, false
	}
	i := skipSpace(data, 0)
	if data[i] != '{' {
		return nil, false
	}
	members = make([]member, 0, 4)
	var seen map[string]bool // past a few members: a body of many must not cost their square
	for i = skipSpace(data, i+1); data[i] != '}'; i = skipSpace(data, i+1) {
		if data[i] == ',' {
			i = skipSpace(data, i+1)
		}
		end := stringEnd(data, i)
		raw := data[i+1 : end]
		if bytes.IndexByte(raw, '\\') >= 0 {
			return nil, false // an escape: the decoder's to read
		}
		name := memberName(raw)
		if seen == nil && len(members) == 16 {
			seen = make(map[string]bool, 32)
			for _, m := range members {
				seen[m.name] = true
			}
		}
		if seen != nil && seen[name] || seen == nil && slices.ContainsFunc(members, func(m member) bool { return m.name == name }) {
			return nil, false // the decoder's to refuse
		}
		if seen != nil {
			seen[name] = true
		}
		start := skipSpace(data, skipSpace(data, end+1)+1) // past the colon
		i = valueEnd(data, start)
		members = append(members, member{name, json.RawMessage(data[start:i:i])})
		i-- // the loop steps past the value's last byte
	}
	return members, true
}

// knownNames are the member names the API reads (REST's, GraphQL's), which memberName returns
// without a copy.
var knownNames = []string{"title", "body", "query", "variables", "operationName", "extensions"}

// memberName is raw, a member name with no escape, as a string.
func memberName(raw []byte) string {
	for _, name := range knownNames {
		if string(raw) == name {
			return name
		}
	}
	return string(raw)
}

// skipSpace is the index of the first byte of data at or after i that is not JSON whitespace.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index of the quote that closes the JSON string opening at data[i], in valid
// JSON.
func stringEnd(data []byte, i int) int {
	for i++; data[i] != '"'; i++ {
		if data[i] == '\\' {
			i++
		}
	}
	return i
}

// valueEnd is the index just past the JSON value starting at data[i], in valid JSON.
func valueEnd(data []byte, i int) int {
	depth := 0
	for ; i < len(data); i++ {
		switch data[i] {
		case '"':
			i = stringEnd(data, i)
		case '{', '[':
			depth++
			continue
		case '}', ']':
			depth--
		default:
			if depth > 0 {
				continue
			}
			// A number or a literal, which ends at the first byte that is none of theirs.
			for i < len(data) && !strings.ContainsRune(" \t\n\r,}]", rune(data[i])) {
				i++
			}
			return i
		}
		if depth == 0 {
			return i + 1
		}
	}
	return i
}

// checkUTF8 returns a 400 naming what when text is not valid UTF-8, so that nothing silently
// becomes U+FFFD. GraphQL's GET parameters (query, operationName) call it too.
func checkUTF8(what, text string) error {
	if utf8.ValidString(text) {
		return nil
	}
	for i := 0; ; {
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && size == 1 {
			return errcode.New(errcode.InvalidText, fmt.Sprintf("%s is not valid UTF-8: byte %d (0x%02x) is not part of a character", what, i, text[i]))
		}
		i += size
	}
}

// checkJSONText is checkUTF8 for JSON text, which also refuses a \u escape of half a surrogate
// pair without the other half: it encodes no character, and encoding/json decodes it as U+FFFD.
// Every JSON request body passes here (readObject: REST and GraphQL's POST); GraphQL's GET
// parameters that hold JSON (variables, extensions) call it too.
func checkJSONText(what string, data []byte) error {
	if !utf8.Valid(data) {
		return checkUTF8(what, string(data))
	}
	if i := schema.HalfSurrogate(data); i >= 0 {
		return errcode.New(errcode.InvalidText, fmt.Sprintf("%s is not valid UTF-8: the escape %s at byte %d is half of a surrogate pair", what, data[i:i+6], i))
	}
	return nil
}

// serverOwned are the members the server sets, lower-cased: a client may not write them in any case.
var serverOwned = []string{"id", "_id", "userid", "createdat", "updatedat", "version"}

// unknownMember is the error for a member that is not title or body.
func unknownMember(name string) error {
	if slices.Contains(serverOwned, strings.ToLower(name)) {
		return answer.Unprocessable("%q is set by the server and cannot be written", name)
	}
	return answer.Unprocessable("unknown member %q; a post has only title and body", name)
}

// stringOrNull decodes a member that must be a JSON string or null (nil).
func stringOrNull(m member) (*string, error) {
	if string(m.value) == "null" {
		return nil, nil
	}
	s, ok := jsonString(m.value)
	if !ok {
		return nil, answer.BadRequest("%s must be a string", m.name)
	}
	return &s, nil
}

// jsonString reads v, a valid JSON value (a member parseObject or splitObject gave), as a
// string; ok is false when it is not one.
func jsonString(v json.RawMessage) (s string, ok bool) {
	if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true // valid, with no escape: the string is its bytes
	}
	return s, json.Unmarshal(v, &s) == nil
}

// objectMembers are the members of v, a JSON value, when it is an object: split as a body is
// when they can be (splitObject), decoded otherwise, where a member given twice has its last
// value, as encoding/json gives it.
func objectMembers(v json.RawMessage) (members []member, ok bool) {
	if members, ok = splitObject(v); ok {
		return members, true
	}
	var decoded map[string]json.RawMessage
	if json.Unmarshal(v, &decoded) != nil || decoded == nil {
		return nil, false
	}
	for name, value := range decoded {
		members = append(members, member{name, value})
	}
	return members, true
}

// memberValue is the value of the member name of members, or nil.
func memberValue(members []member, name string) json.RawMessage {
	for _, m := range members {
		if m.name == name {
			return m.value
		}
	}
	return nil
}

// newPost reads the members of a POST body.
func newPost(members []member) (in posts.NewPost, err error) {
	for _, m := range members {
		var s *string
		switch m.name {
		case "title":
			s, err = stringOrNull(m)
			if s != nil {
				in.Title = *s
			}
		case "body":
			in.Body, err = stringOrNull(m)
		default:
			err = unknownMember(m.name)
		}
		if err != nil {
			return posts.NewPost{}, err
		}
	}
	return in, nil
}

// changes reads the members of a PATCH body (a JSON merge patch, RFC 7396).
func changes(members []member) (ch posts.Changes, err error) {
	for _, m := range members {
		var c *posts.Change
		switch m.name {
		case "title":
			c = &ch.Title
		case "body":
			c = &ch.Body
		default:
			return posts.Changes{}, unknownMember(m.name)
		}
		c.Set = true
		if c.Value, err = stringOrNull(m); err != nil {
			return posts.Changes{}, err
		}
	}
	return ch, nil
}
