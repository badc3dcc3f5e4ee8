# caddy-posts: `make run` serves the API on http://localhost:8080 from the embedded store
# (`make run PORT=9080 ADMIN=localhost:2020` moves the site and Caddy's admin API);
# `make test` runs every check CI runs.

GO ?= go

# GOFLAGS gets -trimpath: a package's build is then named by its files and not by the directory
# of the checkout, so that a clean clone reuses the build cache of any checkout of the same files
# (each step of make test compiled the module's packages again on a clean clone: the race step
# took 107 s there, 76 s with them cached).
export GOFLAGS += -trimpath

# The API key of the user "alice" in the example Caddyfile. For local use only: set your own.
POSTS_API_KEY ?= dev-key
export POSTS_API_KEY

SOURCES := $(shell find . -name '*.go' -not -path './build/*' -not -path './bench/*' -not -path './interop/*' -not -path './ecosystem/*') go.mod go.sum \
	$(wildcard handlers/graphiql/* schema/*.graphql)

.PHONY: build run test race deps checks interop ecosystem fuzz soak clean

# The binary is built from the xcaddy.json recipe by the build/ program (xcaddy as a library): the
# module, and the modules docs/recipes.md combines it with (caddy-ratelimit, cache-handler), which
# keep out of go.mod. It is built without the module proxy first (GOPROXY=off): xcaddy's five
# `go get`s of pinned versions otherwise ask it, 36 s of a 38 s build here; where a module is
# missing from the module cache ("GOPROXY=off"), or its checksum is not in the checksum
# database's local cache ("verifying", as on a fresh machine whose sum.golang.org is reached
# only through the proxy), it is built again through the proxy, and any other failure is shown
# as it is.
caddy: $(SOURCES) xcaddy.json build/main.go build/go.mod
	cd build && out=$$(GOPROXY=off $(GO) run . -recipe ../xcaddy.json -o ../caddy 2>&1) || case "$$out" in \
		*'GOPROXY=off'*|*'verifying '*) $(GO) run . -recipe ../xcaddy.json -o ../caddy ;; \
		*) echo "$$out"; exit 1 ;; \
	esac

build: caddy

# The Caddyfile reads PORT (8080) and ADMIN (localhost:2019) from the environment, where make puts
# them when given on its command line: make run PORT=9080 ADMIN=localhost:2020.
run: caddy
	./caddy run --config Caddyfile

# The tests of integration/ that measure time or memory: each runs alone, one after the other,
# after the others (the attacks of hostile_*_test.go, the relay's outages of
# process_relay_outage_test.go and process_relay_slow_test.go, the store down under load of
# process_breaker_test.go, the streams' ends timed in process_streams_*_test.go), and the resumes
# across two caddies, whose FerretDB answers UNAVAILABLE beside other load. The others run a few
# at a time (ownProcesses).
TIMED := TestHostile|TestResumingAcrossTwoCaddies|TestAResponseThatWouldBeHugeStops|TestOneClientCannotTake|TestStrictCredentialsAndInput|TestThirtyTwoWritersAtFortyThousandPosts|TestTwoCaddiesWhileTheDatabaseIsDown|TestTwoCaddiesRefuseNoWriteWhileTheDatabaseAnswers|TestTheStoreDownUnderLoad|TestALongReplayBesideLiveSubscribers|TestAReloadThatRemovesTheSiteOrChangesItsKeysEndsTheStreams|TestStoppingCaddyEndsTheStreamsAtOnce|TestAStreamClientThatStopsReadingIsEnded|TestAClientThatStopsReadingIsCutOffOnEveryTransport|TestAnExpiringTokenEndsTheStreams

# TEST_BINARIES keeps the test binaries of each step of make test (go test -o): go test links
# every package's again on each run, and a binary kept is linked again only where its build
# changed. Linking took 44 s of the 140 s of CPU of make race once compiled (2 cores), 6 s kept.
TEST_BINARIES ?= $(CURDIR)/.test-binaries

# RACE is go test with the race detector, without three of its costs: the links of unchanged
# test binaries (TEST_BINARIES); the second each test binary sleeps as it exits (GORACE's
# atexit_sleep_ms), which only lets goroutines still running then report a race (each test's own
# are reported as it ends); and checkptr's checks of the unsafe pointer arithmetic of SQLite as
# transpiled from C (modernc.org/...), none of it ours, which took a quarter of the CPU of the
# tests that write. Three packages at a time (-p 3): store/mongo's tests mostly wait, and two
# would leave a core idle. `make race`: 50-52 s once compiled on 2 cores, where `go test -race ./...`
# takes 108 s.
RACE = env GORACE="atexit_sleep_ms=0 $$GORACE" $(GO) test -race -gcflags='modernc.org/...=-d=checkptr=0' -p 3 -o $(TEST_BINARIES)/race/

# ALONE runs the timed tests while no other make test on the machine runs any step, which each
# runs under BESIDE (flock(1)'s exclusive and shared locks on TIMED_LOCK; neither waits where
# flock is missing; a lock file another user made fails the step with flock's message: set
# TIMED_LOCK). A timed test compares a normal client's p99 under attack with its own quiet p99:
# two make test side by side put both attacks on the cores at once, and failed three bounds of
# hostile_*_test.go (p99 42-116 ms against 36-44 ms); with only the attacks apart, the other's
# race step under one's quiet phase and not under its attack failed them still.
TIMED_LOCK ?= $(or $(TMPDIR),/tmp)/caddy-posts-timed.lock
ALONE = $(shell command -v flock >/dev/null && echo flock $(TIMED_LOCK))
BESIDE = $(shell command -v flock >/dev/null && echo flock --shared $(TIMED_LOCK))

# A step of make test prefixed with it says how long it took, once it ends, and the CPU time
# (user, system) of what it ran: on 2 cores, a step is as short as its CPU time over two.
STEP = start=$$(date +%s); trap 'echo "[the step above took $$(( $$(date +%s) - start ))s; user and system CPU of its shell, then of what it ran:]"; times' EXIT;

# The version of CHANGELOG.md's latest release: the module's version in ./caddy, which
# xcaddy.json pins and make release sets.
RELEASED = $(shell sed -n 's/^## \[\([0-9]*\.[0-9]*\.[0-9]*\)\] - .*/\1/p' CHANGELOG.md | head -n 1)

# make test, in order: formatting and vet (every build tag); the packages' tests with the race
# detector; then, without it, only the tests that step could not check (internal/norace), the long
# tests (//go:build long) among them; the whole binary as processes
# but for the timed tests, a few at a time; ./caddy built and checked with the ecosystem recipes
# and the Go benchmarks; then the timed tests one after the other, alone; then the interop tests.
# Each step prefixed with STEP says how long it took. `go test ./...` alone is the gate to run first.
test: deps
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(BESIDE) $(GO) vet -tags integration,ecosystem,long ./...
	cd build && $(BESIDE) $(GO) vet ./...
	$(STEP) $(BESIDE) $(RACE) -count=1 ./...
	# Without the race detector, only the tests the race step could not check (internal/norace
	# lists them): the long tests (//go:build long), the suites built only without it (!race), and
	# those that depend on what differs without it: a bound checked only then (internal/race), a
	# tighter factor, a backend (FerretDB) added by a file built only then. Three packages at a time
	# (-p 3), the three with long tests first, and four tests at a time in each (-parallel 4):
	# store/mongo's wait out a slow database, mostly idle. Every test again took 124 s and 214 s of
	# CPU; these, 60-65 s and 114 s (2 cores). Not in one go test with the integration tests:
	# beside these, integration's processes took 244 s from 116 s alone.
	$(STEP) args=$$(GO=$(GO) $(GO) run ./internal/norace ./store/mongo/ ./schema/ ./store/sqlite/ ./...) && $(BESIDE) $(GO) test -count=1 -p 3 -parallel 4 -tags long -o $(TEST_BINARIES)/long/ $$args
	$(STEP) $(BESIDE) $(GO) test -count=1 -tags integration -o $(TEST_BINARIES)/integration/ -skip '$(TIMED)' ./integration/
	$(STEP) $(BESIDE) $(MAKE) --no-print-directory checks
	@echo "go test -tags integration -run TIMED ./integration/ (one after the other, alone on the machine)"
	@$(STEP) out=$$($(ALONE) $(GO) test -count=1 -tags integration -o $(TEST_BINARIES)/integration/ -parallel 1 -v -run '$(TIMED)' ./integration/ 2>&1); status=$$?; \
		if [ $$status -eq 0 ]; then echo "$$out" | grep -E '^(--- |ok )|process_relay|process_breaker|process_resume|process_streams|hostile'; else echo "$$out"; fi; exit $$status
	$(STEP) $(MAKE) interop

# Every package's tests with the race detector, as make test runs them.
race:
	$(RACE) -count=1 ./...

# What make test checks of ./caddy: the module in it at the changelog's latest release, the
# repository's Caddyfile valid; then the ecosystem recipes in it, and the Go benchmarks once.
checks: caddy
	./caddy list-modules | grep -qx 'http.handlers.posts' || { echo "http.handlers.posts is not in ./caddy"; exit 1; }
	./caddy list-modules --versions | grep -qx 'http.handlers.posts v$(RELEASED)' || { echo "./caddy's http.handlers.posts is not v$(RELEASED), CHANGELOG.md's latest release: see xcaddy.json"; exit 1; }
	./caddy validate --config Caddyfile
	$(GO) test -tags ecosystem -count=1 ./ecosystem/
	$(GO) test -run '^$$' -bench . -benchtime 50x ./bench/

# Runs the recipes of docs/recipes.md with other Caddy modules (```caddyfile ecosystem <name> blocks:
# encode, basic_auth, forward_auth, rate_limit, reverse_proxy, cache) in ./caddy.
ecosystem: caddy
	$(GO) test -tags ecosystem -count=1 ./ecosystem/

# What make test needs beyond Go, installed when missing: Debian's chromium (the interop tests'
# browser) and prometheus (its promtool lints the metrics), with apt-get when run as root; Node 20
# and npm, which Debian's nodejs is too old for, are named when missing. The interop tests' npm packages are installed once per
# interop/package-lock.json, in NODE_CACHE, and interop/node_modules links to them.
NODE_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/caddy-posts
deps:
	@command -v node >/dev/null && command -v npm >/dev/null || { echo "make test needs Node 20 and npm for the interop tests: https://nodejs.org/en/download"; exit 1; }
	@missing=""; \
	command -v chromium >/dev/null || [ -x "$$CHROMIUM" ] || missing="$$missing chromium"; \
	command -v promtool >/dev/null || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then \
			echo "make test: installing Debian's$$missing"; \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing || exit 1; \
		else \
			echo "make test needs$$missing: install them (sudo apt-get install$$missing) or run make test as root"; exit 1; \
		fi; \
	fi
	@key=$$(sha256sum interop/package-lock.json | cut -c1-16); dir="$(NODE_CACHE)/interop-$$key"; \
	if [ ! -d "$$dir/node_modules" ]; then \
		tmp="$$dir.$$$$"; rm -rf "$$tmp"; mkdir -p "$$tmp"; \
		cp interop/package.json interop/package-lock.json "$$tmp/"; \
		(cd "$$tmp" && npm ci --no-audit --no-fund) || { rm -rf "$$tmp"; exit 1; }; \
		mv -T "$$tmp" "$$dir" 2>/dev/null || rm -rf "$$tmp"; \
	fi; \
	if [ "$$(readlink interop/node_modules)" != "$$dir/node_modules" ]; then rm -rf interop/node_modules; ln -s "$$dir/node_modules" interop/node_modules; fi

# Drives ./caddy with real third-party clients (Node 20 and npm: jose for JWTs, graphql-http's audit,
# graphql-js, GraphiQL in headless Chromium through puppeteer-core; see interop/).
# Each test file starts a Caddy of its own, so INTEROP_CONCURRENCY files run at a time.
INTEROP_CONCURRENCY ?= 3
interop: caddy deps
	cd interop && $(BESIDE) node --test --test-concurrency=$(INTEROP_CONCURRENCY)

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
	@out=$$(MODEL_DURATION=$(SOAK_DURATION) $(GO) test -count=1 -timeout 0 -v -tags long $(SOAK_FLAGS) -run 'TestModel' ./schema/ 2>&1); status=$$?; \
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
	rm -rf caddy $(TEST_BINARIES)
