//go:build !race && long

// The model of model_test.go on FerretDB: two instances on one database, each with its own
// client and a follower that relays, the second through a proxy that holds each of its
// commands back (slow, not down), and restarted twice in each run while the first writes
// (restartWhileWriting). FerretDB takes some 100ms a write on a loaded machine: the short set is
// one seed of fewer steps, with small bursts, and holds the second's commands 10–100 ms; seeds
// chosen by the environment (make soak, or one run again) hold them 0.3–3 s, as the slow
// database's test of store/mongo does. Built without the race detector only, as the other
// suites that would link FerretDB into a package's race test binary, and with the tag long only
// (model_long_test.go): some 20 s a seed.

package schema_test

import (
	"testing"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

func init() {
	modelBackends = append(modelBackends, modelBackend{
		name: "ferretdb", instances: 2, shortSeeds: []uint64{1}, steps: 50, maxBurst: 3, slow: true,
		open: func(t *testing.T, instance int, soak bool) (store.Store, error) {
			server := modelFerretDB(t)
			if instance == 1 {
				return mongo.Open(modelSlowFerretDB(t, server, soak), "model")
			}
			return mongo.Open(server.URI, "model")
		},
	})
}

// modelFerretDB is the test's FerretDB, started with its first instance.
func modelFerretDB(t *testing.T) *mongotest.Server {
	return modelServers.get(t, func() *mongotest.Server { return mongotest.FerretDB(t) })
}

var modelServers perTest[*mongotest.Server]

// modelSlowFerretDB is the URI of the test's proxy to server that holds each command back
// (mongotest.DelayCommands), in front of its one write at a time.
func modelSlowFerretDB(t *testing.T, server *mongotest.Server, soak bool) string {
	return modelSlowServers.get(t, func() string {
		least, most := 10*time.Millisecond, 100*time.Millisecond
		if soak {
			least, most = 300*time.Millisecond, 3*time.Second
		}
		return "mongodb://" + mongotest.ServeTCP(server.Writes, mongotest.DelayCommands(least, most)) + "/"
	})
}

var modelSlowServers perTest[string]
