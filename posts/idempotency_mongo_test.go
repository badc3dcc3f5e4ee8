//go:build !race

// The idempotency tests on MongoDB (FerretDB, where a REST create and its answer are two
// writes), without the race detector: the service's code is the same on either store and is
// checked under it on the embedded store, and store/mongo's tests check the store's own; FerretDB
// in the package's race test binary would only slow its link and its run.

package posts

import (
	"testing"

	"github.com/postsedge/caddy-posts/store/mongo"
	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

func init() {
	backends = append(backends, backend{"mongodb", func(t *testing.T) keyedStore {
		st, err := mongo.Open(mongotest.FerretDB(t).URI, "posts")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}})
}
