package sqlite

// The statements of idempotency keys that read, for the test of their plans.
const (
	GetKeySQL            = getKeySQL
	DeleteExpiredKeysSQL = deleteExpiredKeysSQL
)

// FirstSchema is the schema of version 1, which had no idempotency keys.
var FirstSchema = migrations[0]
