// Package bench holds the performance benchmarks of caddy-posts. It has no tests and no code of
// its own: auth_bench_test.go compares reads (authenticated, and through GraphQL) with anonymous
// REST reads, subscriptions_bench_test.go measures idle subscribed WebSockets and the fan-out
// of one event, and allocs_bench_test.go counts the heap allocations of one GET /posts/{id}
// against net/http's own and bench/bare's, each on the embedded SQLite store in the same
// process; run them with `go test -run '^$' -bench . ./bench/`. `make bench` runs the harness
// of bench/run instead: ./caddy against the baselines of bench/bare (net/http on the same SQLite
// files), the gqlgen server of bench/gqlbare (gqlgen with its default caches, on the same file),
// each of those two behind Caddy's reverse_proxy (the deployment a user would run instead of the
// module), Caddy's respond, bench/wsbare, the PocketBase peer of bench/pocketbase, and the module
// as it was before its spans (the T rows, built from git, on bench/Caddyfile.tracing), each pair
// interleaved (under bench/run's load generator, or with the WebSocket client of bench/wsload
// and the server-sent events client of bench/sseload, which hold 10,000 idle subscribers of a
// fresh server each run), into bench/RESULTS.md.
//
// The benchmarks report, they never fail on a number: performance is read from the output, such
// as bearer/anon-throughput (row 3 of bench/RESULTS.md, whose target is at least 0.97), not asserted.
package bench
