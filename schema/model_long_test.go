//go:build long

// TestModel's long set (make test): each backend's longSeeds after its shortSeeds, and the model
// on FerretDB (model_mongo_test.go, 20 s of a seed), which the one-minute gate, go test ./...,
// leaves out for the embedded store's four seeds.

package schema_test

func init() { modelLong = true }
