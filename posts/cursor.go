package posts

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// cursorSize is the size in bytes of a cursor, a post's place in the list order, opaque to
// clients: the post's createdAt in Unix milliseconds (8 bytes) and its id (12 bytes: the 24 hex
// characters as bytes), written base64url without padding.
const cursorSize = 8 + 12

func encodeCursor(k store.Key) string {
	var b [cursorSize]byte
	binary.BigEndian.PutUint64(b[:8], uint64(k.CreatedAt.UnixMilli()))
	hex.Decode(b[8:], []byte(k.ID)) // a stored id: 24 hex characters
	return cursorEncoding.EncodeToString(b[:])
}

// cursorEncoding is strict: a cursor has one spelling (the unused low bits of its last
// character are zero), so that a cursor a client holds is the one the API gave.
var cursorEncoding = base64.RawURLEncoding.Strict()

// decodeCursor reads a cursor; ok is false for any string encodeCursor does not return. It
// allocates nothing for a string of the wrong length, however long.
func decodeCursor(s string) (k store.Key, ok bool) {
	var b [cursorSize]byte
	if len(s) != cursorEncoding.EncodedLen(cursorSize) {
		return store.Key{}, false
	}
	if n, err := cursorEncoding.Decode(b[:], []byte(s)); err != nil || n != cursorSize {
		return store.Key{}, false
	}
	return store.Key{CreatedAt: time.UnixMilli(int64(binary.BigEndian.Uint64(b[:8]))).UTC(), ID: hex.EncodeToString(b[8:])}, true
}

// Cursor is the cursor of a post: a List with it as After starts with the post that follows.
func Cursor(p Post) string { return encodeCursor(store.Key{CreatedAt: p.CreatedAt, ID: p.ID}) }
