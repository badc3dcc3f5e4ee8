//go:build integration

package integration

import "testing"

// TestThirtyTwoWritersAtFortyThousandPosts has 32 users create, change and delete posts at once
// through Caddy, on a store of 40,000 posts: no request fails (the embedded store of earlier
// releases answered 500 "database is locked" to concurrent PATCHes at this size).
//
// It measures nothing, but takes its time (seeding 40,000 posts): `make test` runs it on its own,
// like the attacks of hostile_test.go.
func TestThirtyTwoWritersAtFortyThousandPosts(t *testing.T) {
	ownProcesses(t)
	writersAtOnce(t, 32, 40_000)
}
