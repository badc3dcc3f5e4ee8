//go:build !race

package schema

// raceSlowdown is how much slower the race detector makes the admission of a document.
const raceSlowdown = 1
