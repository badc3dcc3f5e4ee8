package rest

// Conditional requests (RFC 9110, section 13) on /posts/{id}: the validators of a post (ETag,
// Last-Modified) and the preconditions a request puts on them. A read evaluates them itself; a
// write hands them to posts.Service as a posts.Expect, so that they are checked in the store's
// own statement.

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/posts"
)

// setValidators sets the ETag and Last-Modified of p's representation. The ETag is the post's
// version in quotes, strong: a representation of one version is always the same bytes, and a
// client can write the tag of any version it read (a list's, a GraphQL answer's). Last-Modified
// is updatedAt, to the second that HTTP dates keep.
func setValidators(h http.Header, p posts.Post) {
	buf := make([]byte, 0, 64)
	buf = append(strconv.AppendInt(append(buf, '"'), p.Version, 10), '"')
	n := len(buf)
	text := string(p.UpdatedAt.UTC().AppendFormat(buf, http.TimeFormat))
	values := []string{text[:n], text[n:]} // one array of this answer for both; each capped (see answer.SetFixed)
	h["Etag"], h["Last-Modified"] = values[:1:1], values[1:]
}

// entityTag is one tag of an If-Match or If-None-Match list.
type entityTag struct {
	weak   bool
	opaque string // between the quotes
}

// tagList is an If-Match or If-None-Match field: * (any), or lines of entity tags, kept as they
// came and read again (with no allocation) each time they are matched. The zero tagList is an
// absent field.
type tagList struct {
	present, any bool
	lines        []string
}

// parseTags checks the lines of an If-Match or If-None-Match field: "*", or a comma-separated
// list of entity tags (which may be empty, and may have empty elements, as lists may).
func parseTags(name string, lines []string) (tagList, error) {
	switch {
	case len(lines) == 0:
		return tagList{}, nil
	case len(lines) == 1 && strings.Trim(lines[0], " \t") == "*":
		return tagList{present: true, any: true}, nil
	}
	if why := eachTag(lines, func(entityTag) bool { return true }); why != "" {
		return tagList{}, answer.BadRequest("%s must be * or a list of entity tags such as \"3\" or W/\"3\": %s", name, why)
	}
	return tagList{present: true, lines: lines}, nil
}

// eachTag calls yield with each entity tag of lines, in order, until it returns false; it
// returns what makes lines malformed, or "".
func eachTag(lines []string, yield func(entityTag) bool) (malformed string) {
	for _, line := range lines {
		for rest := line; ; {
			rest = strings.TrimLeft(rest, " \t")
			if rest == "" {
				break
			}
			if rest[0] == ',' {
				rest = rest[1:]
				continue
			}
			var tag entityTag
			if after, ok := strings.CutPrefix(rest, "W/"); ok {
				tag.weak, rest = true, after
			}
			if rest == "" || rest[0] != '"' {
				if strings.HasPrefix(rest, "*") {
					return "* stands alone, in no list"
				}
				return "a tag is in double quotes"
			}
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return "a tag has no closing quote"
			}
			tag.opaque = rest[1 : 1+end]
			for i := 0; i < len(tag.opaque); i++ {
				if c := tag.opaque[i]; c < 0x21 || c == 0x7f {
					return "a tag holds a space or a control character"
				}
			}
			rest = strings.TrimLeft(rest[2+end:], " \t")
			if rest != "" && rest[0] != ',' {
				return "tags are separated by commas"
			}
			if !yield(tag) {
				return ""
			}
		}
	}
	return ""
}

