package sqlite

import (
	"testing"
	"time"
)

// The queries, for the test of their plans.
const (
	GetPostSQL          = getPostSQL
	UpdatePostSQL       = updatePostSQL
	DeletePostSQL       = deletePostSQL
	ListSQL             = listSQL
	ListByUserSQL       = listByUserSQL
	ListOldestSQL       = listOldestSQL
	ListByUserOldestSQL = listByUserOldestSQL
	SearchSQL           = searchSQL
	SearchOldestSQL     = searchOldestSQL
	GetUserSQL          = getUserSQL
	GetUsersSQL         = getUsersSQL
)

// The queries of a copy, for the test of their plans.
const (
	AllPostsSQL = allPostsSQL
	AllUsersSQL = allUsersSQL
)

// Migrations are the schema's migrations, for the test that starts from an earlier version.
var Migrations = migrations

// The statements of the event log, for the test of their plans, and expiry's batch.
const (
	LastPositionSQL = lastPositionSQL
	LogEventSQL     = logEventSQL
	ExpiryCutSQL    = expiryCutSQL
	ExpireEventsSQL = expireEventsSQL
	KeptSQL         = keptSQL
	LogStatsSQL     = logStatsSQL
	ExpireBatch     = expireBatch
)

// SetWALLimit sets walLimit until the test ends; before the test opens its store.
func SetWALLimit(t *testing.T, limit int64) {
	saved := walLimit
	walLimit = limit
	t.Cleanup(func() { walLimit = saved })
}

// AwaitMerges waits until s has taken no step of merging its index (mergeWords) for a second.
func AwaitMerges(s *Store) {
	c := s.db.Load()
	for last := c.committer.merges.Load() - 1; last != c.committer.merges.Load(); time.Sleep(time.Second) {
		last = c.committer.merges.Load()
	}
}

// CacheStats are the entries and estimated bytes of the cache of posts of the open store s.
func CacheStats(s *Store) (entries int, bytes int64) {
	c, err := s.conns()
	if err != nil {
		return 0, 0
	}
	return c.cache.stats()
}

// CacheEntryOverhead is what cachedSize counts for an entry besides its strings' bytes.
const CacheEntryOverhead = entryOverhead
