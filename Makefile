# caddy-posts: `make run` serves the API on http://localhost:8080 from the embedded store
# (`make run PORT=9080 ADMIN=localhost:2020` moves the site and Caddy's admin API);
# `make test` runs every check CI runs.

GO ?= go

# The API key of the user "alice" in the example Caddyfile. For local use only: set your own.
POSTS_API_KEY ?= dev-key
export POSTS_API_KEY

SOURCES := $(shell find . -name '*.go' -not -path './build/*' -not -path './bench/*' -not -path './interop/*' -not -path './ecosystem/*') go.mod go.sum \
	$(wildcard handlers/graphiql/* schema/*.graphql)

.PHONY: build run test interop ecosystem fuzz soak clean

# The binary is built from the xcaddy.json recipe by the build/ program (xcaddy as a library).
caddy: $(SOURCES) xcaddy.json build/main.go build/go.mod
	cd build && $(GO) run . -recipe ../xcaddy.json -o ../caddy

build: caddy

# The Caddy of the ecosystem tests: the module with the plugins users combine it with, from the
# recipe xcaddy.ecosystem.json (caddy-ratelimit, cache-handler), which keep out of go.mod.
caddy-ecosystem: $(SOURCES) xcaddy.ecosystem.json build/main.go build/go.mod
	cd build && $(GO) run . -recipe ../xcaddy.ecosystem.json -o ../caddy-ecosystem

# The Caddyfile reads PORT (8080) and ADMIN (localhost:2019) from the environment, where make puts
# them when given on its command line: make run PORT=9080 ADMIN=localhost:2020.
run: caddy
	./caddy run --config Caddyfile

# The tests of integration/ that measure time or memory, or load the machine: each runs alone,
# one after the other, after the others (the attacks of hostile_*_test.go, the relay's tests of
# process_relay_*_test.go, the store down under load of process_breaker_test.go).
TIMED := TestHostile|TestAResponseThatWouldBeHugeStops|TestOneClientCannotTake|TestStrictCredentialsAndInput|TestThirtyTwoWritersAtFortyThousandPosts|TestTwoCaddiesRelayAThousandWrites|TestTwoCaddiesOneKilledAndRestarted|TestTwoCaddiesWhileTheDatabaseIsDown|TestTwoCaddiesWithWritesCutAfterThePost|TestTwoCaddiesWhileTheDatabaseStalls|TestTwoCaddiesRefuseNoWriteWhileTheDatabaseAnswers|TestTheStoreDownUnderLoad|TestResumingAcrossTwoCaddies|TestALongReplayBesideLiveSubscribers|TestStreamsAcrossTenReloadsUnderLoad|TestAReloadThatRemovesTheSiteOrChangesItsKeysEndsTheStreams|TestStoppingCaddyEndsTheStreamsAtOnce|TestAStreamClientThatStopsReadingIsEnded|TestAClientThatStopsReadingIsCutOffOnEveryTransport|TestAnExpiringTokenEndsTheStreams

# A step of make test prefixed with it says how long it took, once it ends.
STEP = start=$$(date +%s); trap 'echo "[the step above took $$(( $$(date +%s) - start ))s]"' EXIT;

# The version of CHANGELOG.md's latest release: the module's version in ./caddy, which
# xcaddy.json pins and make release sets.
RELEASED = $(shell sed -n 's/^## \[\([0-9]*\.[0-9]*\.[0-9]*\)\] - .*/\1/p' CHANGELOG.md | head -n 1)

test:
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags integration ./integration/
	$(GO) vet -tags ecosystem ./ecosystem/
	cd build && $(GO) vet ./...
	$(STEP) $(GO) test -race -count=1 ./...
	# The packages' tests again, without the race detector: what they check of time (only without
	# it: internal/race), and the suites built without it only (//go:build !race), which it would
	# slow tenfold for no concurrency of ours (FerretDB's, SQLite's).
	$(STEP) $(GO) test -count=1 ./...
	# The whole binary, as processes (integration/): first all but the timed tests, then each of those alone.
	$(STEP) $(GO) test -count=1 -tags integration -skip '$(TIMED)' ./integration/
	@echo "go test -tags integration -run TIMED ./integration/ (one after the other)"
	@$(STEP) out=$$($(GO) test -count=1 -tags integration -parallel 1 -v -run '$(TIMED)' ./integration/ 2>&1); status=$$?; \
		if [ $$status -eq 0 ]; then echo "$$out" | grep -E '^(--- |ok )|process_relay|process_breaker|process_resume|process_streams|hostile'; else echo "$$out"; fi; exit $$status
	$(MAKE) build
	./caddy list-modules | grep -qx 'http.handlers.posts' || { echo "http.handlers.posts is not in ./caddy"; exit 1; }
	./caddy list-modules --versions | grep -qx 'http.handlers.posts v$(RELEASED)' || { echo "./caddy's http.handlers.posts is not v$(RELEASED), CHANGELOG.md's latest release: see xcaddy.json"; exit 1; }
	./caddy validate --config Caddyfile
	$(MAKE) ecosystem
	$(GO) test -run '^$$' -bench . -benchtime 50x ./bench/
	$(MAKE) interop

# Runs the recipes of docs/recipes.md with other Caddy modules (```caddyfile ecosystem <name> blocks:
# encode, basic_auth, forward_auth, rate_limit, reverse_proxy, cache) in ./caddy-ecosystem.
ecosystem: caddy-ecosystem
	$(GO) test -tags ecosystem -count=1 ./ecosystem/

# Drives ./caddy with real third-party clients (Node 20 and npm: jose for JWTs, graphql-http's audit,
# graphql-js, GraphiQL in headless Chromium through puppeteer-core; see interop/).
interop: caddy
	cd interop && npm ci --no-audit --no-fund && node --test

# The benchmark harness (bench/run): ./caddy with bench/Caddyfile.bench on fresh embedded stores
# seeded through its API, against the bare net/http + SQLite baseline on the same files
# (bench/bare), the gqlgen server on the same file (bench/gqlbare: rows G, Gu), each of the two
# behind Caddy's reverse_proxy (rows R, Rg), Caddy's respond, bench/wsbare and PocketBase
# (bench/pocketbase); bench/run builds the two that are modules of their own (gqlbare, pocketbase)
# with the Go toolchain their go.mod names (GOTOOLCHAIN=auto) when a row needs them. Each pair
# runs interleaved under bench/run's own load generator; it prints the table and writes it to
# bench/RESULTS.md (about 20 minutes on 2 cores).
# BENCH_FLAGS passes flags to it, e.g. BENCH_FLAGS='-only 1|2 -profile bench/profiles'.
# The Go benchmarks of bench/: go test -run '^$$' -bench . ./bench/
BENCH_FLAGS ?=
.PHONY: bench
bench: caddy
	$(GO) run ./bench/run $(BENCH_FLAGS)

# The model-based test of the delivery machinery (schema/model_test.go) for SOAK_DURATION, split
# between the embedded store and FerretDB: consecutive seeds from the clock's, without the race
# detector; each failure prints its seed and the command that runs it again, and the end what was
# covered. SOAK_FLAGS passes more (e.g. SOAK_FLAGS=-race runs the embedded store's under it).
SOAK_DURATION ?= 1h
SOAK_FLAGS ?=
soak:
	@out=$$(MODEL_DURATION=$(SOAK_DURATION) $(GO) test -count=1 -timeout 0 -v $(SOAK_FLAGS) -run 'TestModel' ./schema/ 2>&1); status=$$?; \
		echo "$$out" | grep -E '^(model |--- FAIL|FAIL|ok )|seed [0-9]+:|reproduce:'; exit $$status

# Runs every Go fuzz target for FUZZTIME each (their seed corpora run in make test already).
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "$$pkg $$target"; \
			$(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

# Cuts release VERSION (make release VERSION=0.2.0) of what CHANGELOG.md's Unreleased section
# holds: the changelog, release/'s copies of the contracts, the recipes' version (release/README.md).
# It commits and tags nothing.
.PHONY: release
release:
	sh release/release.sh $(VERSION)

clean:
	rm -f caddy caddy-ecosystem
