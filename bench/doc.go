// Package bench holds the performance benchmarks of caddy-posts. It has no tests and no code of
// its own: auth_bench_test.go compares reads (authenticated, and through GraphQL) with anonymous
// REST reads, and subscriptions_bench_test.go measures idle subscribed WebSockets and the fan-out
// of one event. Run them with `make bench` (or `go test -run '^$' -bench . ./bench/`).
//
// The benchmarks report, they never fail on a number: performance is read from the output, such
// as bearer/anon-throughput (the target is at least 0.9), not asserted.
package bench
