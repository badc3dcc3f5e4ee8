package sqlite

// The queries, for the test of their plans.
const (
	GetPostSQL    = getPostSQL
	ListSQL       = listSQL
	ListByUserSQL = listByUserSQL
	GetUserSQL    = getUserSQL
	GetUsersSQL   = getUsersSQL
)
