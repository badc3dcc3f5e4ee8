package rest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/request"
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
func stringOrNull(m request.Member) (*string, error) {
	if string(m.Value) == "null" {
		return nil, nil
	}
	s, ok := request.String(m.Value)
	if !ok {
		return nil, answer.BadRequest("%s must be a string", m.Name)
	}
	return &s, nil
}

// newPost reads the members of a POST body.
func newPost(members []request.Member) (in posts.NewPost, err error) {
	for _, m := range members {
		var s *string
		switch m.Name {
		case "title":
			s, err = stringOrNull(m)
			if s != nil {
				in.Title = *s
			}
		case "body":
			in.Body, err = stringOrNull(m)
		default:
			err = unknownMember(m.Name)
		}
		if err != nil {
			return posts.NewPost{}, err
		}
	}
	return in, nil
}

// changes reads the members of a PATCH body (a JSON merge patch, RFC 7396).
func changes(members []request.Member) (ch posts.Changes, err error) {
	for _, m := range members {
		var c *posts.Change
		switch m.Name {
		case "title":
			c = &ch.Title
		case "body":
			c = &ch.Body
		default:
			return posts.Changes{}, unknownMember(m.Name)
		}
		c.Set = true
		if c.Value, err = stringOrNull(m); err != nil {
			return posts.Changes{}, err
		}
	}
	return ch, nil
}
