// Package integration tests the whole binary: Caddy with the posts module and Caddy's standard
// modules run as processes of their own, as users run ./caddy (process_test.go; FerretDB as a
// process of its own, process_ferretdb_test.go), and the hostile-client attacks on such a
// process (hostile_test.go). As Caddy keeps caddytest/integration apart from its modules, these
// tests are kept apart from caddymodule/'s, which test the module's code in one process.
//
// The tests build with the tag integration alone, so that `go test -race ./...` leaves them out:
// they test the binary, with bounds on time and memory that the race detector would multiply,
// and take minutes; the race detector runs on every package's own tests, caddymodule's in-process
// end-to-end tests included. `make test` runs them without it: `go test -tags integration
// ./integration/`, the attacks and the relay's tests on their own.
//
// The package has no code but this comment and its tests.
package integration
