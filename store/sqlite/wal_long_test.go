//go:build long && !race

// The write-ahead log's bound at the store's own limit: 50,000 posts, a minute of writes, built
// only with the tag long, which make test sets and the one-minute gate, go test ./..., leaves
// out; wal_test.go checks the same bound at a smaller limit in the gate.

package sqlite_test

import "testing"

// The write-ahead log stays within 64 MiB, twice the store's walLimit, over 50,000 posts beside
// reads that never stop (244 MB without the store's truncation).
func TestTheWriteAheadLogStaysBoundedAtFiftyThousandPosts(t *testing.T) {
	walStaysBounded(t, 50_000, 64<<20, 1000)
}
