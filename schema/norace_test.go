//go:build !race

package schema

// raceSlowdown is how much slower the race detector makes the admission of a document.
const raceSlowdown = 1

// raceFactor multiplies the memory bounds of tests: under the race detector sync.Pool drops
// what it is given at random, so graphql-go's buffers and encoding/json's are allocated anew.
const raceFactor = 1
