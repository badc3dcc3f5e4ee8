// Package ecosystem holds the tests that run the module with the Caddy modules people combine it
// with: each recipe of the documentation fenced as ```caddyfile ecosystem <name> runs as it
// stands in ./caddy, built from xcaddy.json with caddy-ratelimit and cache-handler, and is checked
// as its user would check it. They are behind the build tag ecosystem, as they need that binary,
// which takes a minute to build:
//
//	make ecosystem   # builds ./caddy, then: go test -tags ecosystem ./ecosystem/
package ecosystem
