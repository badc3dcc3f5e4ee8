//go:build race

package schema

// raceFactor multiplies the memory bounds of tests: under the race detector sync.Pool drops
// what it is given at random, so graphql-go's buffers and encoding/json's are allocated anew.
const raceFactor = 3
