//go:build long && !race

// The write-ahead log's bound at the store's own limit: 20,000 posts, 20 s of writes, built
// only with the tag long, which make test sets and the one-minute gate, go test ./..., leaves
// out; wal_test.go checks the same bound at a smaller limit in the gate.

package sqlite_test

import "testing"

// The write-ahead log stays within 56 MiB over 20,000 posts beside reads that never stop (68 MB
// without the store's truncation, 244 MB over 50,000 posts): the store's walLimit, 32 MiB, and
// what it grows by between two looks at its size, some 13 MB (checkpointEvery writes of 52 kB,
// their search index's pages included), with 9 MB to spare; alone, it peaks at 44.4 MB.
func TestTheWriteAheadLogStaysBoundedAtTwentyThousandPosts(t *testing.T) {
	walStaysBounded(t, 20_000, 56<<20, 1000)
}
