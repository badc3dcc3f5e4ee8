//go:build long && !race

// The conformance suite on FerretDB, a long test outside the race detector: under it, it would
// instrument FerretDB as well (in-process), and take half a minute of make test's race step to
// check what the suite on the embedded store checks there already; in the one-minute gate,
// go test ./..., it took 11 s of store/mongo's 22. make test runs it in its step without the
// race detector, with the long tests.

package mongo_test

import (
	"testing"

	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
	"github.com/postsedge/caddy-posts/store/storetest"
)

// TestConformanceOnFerretDB runs the suite on FerretDB, whose writes mongotest.FerretDB lets in
// one at a time (see mongotest.OneWriteAtATime), with fewer concurrent writers: FerretDB pushes
// down to SQLite only a filter on _id alone, so each owner-checked update and delete reads the
// whole collection, and the concurrent writers' subtest costs about the square of their number.
// What it checks of this package, that calls sharing one client at once all succeed and none is
// lost, holds as well at 8. The concurrent updates of one post wait for one another's events (a
// post takes its next write once its last one's event is logged: four write commands, which
// FerretDB's one writer at a time serializes with every other), so they are 8 updaters of 10
// rounds here. A real MongoDB (TestConformanceOnMongoDB) and the embedded store keep 32 writers,
// and 16 updaters of 20 rounds.
func TestConformanceOnFerretDB(t *testing.T) {
	t.Parallel() // on a server of its own, and sets none of the package's waits (SetWaits)
	uri := mongotest.FerretDB(t).URI
	storetest.RunWith(t, opener(uri), storetest.Options{Writers: 8, Updaters: 8, UpdateRounds: 10, Reopen: reopener(uri), ReadsMayRunAhead: true})
}
