//go:build !race

package integration

import "testing"

// TestThirtyTwoWritersAtFortyThousandPosts has 32 users create, change and delete posts at once
// through Caddy, on a store of 40,000 posts: no request fails (the embedded store of earlier
// releases answered 500 "database is locked" to concurrent PATCHes at this size).
//
// The race detector multiplies the seeding of 40,000 posts and the requests (12s under -race),
// so it builds without it and `make test` runs it on its own, like hostile_test.go;
// TestThirtyTwoWritersAtOnce runs the same writers under -race on a smaller store.
func TestThirtyTwoWritersAtFortyThousandPosts(t *testing.T) {
	ownProcesses(t)
	writersAtOnce(t, 32, 40_000)
}
