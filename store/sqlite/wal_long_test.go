//go:build long && !race

// The write-ahead log's bound at the store's own limit: 20,000 posts, 20 s of writes, built
// only with the tag long, which make test sets and the one-minute gate, go test ./..., leaves
// out; wal_test.go checks the same bound at a smaller limit in the gate.

package sqlite_test

import "testing"

// The write-ahead log stays within 48 MiB, one and a half times the store's walLimit, over
// 20,000 posts beside reads that never stop (68 MB without the store's truncation, 244 MB over
// 50,000 posts).
func TestTheWriteAheadLogStaysBoundedAtTwentyThousandPosts(t *testing.T) {
	walStaysBounded(t, 20_000, 48<<20, 1000)
}
