// Package race says whether the race detector is built in (Enabled: race.go with it, norace.go
// without), for the tests: a bound on time is checked only without it (it multiplies time
// tenfold, and CI's step with it would fail on timing alone), in make test's step without it.
package race
