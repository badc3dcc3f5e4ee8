// Package request reads what the API's clients send: a body of one JSON object (Object,
// Parse), its members' values, text that must be UTF-8 (CheckUTF8, CheckJSONText), and the
// parameters of a GraphQL request over HTTP or WebSocket (GraphQL), with Apollo's persistedQuery
// extension. What a request may hold is refused here with a 400, 413 or 415, naming what is
// wrong.
package request

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/schema"
)

// Member is one member of a JSON object, its value not yet decoded.
type Member struct {
	Name  string
	Value json.RawMessage
}

// Object reads the body of r as one JSON object (Parse) of a media type in types, of at most
// maxBody bytes (413 past it).
func Object(w http.ResponseWriter, r *http.Request, maxBody int64, types ...string) ([]Member, error) {
	mediaType := r.Header.Get("Content-Type")
	if !slices.Contains(types, mediaType) { // as sent, it needs no parsing
		mediaType, _, _ = mime.ParseMediaType(mediaType)
	}
	if !slices.Contains(types, mediaType) {
		return nil, errcode.New(errcode.UnsupportedMediaType, "Content-Type must be "+strings.Join(types, " or "))
	}
	tooLarge := func() error { // built only when needed: its message costs allocations
		metrics.LimitRefused("max_body_size")
		return errcode.New(errcode.PayloadTooLarge, "the body is larger than the limit of "+byteCount(maxBody))
	}
	if r.ContentLength > maxBody {
		return nil, tooLarge()
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, tooLarge()
		}
		return nil, answer.BadRequest("the body could not be read")
	}
	return Parse(data)
}

// Parse splits a JSON object into its members, in order, refusing anything else: other
// JSON values, a member given twice, or data after the object.
func Parse(data []byte) ([]Member, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, answer.BadRequest("the body is empty; send a JSON object")
	}
	if err := CheckJSONText("the body", data); err != nil {
		return nil, err // before decoding, which would turn it into U+FFFD unseen
	}
	if members, ok := splitObject(data); ok {
		return members, nil
	}
	return decodeObject(data)
}

// decodeObject is Parse's reading of data with encoding/json's decoder, whose errors
// name what is wrong with a body that is not one JSON object of distinct members.
func decodeObject(data []byte) ([]Member, error) {
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
	var members []Member
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
		members = append(members, Member{name, value})
	}
	if _, err := dec.Token(); err != nil {
		return nil, notJSON(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, answer.BadRequest("the body must hold one JSON object and nothing after it")
	}
	return members, nil
}

// splitObject is Parse for the bodies clients send: one valid JSON object whose member
// names have no escapes and are distinct. It splits them without a decoder (about 25
// allocations fewer), and gives up (ok false) on anything else, for decodeObject to read or
// refuse as it did before: what it returns is what decodeObject returns for the same data
// (FuzzSplitObject holds it to that).
func splitObject(data []byte) (members []Member, ok bool) {
	if !json.Valid(data) {
		return nil, false
	}
	i := skipSpace(data, 0)
	if data[i] != '{' {
		return nil, false
	}
	members = make([]Member, 0, 4)
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
				seen[m.Name] = true
			}
		}
		if seen != nil && seen[name] || seen == nil && slices.ContainsFunc(members, func(m Member) bool { return m.Name == name }) {
			return nil, false // the decoder's to refuse
		}
		if seen != nil {
			seen[name] = true
		}
		start := skipSpace(data, skipSpace(data, end+1)+1) // past the colon
		i = valueEnd(data, start)
		members = append(members, Member{name, json.RawMessage(data[start:i:i])})
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

// CheckUTF8 returns a 400 naming what when text is not valid UTF-8, so that nothing silently
// becomes U+FFFD. GraphQL's GET parameters (query, operationName) call it too.
func CheckUTF8(what, text string) error {
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

// CheckJSONText is CheckUTF8 for JSON text, which also refuses a \u escape of half a surrogate
// pair without the other half: it encodes no character, and encoding/json decodes it as U+FFFD.
// Every JSON request body passes here (Object: REST and GraphQL's POST); GraphQL's GET
// parameters that hold JSON (variables, extensions) call it too.
func CheckJSONText(what string, data []byte) error {
	if !utf8.Valid(data) {
		return CheckUTF8(what, string(data))
	}
	if i := schema.HalfSurrogate(data); i >= 0 {
		return errcode.New(errcode.InvalidText, fmt.Sprintf("%s is not valid UTF-8: the escape %s at byte %d is half of a surrogate pair", what, data[i:i+6], i))
	}
	return nil
}

// String reads v, a valid JSON value (a member Parse or splitObject gave), as a
// string; ok is false when it is not one.
func String(v json.RawMessage) (s string, ok bool) {
	if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true // valid, with no escape: the string is its bytes
	}
	return s, json.Unmarshal(v, &s) == nil
}

// Members are the members of v, a JSON value, when it is an object: split as a body is
// when they can be (splitObject), decoded otherwise, where a member given twice has its last
// value, as encoding/json gives it.
func Members(v json.RawMessage) (members []Member, ok bool) {
	if members, ok = splitObject(v); ok {
		return members, true
	}
	var decoded map[string]json.RawMessage
	if json.Unmarshal(v, &decoded) != nil || decoded == nil {
		return nil, false
	}
	for name, value := range decoded {
		members = append(members, Member{name, value})
	}
	return members, true
}

// Value is the value of the member name of members, or nil.
func Value(members []Member, name string) json.RawMessage {
	for _, m := range members {
		if m.Name == name {
			return m.Value
		}
	}
	return nil
}

// byteCount writes a size for people: 1 MiB, 512 KiB, 100 bytes.
func byteCount(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
