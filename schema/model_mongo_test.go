//go:build !race

// The model of model_test.go on FerretDB: two instances on one database, each with its own
// client and a follower that relays. FerretDB takes some 100ms a write on a loaded machine: the
// short set is one seed of fewer steps, with small bursts. Built without the race detector only, as the other suites
// that would link FerretDB into a package's race test binary.

package schema_test

import (
	"testing"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

func init() {
	modelBackends = append(modelBackends, modelBackend{
		name: "ferretdb", instances: 2, shortSeeds: []uint64{1}, steps: 50, maxBurst: 3,
		open: func(t *testing.T) (store.Store, error) { return mongo.Open(modelFerretDB(t), "model") },
	})
}

// modelFerretDB is the URI of the test's FerretDB, started with its first instance.
func modelFerretDB(t *testing.T) string {
	return modelServers.get(t, func() string { return mongotest.FerretDB(t).URI })
}

var modelServers perTest[string]
