//go:build race

package mongo_test

// raceSlowdown divides the load of the heaviest behaviours under the race detector, which
// instruments FerretDB (in-process) as well as this package.
const raceSlowdown = 2
