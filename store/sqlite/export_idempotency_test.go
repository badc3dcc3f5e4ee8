package sqlite

// The statements of idempotency keys that read, and of the deleted ids kept for them, for the
// test of their plans.
const (
	GetKeySQL            = getKeySQL
	DeleteExpiredKeysSQL = deleteExpiredKeysSQL
	DeleteExpiredIDsSQL  = deleteExpiredIDsSQL
	InsertLivePostSQL    = insertLivePostSQL
	KeepDeletedSQL       = keepDeletedSQL
)

// FirstSchema is the schema of version 1, which had no idempotency keys.
var FirstSchema = migrations[0]
