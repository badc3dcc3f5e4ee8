package graph

import "github.com/postsedge/caddy-posts/bench/gqlbare/store"

// This file will not be regenerated automatically.

// caddy-posts' defaults: a user's posts when the query names no limit, and the most a query may
// ask for (its max_limit).
const (
	defaultLimit = 10
	maxLimit     = 100
)

// Resolver is the root resolver: it reads the store.
type Resolver struct {
	Store *store.Store
}
