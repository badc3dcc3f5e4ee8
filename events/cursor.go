package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
)

// ErrBadCursor: a cursor this log did not make: malformed, altered, or another log's.
var ErrBadCursor = errors.New("the cursor was not made by this server's event log")

// A cursor is the position of an event in the log, signed with the log's key: a version byte,
// the position (8 bytes, big-endian) and the first 8 bytes of the HMAC-SHA256 of the two, in
// unpadded base64url, 23 characters. Opaque to clients, it cannot be altered into another
// position of the log, nor taken from another log, without the key; it is read with no
// lookup, so a bad one costs the store nothing.
const (
	cursorVersion = 1
	cursorBytes   = 1 + 8 + 8
	// CursorLength is the length of every cursor.
	CursorLength = (cursorBytes*8 + 5) / 6
)

// Cursors makes and reads the cursors of one event log.
type Cursors struct{ key []byte }

// NewCursors returns the cursors of the log whose key is key (store.EventLog.Key).
func NewCursors(key []byte) Cursors { return Cursors{key: key} }

// Make returns the cursor of position.
func (c Cursors) Make(position int64) string {
	var b [cursorBytes]byte
	b[0] = cursorVersion
	binary.BigEndian.PutUint64(b[1:9], uint64(position))
	copy(b[9:], c.sign(b[:9]))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Read returns the position of cursor, or ErrBadCursor.
func (c Cursors) Read(cursor string) (int64, error) {
	if len(cursor) != CursorLength || len(c.key) == 0 {
		return 0, ErrBadCursor
	}
	var b [cursorBytes]byte
	if n, err := base64.RawURLEncoding.Strict().Decode(b[:], []byte(cursor)); err != nil || n != cursorBytes || b[0] != cursorVersion {
		return 0, ErrBadCursor
	}
	position := int64(binary.BigEndian.Uint64(b[1:9]))
	if !hmac.Equal(b[9:], c.sign(b[:9])) || position < 0 {
		return 0, ErrBadCursor
	}
	return position, nil
}

// sign is the MAC of a cursor's first bytes.
func (c Cursors) sign(b []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(b)
	return m.Sum(nil)[:8]
}
