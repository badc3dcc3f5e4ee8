package posts

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// A cursor is a post's place in the order of a list, opaque to clients, and the list it belongs
// to: the post's createdAt in Unix milliseconds (8 bytes), its id (12 bytes: the 24 hex
// characters as bytes) and the digest of the list's query (ListQuery.digest, digestSize bytes),
// written base64url without padding. A cursor of the releases before search has no digest
// (keySize bytes); it is taken for the lists those releases had, newest first with no search
// and no time range, so that a client paging across an upgrade goes on.
const (
	keySize    = 8 + 12
	digestSize = 8
	cursorSize = keySize + digestSize
)

// cursorEncoding is strict: a cursor has one spelling (the unused low bits of its last
// character are zero), so that a cursor a client holds is the one the API gave.
var cursorEncoding = base64.RawURLEncoding.Strict()

// digest identifies the list q asks for, but not its page (Limit, After): a cursor of one list
// is refused by another. Its search is compared by its words, so "Edge" and "edge" are one list.
func (q ListQuery) digest() [digestSize]byte {
	var b strings.Builder
	b.WriteString(q.UserID)
	b.WriteByte(0)
	b.WriteString(strings.Join(q.Search.Words, " "))
	b.WriteByte(0)
	for _, t := range []time.Time{ceilMilli(q.Since), ceilMilli(q.Until)} {
		if !t.IsZero() {
			b.WriteString(t.Format(TimeFormat))
		}
		b.WriteByte(0)
	}
	if q.Oldest {
		b.WriteByte(1)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return [digestSize]byte(sum[:digestSize])
}

// legacy says whether q is a list of the releases before search, whose cursors had no digest.
func (q ListQuery) legacy() bool {
	return q.Search.Empty() && q.Since.IsZero() && q.Until.IsZero() && !q.Oldest
}

// Cursor is the cursor of p in the list q: the same list with it as After starts with the post
// that follows p.
func (q ListQuery) Cursor(p Post) string {
	var b [cursorSize]byte
	binary.BigEndian.PutUint64(b[:8], uint64(p.CreatedAt.UnixMilli()))
	hex.Decode(b[8:keySize], []byte(p.ID)) // a stored id: 24 hex characters
	d := q.digest()
	copy(b[keySize:], d[:])
	return cursorEncoding.EncodeToString(b[:])
}

// Cursor is the cursor of p in the list of every post, newest first (ListQuery.Cursor).
func Cursor(p Post) string { return ListQuery{}.Cursor(p) }

// cursorOf reads s, a cursor of the list q: ok is false for any string that ListQuery.Cursor
// does not return, and ofAnother true for a cursor of another list. It allocates nothing for a
// string of the wrong length, however long.
func (q ListQuery) cursorOf(s string) (k store.Key, ofAnother, ok bool) {
	var b [cursorSize]byte
	if len(s) != cursorEncoding.EncodedLen(keySize) && len(s) != cursorEncoding.EncodedLen(cursorSize) {
		return store.Key{}, false, false
	}
	n, err := cursorEncoding.Decode(b[:], []byte(s))
	if err != nil {
		return store.Key{}, false, false
	}
	k = store.Key{CreatedAt: time.UnixMilli(int64(binary.BigEndian.Uint64(b[:8]))).UTC(), ID: hex.EncodeToString(b[8:keySize])}
	if n == keySize {
		return k, !q.legacy(), true
	}
	return k, [digestSize]byte(b[keySize:]) != q.digest(), true
}
