package sqlite

// The queries, for the test of their plans.
const (
	GetPostSQL    = getPostSQL
	ListSQL       = listSQL
	ListByUserSQL = listByUserSQL
	GetUserSQL    = getUserSQL
	GetUsersSQL   = getUsersSQL
)

// The queries of a copy, for the test of their plans.
const (
	AllPostsSQL = allPostsSQL
	AllUsersSQL = allUsersSQL
)
