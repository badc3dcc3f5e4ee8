//go:build !race

package mongo_test

// raceSlowdown divides the load of the heaviest behaviours under the race detector: here, none.
const raceSlowdown = 1
