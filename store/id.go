package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync/atomic"
	"time"
)

// idSize is the size of an id in bytes. An id has the layout of a MongoDB ObjectID, so both
// backends make the same ids and clients see one format: 4 bytes of Unix seconds, 5 random bytes
// chosen once per process, and a 3-byte counter that starts at a random value; written as 24
// lowercase hex characters. Ids made later sort later, to the second, and within a second in the
// order one process made them.
const idSize = 12

var (
	idProcess [5]byte
	idCounter atomic.Uint32
)

func init() {
	var seed [4]byte
	_, _ = rand.Read(idProcess[:]) // crypto/rand.Read never fails
	_, _ = rand.Read(seed[:])
	idCounter.Store(binary.BigEndian.Uint32(seed[:]))
}

// NewID returns a new post id for a post made at t.
func NewID(t time.Time) string {
	var b [idSize]byte
	binary.BigEndian.PutUint32(b[:4], uint32(t.Unix()))
	copy(b[4:9], idProcess[:])
	n := idCounter.Add(1)
	b[9], b[10], b[11] = byte(n>>16), byte(n>>8), byte(n)
	return hex.EncodeToString(b[:])
}

// ValidID says whether id has the form of a post id: 24 lowercase hex characters.
func ValidID(id string) bool {
	if len(id) != 2*idSize {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
