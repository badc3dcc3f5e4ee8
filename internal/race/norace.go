//go:build !race

package race

// Enabled says whether the race detector is built in.
const Enabled = false