// version is the post version a tag names, and whether it names one. A tag that Caddy's encode
// handler extended with the content coding of a compressed answer ("3-gzip") names the version
// too: the handler takes the coding off If-None-Match, not off If-Match, and the version is what
// a write's precondition is about.
func (t entityTag) version(withCoding bool) (int64, bool) {
	digits := t.opaque
	if withCoding {
		if number, coding, ok := strings.Cut(digits, "-"); ok && slices.Contains(contentCodings, coding) {
			digits = number
		}
	}
	if digits == "" || digits[0] == '0' || len(digits) > 18 {
		return 0, false // not a tag of ours: it matches no post
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	return v, err == nil
}

// contentCodings are those Caddy's encode handler appends to an ETag.
var contentCodings = []string{"gzip", "zstd", "br", "deflate"}

// matches says whether l holds a tag of version v: by the strong comparison of If-Match (no weak
// tag matches), or the weak one of If-None-Match.
func (l tagList) matches(v int64, strong bool) (found bool) {
	if l.any {
		return true
	}
	eachTag(l.lines, func(t entityTag) bool {
		if tv, ok := t.version(strong); ok && tv == v && !(t.weak && strong) {
			found = true
		}
		return !found
	})
	return found
}

// preconditions are the conditional fields of a request; absent ones are zero.
type preconditions struct {
	ifMatch, ifNoneMatch               tagList
	ifModifiedSince, ifUnmodifiedSince time.Time
}

// readPreconditions reads r's conditional fields: a malformed If-Match or If-None-Match is a
// 400, before any work; a date that is not an HTTP-date, or given twice, is ignored, as RFC 9110
// says (13.1.3, 13.1.4). If-Modified-Since is for reads only.
func readPreconditions(r *http.Request) (pre preconditions, err error) {
	h := r.Header
	if pre.ifMatch, err = parseTags("If-Match", h["If-Match"]); err != nil {
		return pre, err
	}
	if pre.ifNoneMatch, err = parseTags("If-None-Match", h["If-None-Match"]); err != nil {
		return pre, err
	}
	date := func(lines []string) time.Time {
		if len(lines) != 1 {
			return time.Time{}
		}
		t, _ := http.ParseTime(lines[0])
		return t
	}
	if !pre.ifMatch.present {
		pre.ifUnmodifiedSince = date(h["If-Unmodified-Since"])
	}
	if !pre.ifNoneMatch.present && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		pre.ifModifiedSince = date(h["If-Modified-Since"])
	}
	return pre, nil
}

// lastModified is p's Last-Modified, to the second.
func lastModified(p posts.Post) time.Time { return p.UpdatedAt.Truncate(time.Second) }

// met says whether p meets the preconditions of a write (If-Match, If-Unmodified-Since,
// If-None-Match), in the order of RFC 9110 13.2.2.
func (pre preconditions) met(p posts.Post) bool {
	switch {
	case pre.ifMatch.present && !pre.ifMatch.matches(p.Version, true):
		return false
	case !pre.ifUnmodifiedSince.IsZero() && lastModified(p).After(pre.ifUnmodifiedSince):
		return false
	}
	return !pre.ifNoneMatch.present || !pre.ifNoneMatch.matches(p.Version, false)
}

// read is the status that the preconditions of a GET or HEAD give p: 412, 304, or 0 to answer it.
func (pre preconditions) read(p posts.Post) int {
	switch {
	case pre.ifMatch.present && !pre.ifMatch.matches(p.Version, true),
		!pre.ifUnmodifiedSince.IsZero() && lastModified(p).After(pre.ifUnmodifiedSince):
		return http.StatusPreconditionFailed
	case pre.ifNoneMatch.present && pre.ifNoneMatch.matches(p.Version, false),
		!pre.ifModifiedSince.IsZero() && !lastModified(p).After(pre.ifModifiedSince):
		return http.StatusNotModified
	}
	return 0
}

// expect is what a write with these preconditions expects of the post: nothing without any;
// the version of a lone If-Match tag, checked in the store's statement; otherwise that the post
// as read meets them all, and then its version.
func (pre preconditions) expect() posts.Expect {
	if !pre.ifMatch.present && !pre.ifNoneMatch.present && pre.ifUnmodifiedSince.IsZero() {
		return posts.Expect{}
	}
	if !pre.ifNoneMatch.present && pre.ifMatch.present && !pre.ifMatch.any {
		if v, ok := pre.ifMatch.lone(); ok {
			return posts.AtVersion(v)
		}
	}
	if pre.ifMatch.any && !pre.ifNoneMatch.present && pre.ifUnmodifiedSince.IsZero() {
		return posts.Expect{} // If-Match: * on a post that exists: the write's own check
	}
	return posts.When(pre.met)
}

// lone is the one version that l's strong tags name, if they name exactly one (none: 0, which
// no post is at).
func (l tagList) lone() (v int64, ok bool) {
	ok = true
	eachTag(l.lines, func(t entityTag) bool {
		tv, named := t.version(true)
		switch {
		case t.weak || !named:
		case v != 0 && tv != v:
			v, ok = 0, false
		default:
			v = tv
		}
		return ok
	})
	return v, ok
}

// preconditionFailed is the 412 of a read whose If-Match or If-Unmodified-Since p does not meet.
func preconditionFailed(p posts.Post) error {
	return errcode.Of(&posts.ConflictError{Version: p.Version})
}
